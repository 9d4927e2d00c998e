//! The `specjms` workload: a SPECjms2007-like supply chain (it is not SPECjms2007 and its
//! results are not SPECjms2007 results). Supermarkets, distribution centers, suppliers and
//! headquarters exchange the nineteen message types of the seven interactions at the spec's
//! rates, in horizontal, vertical or freeform topologies and the jms2009-PS destination
//! layouts; after a warm-up, a measurement and a drain, the auditor judges the run rule by
//! rule; `--find-max` searches the largest BASE that passes; `--model` calibrates the capacity
//! model on a run and prints its predictions beside the measurements.
//!
//! Modules: [`spec`] (the tables), [`topology`] (counts, rates and the message model),
//! [`layout`] (destinations and subscriptions), [`agents`] (initiators and handlers),
//! [`starts`] (the connections interactions start on), [`header`](mod@header) (what each
//! body starts with), [`audit`] (the run rules), [`capacity`] (the model), [`args`] (the
//! flags).

pub mod agents;
pub mod args;
pub mod audit;
pub mod capacity;
pub mod header;
pub mod layout;
pub mod spec;
pub mod starts;
pub mod topology;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde_json::json;

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
use capacity::{Calibration, Model};
use layout::{CfoLayout, Layout, Plan};
use spec::{Interaction, MessageType};
use topology::Topology;

super::workload::impl_workload!(SpecjmsArgs, measure, header);

/// One run at one BASE.
struct Trial {
    base: u32,
    audit: Audit,
    input: AuditInput,
    result: TargetResult,
    calibration: Option<Calibration>,
    broker_cpu_utilization: Option<f64>,
    /// Connections the locations started interactions on (more than one a location when a
    /// start was due while the others were inside a transaction).
    start_connections: u64,
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
    let outcome = trials(args, &server, pid).await;
    if let Some(c) = child {
        c.stop().await;
    }
    let trials = outcome?;
    report(args, trials)
}

/// The runs: one, or the search.
async fn trials(args: &SpecjmsArgs, server: &str, pid: Option<u32>) -> Result<Vec<Trial>> {
    let driver = driver(args, server)?;
    let mut done = Vec::new();
    let mut base = args.base;
    let (mut pass, mut fail): (Option<u32>, Option<u32>) = (None, None);
    loop {
        let t = run_at(args, driver.clone(), base, pid).await?;
        if !args.output.quiet {
            eprintln!(
                "ferry-bench specjms: BASE {base}: {}",
                if t.audit.passed {
                    "passed".to_string()
                } else {
                    format!("failed\n{}", t.audit.failures())
                }
            );
        }
        if t.audit.passed {
            pass = Some(pass.map_or(base, |p| p.max(base)));
        } else {
            fail = Some(fail.map_or(base, |f| f.min(base)));
        }
        done.push(t);
        if !args.find_max || done.len() >= args.max_trials as usize {
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
) -> Result<Trial> {
    let topo = topology(args, base)?;
    let plan = Plan {
        layout: args.layout,
        cfo: args.cfo,
    };
    let started = Instant::now();
    let windows = WindowSeries::new(
        started,
        args.warmup,
        args.window,
        args.warmup + args.duration + args.drain * 3,
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
        args.pool,
        shared.clone(),
        &name,
    )
    .await?;
    // The clock starts once everything is subscribed.
    let started = Instant::now();
    let shared_started = shared.started;
    let offset = started.saturating_duration_since(shared_started);
    let measure_start = shared_started + offset + args.warmup;
    let measure_end = measure_start + args.duration;
    let initiators = agents::initiate(world.clone(), measure_start, measure_end);
    let mut plan_line = ProgressPlan::of("specjms", driver.name(), &args.common);
    plan_line.warmup = args.warmup + offset;
    let progress = Progress::start(shared.clone(), plan_line, args.output.quiet);
    tokio::time::sleep_until(measure_start.into()).await;
    shared.set_phase(MEASURE);
    let cpu0 = pid.and_then(capacity::process_cpu_s);
    let disk0 = capacity::disks_busy_s();
    let bytes0 = pid.and_then(capacity::process_write_bytes);
    let flipped = Instant::now();
    tokio::time::sleep_until(measure_end.into()).await;
    let secs = flipped.elapsed().as_secs_f64();
    let cpu1 = pid.and_then(capacity::process_cpu_s);
    let disk1 = capacity::disks_busy_s();
    let bytes1 = pid.and_then(capacity::process_write_bytes);
    shared.set_phase(STOP);
    for i in initiators {
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
    for i in Interaction::ALL {
        let configured = topo.total_rate(i);
        if configured <= 0.0 {
            continue;
        }
        let Some(c) = world.interaction_counts(i) else {
            continue;
        };
        let starts = c.starts.load(Ordering::Relaxed);
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
            pacing_misses: c.misses.load(Ordering::Relaxed),
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
    let persistent: u64 = MessageType::ALL
        .iter()
        .filter(|t| t.spec().persistent)
        .filter_map(|&t| world.type_counts(t))
        .map(|c| c.measured.load(Ordering::Relaxed))
        .sum();
    let calibration = match (cpu0, cpu1) {
        (Some(a), Some(b)) => Some(Calibration {
            secs,
            messages: measured as f64,
            persistent: persistent as f64,
            cpu_s: b - a,
            cores: pid.map_or(1.0, capacity::process_cores),
            disk_busy_s: disk0.zip(disk1).map(|(a, b)| b - a),
            disk_bytes: bytes0.zip(bytes1).map(|(a, b)| b - a),
            messages_per_base: topo.messages_per_s() / f64::from(base),
        }),
        _ => None,
    };
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
        broker_cpu_utilization: calibration.map(|c| c.cpu_s / (c.secs * c.cores)),
        audit,
        input,
        result,
        calibration,
        start_connections,
    })
}

/// The report: the last passing run's figures (or the last run's), every trial's verdict, the
/// model's predictions beside the measurements.
fn report(args: &SpecjmsArgs, trials: Vec<Trial>) -> Result<BenchReport> {
    let best_trial = trials
        .iter()
        .filter(|t| t.audit.passed)
        .max_by_key(|t| t.base)
        .or_else(|| trials.last())
        .ok_or_else(|| anyhow!("no trial ran"))?;
    let largest_passing = trials
        .iter()
        .filter(|t| t.audit.passed)
        .map(|t| t.base)
        .max();
    // Calibrated on the first passing run (the first run when none passed).
    let calibrated = trials
        .iter()
        .find(|t| t.audit.passed && t.calibration.is_some())
        .or_else(|| trials.iter().find(|t| t.calibration.is_some()))
        .filter(|_| args.model);
    let model = calibrated.and_then(|t| t.calibration.map(|c| (t.base, Model::calibrate(&c))));
    let (calibrated_on, model) = match model {
        Some((b, m)) => (Some(b), Some(m)),
        None => (None, None),
    };
    let trial_rows: Vec<_> = trials
        .iter()
        .map(|t| {
            let predicted = model.map(|m| m.predict(f64::from(t.base)));
            json!({
                "base": t.base,
                "passed": t.audit.passed,
                "rules": t.audit.rules,
                "received_per_s": t.result.received_per_s,
                "broker_cpu_utilization": t.broker_cpu_utilization,
                "predicted_cpu_utilization": predicted.map(|p| p.cpu_utilization),
                "interactions": t.input.interactions.iter().map(|i| {
                    let persistent_share = persistent_share(&i.interaction);
                    json!({
                        "interaction": i.interaction,
                        "configured_per_s": i.configured_per_s,
                        "measured_per_s": i.measured_per_s,
                        "starts": i.starts,
                        "pacing_misses": i.pacing_misses,
                        "model_messages": i.model_messages,
                        "messages": i.messages,
                        "delivery_mean_ms": i.delivery_mean_ms,
                        "predicted_delivery_mean_ms": predicted.map(|p| persistent_share * p.persistent_ms + (1.0 - persistent_share) * p.non_persistent_ms),
                    })
                }).collect::<Vec<_>>(),
                "destinations": t.input.destinations_p90_ms.len(),
                "worst_p90_ms": t.input.destinations_p90_ms.iter().map(|(_, p)| *p).fold(0.0, f64::max),
                "receipts_owed": t.input.receipts_owed,
                "receipts": t.input.receipts,
                "start_connections": t.start_connections,
            })
        })
        .collect();
    let mut result = best_trial.result.clone();
    result.operations = BTreeMap::new();
    let topo = topology(args, best_trial.base)?;
    Ok(BenchReport {
        workload: "specjms".to_string(),
        environment: None,
        params: json!({
            "name": "specjms2007-like (not SPECjms2007 results)",
            "topology": topo.name,
            "base": args.base,
            "layout": format!("{:?}", args.layout).to_lowercase(),
            "cfo": format!("{:?}", args.cfo).to_lowercase(),
            "transactions": args.transactions,
            "interactions": args.interactions,
            "find_max": args.find_max,
            "pool": args.pool,
            "duration_s": args.duration.as_secs_f64(),
            "warmup_s": args.warmup.as_secs_f64(),
            "drain_s": args.drain.as_secs_f64(),
            "window_s": args.window.as_secs_f64(),
            "locations": { "sm": topo.sm, "dc": topo.dc, "sp": topo.sp, "hq": topo.hq, "families": topo.families },
            "messages_per_s_model": topo.messages_per_s(),
            "specjms": {
                "largest_passing_base": largest_passing,
                "reported_base": best_trial.base,
                "trials": trial_rows,
                "model": model.map(|m| json!({
                    "calibrated_on_base": calibrated_on,
                    "cpu_demand_us": m.cpu_demand_s * 1e6,
                    "disk_demand_us": m.disk_demand_s * 1e6,
                    "disk_bytes_per_message": m.disk_bytes_per_message,
                    "cores": m.cores,
                    "bottleneck": m.bottleneck(),
                    "predicted_max_base": m.max_base(),
                    "predicted_max_messages_per_s": m.max_messages_per_s(),
                })),
            },
        }),
        results: vec![result],
        compare: None,
    })
}

/// The share of persistent messages among an interaction's messages (by the model's mix),
/// from its report label `"<n> <name>"`.
fn persistent_share(label: &str) -> f64 {
    let Some(i) = Interaction::ALL
        .into_iter()
        .find(|i| label.ends_with(i.name()))
    else {
        return 1.0;
    };
    let types: Vec<MessageType> = MessageType::ALL
        .into_iter()
        .filter(|t| t.spec().interaction == i)
        .collect();
    types.iter().filter(|t| t.spec().persistent).count() as f64 / types.len().max(1) as f64
}

/// The lines above the figures: the audit of each run and the model.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let s = &p["specjms"];
    let mut out = format!(
        "ferry-bench specjms ({}): specjms2007-like, {} topology, layout {}, calls for offers {}, \
         transactions {}; {} s measured after {} s warm-up\n",
        report.results.first().map_or("?", |r| r.target.as_str()),
        p["topology"].as_str().unwrap_or("?"),
        p["layout"].as_str().unwrap_or("?"),
        p["cfo"].as_str().unwrap_or("?"),
        p["transactions"],
        p["duration_s"],
        p["warmup_s"],
    );
    for t in s["trials"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "BASE {}: {} ({:.0} messages/s received; {} of {} receipts after the drain; worst p90 {:.1} ms)\n",
            t["base"],
            if t["passed"] == true { "PASSED" } else { "FAILED" },
            t["received_per_s"].as_f64().unwrap_or(0.0),
            t["receipts"],
            t["receipts_owed"],
            t["worst_p90_ms"].as_f64().unwrap_or(0.0),
        ));
        for r in t["rules"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {:<15} {}  {}\n",
                r["rule"].as_str().unwrap_or("?"),
                if r["passed"] == true { "pass" } else { "FAIL" },
                r["reason"].as_str().unwrap_or("")
            ));
        }
        out.push_str("  interaction               starts/s  configured  messages   model  misses  delivery ms");
        out.push_str(if t["predicted_cpu_utilization"].is_null() {
            "\n"
        } else {
            "  predicted ms\n"
        });
        for i in t["interactions"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {:<24} {:>9.2} {:>11.2} {:>9} {:>7.0} {:>7} {:>12.2}",
                i["interaction"].as_str().unwrap_or("?"),
                i["measured_per_s"].as_f64().unwrap_or(0.0),
                i["configured_per_s"].as_f64().unwrap_or(0.0),
                i["messages"],
                i["model_messages"].as_f64().unwrap_or(0.0),
                i["pacing_misses"],
                i["delivery_mean_ms"].as_f64().unwrap_or(0.0),
            ));
            match i["predicted_delivery_mean_ms"].as_f64() {
                Some(v) => out.push_str(&format!(" {v:>13.2}\n")),
                None => out.push('\n'),
            }
        }
        if let (Some(m), Some(pr)) = (
            t["broker_cpu_utilization"].as_f64(),
            t["predicted_cpu_utilization"].as_f64(),
        ) {
            out.push_str(&format!(
                "  broker CPU utilization: measured {:.1}%, model {:.1}%\n",
                100.0 * m,
                100.0 * pr
            ));
        }
    }
    if let Some(b) = s["largest_passing_base"].as_u64() {
        out.push_str(&format!("largest BASE that passed: {b}\n"));
    }
    if let Some(m) = s["model"].as_object() {
        out.push_str(&format!(
            "model (calibrated on BASE {}): CPU {:.1} µs and disk {:.1} µs ({:.0} bytes) per message; \
             bottleneck {}; predicted largest BASE {:.0} ({:.0} messages/s)\n",
            m["calibrated_on_base"],
            m["cpu_demand_us"].as_f64().unwrap_or(0.0),
            m["disk_demand_us"].as_f64().unwrap_or(0.0),
            m["disk_bytes_per_message"].as_f64().unwrap_or(0.0),
            m["bottleneck"].as_str().unwrap_or("?"),
            m["predicted_max_base"].as_f64().unwrap_or(0.0),
            m["predicted_max_messages_per_s"].as_f64().unwrap_or(0.0),
        ));
    }
    out
}
