//! The `specjms` workload: a SPECjms2007-like supply chain (it is not SPECjms2007 and its
//! results are not SPECjms2007 results). Supermarkets, distribution centers, suppliers and
//! headquarters exchange the nineteen message types of the seven interactions at the spec's
//! rates, in horizontal, vertical or freeform topologies and the jms2009-PS destination
//! layouts; after a warm-up, a measurement and a drain, the auditor judges the run rule by
//! rule; `--find-max` searches the largest BASE that passes; `--model` fits the capacity
//! model over two or more runs and prints its predictions beside the measurements.
//!
//! Modules: [`spec`] (the tables), [`topology`] (counts, rates and the message model),
//! [`layout`] (destinations and subscriptions), [`agents`] (the locations and their
//! handlers), [`initiators`] (the starts at their rates), [`ramp`] (how starts rise to rate),
//! [`starts`] (the connections interactions start on),
//! [`pacing`] (how late starts were, and where their time went),
//! [`header`](mod@header) (what each body starts with), [`audit`] (the run rules),
//! [`probes`] (what the model is calibrated with), [`capacity`] (the model), [`report`] (the
//! JSON and the lines printed), [`args`] (the flags).

pub mod agents;
pub mod args;
pub mod audit;
pub mod capacity;
pub mod header;
pub mod initiators;
pub mod layout;
pub mod pacing;
pub mod probes;
pub mod ramp;
pub mod report;
pub mod spec;
pub mod starts;
pub mod topology;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

pub use args::{SpecjmsArgs, TopologyArg};

use crate::args::TargetArg;
use crate::drivers::amqp::AmqpDriver;
use crate::drivers::ferry::FerryDriver;
use crate::drivers::nats::{NatsDriver, NatsMode};
use crate::drivers::Driver;
use crate::report::{rate, BenchReport, TargetResult};
use crate::stats::windows::measured_stats;
use crate::stats::{percentile_curve, LatencySummary, WindowSeries};
use crate::workloads::progress::{Progress, ProgressPlan};
use crate::workloads::pubsub::child_broker::ChildBroker;
use crate::workloads::run::{Shared, WindowLatency, MEASURE, STOP, WARMUP};
use audit::{Audit, AuditInput, InteractionFigures};
use capacity::Calibration;
use layout::{CfoLayout, Layout, Plan};
use probes::Probe;
use spec::{Interaction, MessageType};
use topology::Topology;

pub use report::header;

super::workload::impl_workload!(SpecjmsArgs, measure, header);

/// One run at one BASE.
struct Trial {
    base: u32,
    /// Run for `--calibrate` (before the search).
    calibration_run: bool,
    audit: Audit,
    input: AuditInput,
    result: TargetResult,
    calibration: Option<Calibration>,
    broker_cpu_utilization: Option<f64>,
    /// Connections the locations started interactions on (more than one a location when a
    /// start was due while the others were inside a transaction).
    start_connections: u64,
    /// Per interaction of `input`: where the starts' time went before they sent.
    pacing: Vec<pacing::PacingFigures>,
}

/// The topology of `args` at `base`.
fn topology(args: &SpecjmsArgs, base: u32) -> Result<Topology> {
    let mut t = match args.topology {
        TopologyArg::Horizontal => Topology::horizontal(base),
        TopologyArg::Vertical => Topology::vertical(base),
        TopologyArg::Freeform => {
            let rates = args
                .rates
                .as_ref()
                .ok_or_else(|| anyhow!("--topology freeform needs --rates r1,...,r7"))?;
            let mut r = [0.0; 7];
            r.copy_from_slice(rates);
            Topology::freeform(
                args.sm,
                args.dc,
                args.sp,
                args.hq,
                args.families,
                args.families_per_sp,
                r,
            )
        }
    };
    for i in Interaction::ALL {
        if let (false, Some(rate)) = (
            args.interactions.contains(&(i.number() as u8)),
            t.rates.get_mut(i as usize),
        ) {
            *rate = 0.0;
        }
    }
    Ok(t)
}

/// The driver for `--target`, refusing what the target cannot express.
fn driver(args: &SpecjmsArgs, server: &str) -> Result<Arc<dyn Driver>> {
    let plan = Plan {
        layout: args.layout,
        cfo: args.cfo,
    };
    Ok(match args.target {
        TargetArg::Ferry => Arc::new(FerryDriver::new(
            server.to_string(),
            args.broker_fsync.clone(),
        )),
        TargetArg::Nats => {
            if plan.layout != Layout::Queues || plan.cfo != CfoLayout::PerFamily {
                bail!(
                    "target nats cannot express layout {:?} with calls for offers {:?}: NATS has no \
                     message selectors (a JetStream consumer filters by subject only, and \
                     nats-server 2.9 takes one filter subject per consumer, so neither a \
                     TargetLocationID selector nor a Family IN (...) selector can be had); it runs \
                     --layout queues --cfo per-family",
                    plan.layout,
                    plan.cfo
                );
            }
            if args.transactions {
                bail!(
                    "target nats has no transactions (JetStream publishes one message at a time); \
                     --transactions false runs the mix without them"
                );
            }
            Arc::new(NatsDriver::new(args.nats_url.clone(), NatsMode::JetStream))
        }
        TargetArg::Amqp => Arc::new(AmqpDriver::new(args.amqp_url.clone())),
        TargetArg::Postgres => {
            bail!("target postgres has no topics: specjms needs publish/subscribe")
        }
        TargetArg::Stomp => {
            bail!("target stomp: the stomp driver runs queue workloads; specjms runs on ferry, nats and amqp")
        }
    })
}

/// Runs the workload (one BASE, or the search for the largest passing one).
pub async fn measure(args: &SpecjmsArgs) -> Result<BenchReport> {
    if args.model && !args.own_broker && args.broker_pid.is_none() {
        bail!("--model needs the broker's process: --own-broker, or --broker-pid PID for the broker at --server");
    }
    let child = if args.own_broker {
        let binary = args
            .ferry_binary
            .clone()
            .ok_or_else(|| anyhow!("--own-broker needs the ferry binary"))?;
        Some(ChildBroker::start(&binary, &args.broker_fsync).await?)
    } else {
        None
    };
    let server = child
        .as_ref()
        .map_or(args.server.clone(), |c| c.addr().to_string());
    let pid = child.as_ref().map(ChildBroker::pid).or(args.broker_pid);
    // The fsync's service time, timed before any load on the filesystem the own broker's
    // data directory is made in (the system's temporary directory).
    let fsync_s = args
        .model
        .then(|| probes::fsync_seconds(&std::env::temp_dir(), FSYNC_PROBES))
        .flatten();
    let outcome = trials(args, &server, pid, fsync_s).await;
    if let Some(c) = child {
        c.stop().await;
    }
    let trials = outcome?;
    report::report(args, trials)
}

/// Fsyncs timed for the model's commit wait.
const FSYNC_PROBES: u32 = 50;

/// The runs: the calibration runs, then one run or the search.
async fn trials(
    args: &SpecjmsArgs,
    server: &str,
    pid: Option<u32>,
    fsync_s: Option<f64>,
) -> Result<Vec<Trial>> {
    let driver = driver(args, server)?;
    let mut done = Vec::new();
    let say = |t: &Trial, what: &str| {
        if !args.output.quiet {
            eprintln!(
                "ferry-bench specjms: {what}BASE {}: {}",
                t.base,
                if t.audit.passed {
                    "passed".to_string()
                } else {
                    format!("failed\n{}", t.audit.failures())
                }
            );
        }
    };
    for &base in &args.calibrate {
        let mut t = run_at(args, driver.clone(), base, pid, fsync_s).await?;
        t.calibration_run = true;
        say(&t, "calibration, ");
        done.push(t);
    }
    let searched = done.len();
    let mut base = args.base;
    let (mut pass, mut fail): (Option<u32>, Option<u32>) = (None, None);
    loop {
        let t = run_at(args, driver.clone(), base, pid, fsync_s).await?;
        say(&t, "");
        if t.audit.passed {
            pass = Some(pass.map_or(base, |p| p.max(base)));
        } else {
            fail = Some(fail.map_or(base, |f| f.min(base)));
        }
        done.push(t);
        if !args.find_max || done.len() - searched >= args.max_trials as usize {
            break;
        }
        base = match (pass, fail) {
            (Some(p), None) => p * 2,
            (None, Some(f)) if f > 1 => f / 2,
            (Some(p), Some(f)) if f - p > (p / 20).max(1) => p + (f - p) / 2,
            _ => break,
        };
    }
    Ok(done)
}

/// One run at `base`.
async fn run_at(
    args: &SpecjmsArgs,
    driver: Arc<dyn Driver>,
    base: u32,
    pid: Option<u32>,
    fsync_s: Option<f64>,
) -> Result<Trial> {
    let topo = topology(args, base)?;
    let plan = Plan {
        layout: args.layout,
        cfo: args.cfo,
    };
    let started = Instant::now();
    let windows = WindowSeries::new(
        started,
        args.ramp + args.warmup,
        args.window,
        args.ramp + args.warmup + args.duration + args.drain * 3,
    );
    let shared = Arc::new(Shared::new(
        rand::random(),
        started,
        WARMUP,
        None,
        windows,
        WindowLatency::EndToEnd,
    ));
    let name = format!(
        "ferry-bench-spec-{}-{:06x}",
        std::process::id(),
        rand::random::<u32>() & 0xff_ffff
    );
    let (world, consumers) = agents::build(
        driver.clone(),
        topo.clone(),
        plan,
        args.transactions,
        agents::Connections {
            pool: args.pool,
            start_connections: args.start_connections,
        },
        shared.clone(),
        &name,
    )
    .await?;
    // The clock starts once everything is subscribed.
    let started = Instant::now();
    let shared_started = shared.started;
    let offset = started.saturating_duration_since(shared_started);
    let measure_start = shared_started + offset + args.ramp + args.warmup;
    let measure_end = measure_start + args.duration;
    let drivers = initiators::initiate(
        world.clone(),
        started,
        args.ramp,
        measure_start,
        measure_end,
    );
    let mut plan_line = ProgressPlan::of("specjms", driver.name(), &args.common);
    plan_line.warmup = args.ramp + args.warmup + offset;
    let progress = Progress::start(shared.clone(), plan_line, args.output.quiet);
    tokio::time::sleep_until(measure_start.into()).await;
    shared.set_phase(MEASURE);
    let before = Probe::now(pid);
    let flipped = Instant::now();
    tokio::time::sleep_until(measure_end.into()).await;
    let secs = flipped.elapsed().as_secs_f64();
    let used = Probe::now(pid).since(&before);
    shared.set_phase(STOP);
    for i in drivers {
        let _ = i.await;
    }
    // Drain: until every receipt owed arrived, or nothing arrives for --drain.
    let mut last = world.received.load(Ordering::Relaxed);
    let mut deadline = Instant::now() + args.drain;
    loop {
        let received = world.received.load(Ordering::Relaxed);
        if received >= world.owed.load(Ordering::Relaxed) {
            // Handlers may still be sending what their last receipt caused.
            tokio::time::sleep(Duration::from_millis(50)).await;
            if world.received.load(Ordering::Relaxed) >= world.owed.load(Ordering::Relaxed) {
                break;
            }
        }
        if received > last {
            last = received;
            deadline = Instant::now() + args.drain;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    progress.finish();
    let owed = world.owed.load(Ordering::Relaxed);
    let receipts = world.received.load(Ordering::Relaxed);
    let start_connections = world.start_connections();
    consumers.finish(&world, args.keep).await;

    let model = topo.model();
    let mut interactions = Vec::new();
    let mut pacing = Vec::new();
    for i in Interaction::ALL {
        let configured = topo.total_rate(i);
        if configured <= 0.0 {
            continue;
        }
        let Some(c) = world.interaction_counts(i) else {
            continue;
        };
        let starts = c.pacing.starts.load(Ordering::Relaxed);
        pacing.push(c.pacing.figures());
        let types: Vec<MessageType> = MessageType::ALL
            .into_iter()
            .filter(|t| t.spec().interaction == i)
            .collect();
        let messages: u64 = types
            .iter()
            .filter_map(|&t| world.type_counts(t))
            .map(|c| c.measured.load(Ordering::Relaxed))
            .sum();
        let delivery_us: u64 = types
            .iter()
            .filter_map(|&t| world.type_counts(t))
            .map(|c| c.delivery_us.load(Ordering::Relaxed))
            .sum();
        interactions.push(InteractionFigures {
            interaction: format!("{} {}", i.number(), i.name()),
            configured_per_s: configured,
            measured_per_s: starts as f64 / args.duration.as_secs_f64(),
            starts,
            pacing_misses: c.pacing.misses.load(Ordering::Relaxed),
            model_messages: types.iter().filter_map(|t| model.get(t)).sum::<f64>()
                * args.duration.as_secs_f64(),
            messages,
            delivery_mean_ms: if messages > 0 {
                delivery_us as f64 / messages as f64 / 1000.0
            } else {
                0.0
            },
        });
    }
    let by_destination = std::mem::take(
        &mut *world
            .by_destination
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut all = crate::stats::new_histogram();
    let destinations_p90_ms = by_destination
        .iter()
        .map(|(d, h)| {
            let _ = all.add(h);
            (d.clone(), h.value_at_quantile(0.9) as f64 / 1000.0)
        })
        .collect();
    let input = AuditInput {
        interactions,
        destinations_p90_ms,
        receipts_owed: owed,
        receipts,
    };
    let audit = audit::audit(&input);
    let measured = shared.received_measured.load(Ordering::Relaxed);
    let committed: u64 = MessageType::ALL
        .into_iter()
        .filter(|&t| report::committed(t, args.transactions))
        .filter_map(|t| world.type_counts(t))
        .map(|c| c.measured.load(Ordering::Relaxed))
        .sum();
    let calibration = used.broker_cpu_s.map(|broker_cpu_s| Calibration {
        base: f64::from(base),
        secs,
        messages: measured as f64,
        committed: committed as f64,
        broker_cpu_s,
        generator_cpu_s: used.generator_cpu_s,
        machine_busy_s: used.machine_busy_s,
        disk_busy_s: used.disks.map(|d| d.busy_s),
        disk_bytes: used.broker_write_bytes,
        flushes: used.disks.map(|d| d.flushes),
        fsync_s,
        commits: world.commits.load(Ordering::Relaxed) as f64,
        commit_s: world.commit_us.load(Ordering::Relaxed) as f64 / 1e6,
        broker_cores: pid.map_or(1.0, probes::process_cores),
        machine_cores: probes::machine_cores(),
    });
    let rows = shared.windows.rows(measure_start, measure_end);
    let latency = LatencySummary::of(&all);
    let result = TargetResult {
        target: driver.name().to_string(),
        durability: driver.durability(),
        capabilities: driver.capabilities(),
        send_secs: secs,
        receive_secs: secs,
        sent: owed,
        received: receipts,
        sent_per_s: topo.messages_per_s(),
        received_per_s: rate(measured, secs),
        sent_mib_per_s: 0.0,
        latency_ms: latency.clone(),
        latency_kind: "end_to_end".to_string(),
        latencies_ms: BTreeMap::from([("end_to_end".to_string(), latency)]),
        window_s: args.window.as_secs_f64(),
        window_stats: measured_stats(&rows),
        windows: rows,
        errors: shared.error_counts(),
        operations: BTreeMap::new(),
        percentile_curves_ms: BTreeMap::from([("end_to_end".to_string(), percentile_curve(&all))]),
        broker_cpu: None,
        stream: None,
    };
    Ok(Trial {
        base,
        calibration_run: false,
        broker_cpu_utilization: calibration.map(|c| c.broker_cpu_s / (c.secs * c.broker_cores)),
        audit,
        input,
        result,
        calibration,
        start_connections,
        pacing,
    })
}
