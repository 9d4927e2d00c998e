//! The engine of the publish/subscribe workloads (`fanout`, `selector`): one publisher on one
//! topic, N subscriptions, each consumed by a consumer on a connection of its own (push,
//! auto or client ack, large prefetch). The publisher publishes batches with several batches
//! in flight; every message carries properties that fix how many subscriptions it reaches
//! ([`plan`]), so the deliveries owed are known exactly and the run drains them before it
//! ends.
//!
//! Reported: published messages (as `sent`) and deliveries summed over the subscriptions (as
//! `received`) per second, publish-to-ack and end-to-end latency, and, when the broker's
//! process can be observed (a broker the bench started, or `--broker-pid`), its CPU time per
//! published and per delivered message ([`cpu`]).
//!
//! Modules: [`plan`] (properties and selectors), [`publisher`], [`cpu`], [`child_broker`] (a
//! broker of the bench's own, as a child process), [`args`] (the flags both workloads share).

pub mod args;
pub mod child_broker;
pub mod cpu;
pub mod plan;
pub mod publisher;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use tokio::sync::watch;

pub use args::PubSubArgs;
pub use plan::SelectorPlan;

use crate::args::CommonArgs;
use crate::drivers::{Consumer, TopicSubscription};
use crate::report::{rate, BenchReport, BrokerCpu, TargetResult};
use crate::stats::windows::measured_stats;
use crate::stats::{new_histogram, percentile_curve, LatencySummary, WindowSeries};
use crate::workloads::progress::{Progress, ProgressPlan};
use crate::workloads::run::{Shared, WindowLatency, COOLDOWN, MEASURE, STOP, WARMUP};
use crate::workloads::{consumer, setup};
use publisher::{Expected, PublisherConfig};

/// How long the subscribers may go without progress while draining after the publisher stops.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// One pub/sub run, as the workload describes it.
#[derive(Debug, Clone)]
pub struct PubSubSpec {
    /// `fanout` or `selector`.
    pub workload: &'static str,
    /// The topic.
    pub topic: String,
    /// Subscriptions, selectors and message properties.
    pub plan: SelectorPlan,
    /// The shared flags.
    pub args: PubSubArgs,
}

/// Runs the workload and returns its report. `broker_pid` is the broker process to measure the
/// CPU of, if known.
pub async fn measure(
    spec: &PubSubSpec,
    common: &CommonArgs,
    broker_pid: Option<u32>,
) -> Result<BenchReport> {
    let a = &spec.args;
    let n = spec.plan.subscriptions;
    let driver = setup::driver(common)?;
    if !a.persistent && !driver.supports_non_persistent() {
        bail!(
            "--persistent false: the {} target cannot publish non-persistent messages",
            driver.name()
        );
    }
    let base = common.client_name();
    let admin = setup::connect(driver.as_ref(), &format!("{base}-admin")).await?;
    let limits = admin.limits();
    if a.batch > limits.max_batch {
        bail!(
            "--batch {} is above the broker's limit of {}",
            a.batch,
            limits.max_batch
        );
    }
    let prefetch = a.prefetch.min(limits.max_prefetch);
    if prefetch < a.prefetch {
        eprintln!("ferry-bench: prefetch lowered to the broker's limit of {prefetch}");
    }
    admin
        .ensure_topic(&spec.topic)
        .await
        .map_err(|e| anyhow!(e.message))?;
    let names: Vec<String> = (0..n).map(|i| format!("bench-sub-{i}")).collect();
    if a.durable {
        // A durable subscription left by an earlier run would hold its backlog: start afresh.
        for name in &names {
            admin
                .remove_subscription(&spec.topic, name)
                .await
                .map_err(|e| anyhow!(e.message))?;
        }
    }

    // Connect and subscribe everyone before the clock starts: that is not what is measured.
    let mut subscribers = Vec::with_capacity(names.len());
    for (i, name) in (0..n).zip(&names) {
        let conn = setup::connect(driver.as_ref(), &format!("{base}-s{i}")).await?;
        let sub = TopicSubscription {
            durable: a.durable.then(|| name.clone()),
            selector: spec.plan.selector(i),
            client_ack: a.ack_client(),
            prefetch,
            bindings: Vec::new(),
        };
        let consumer: Box<dyn Consumer> = conn
            .subscribe_topic(&spec.topic, &sub)
            .await
            .map_err(|e| anyhow!(e.message))?;
        subscribers.push((conn, consumer));
    }
    let publisher_conn = setup::connect(driver.as_ref(), &format!("{base}-p")).await?;

    let started = Instant::now();
    let (warmup, cooldown) = (common.warmup, common.cooldown);
    let expected_len = warmup + common.duration + cooldown + DRAIN_LIMIT;
    let windows = WindowSeries::new(started, warmup, common.trace_window(), expected_len);
    let shared = Arc::new(Shared::new(
        rand::random(),
        started,
        WARMUP,
        None,
        windows,
        WindowLatency::EndToEnd,
    ));
    let progress = Progress::start(
        shared.clone(),
        ProgressPlan::of(spec.workload, driver.name(), common),
        common.quiet,
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let consumers: Vec<_> = subscribers
        .into_iter()
        .map(|(conn, c)| consumer::spawn(conn, vec![c], shared.clone(), stop_rx.clone()))
        .collect();
    let expected = Arc::new(Expected::default());
    let publisher = tokio::spawn(publisher::run(
        publisher_conn,
        PublisherConfig {
            topic: spec.topic.clone(),
            in_flight: a.in_flight,
            batch: a.batch,
            size: a.size as usize,
            persistent: a.persistent,
            plan: spec.plan.clone(),
            max_backlog: a.max_backlog,
        },
        shared.clone(),
        expected.clone(),
    ));

    let measure_start = started + warmup;
    let measure_end = measure_start + common.duration;
    tokio::time::sleep_until(measure_start.into()).await;
    shared.set_phase(MEASURE);
    let flipped = Instant::now();
    let cpu_before = broker_pid.and_then(cpu::cpu_time);
    let own_before = cpu::cpu_time(std::process::id());
    tokio::time::sleep_until(measure_end.into()).await;
    shared.set_phase(COOLDOWN);
    let measured_secs = flipped.elapsed().as_secs_f64();
    let cpu_after = broker_pid.and_then(cpu::cpu_time);
    let own_after = cpu::cpu_time(std::process::id());
    tokio::time::sleep(cooldown).await;
    shared.set_phase(STOP);

    let publish_hist = match publisher.await {
        Ok(h) => h,
        Err(e) => {
            shared.note_error(format!("publisher failed: {e}"));
            new_histogram()
        }
    };
    drain(&shared, &expected).await;
    let _ = stop_tx.send(true);
    let mut e2e_hist = new_histogram();
    for c in consumers {
        match c.await {
            Ok(h) => {
                let _ = e2e_hist.add(h);
            }
            Err(e) => shared.note_error(format!("consumer failed: {e}")),
        }
    }
    progress.finish();
    if a.durable {
        for name in &names {
            if let Err(e) = admin.remove_subscription(&spec.topic, name).await {
                shared.note_error(format!("unsubscribe {name}: {}", e.message));
            }
        }
    }
    admin.close().await;
    let topics = [spec.topic.clone()];
    setup::remove(
        driver.as_ref(),
        &format!("{base}-cleanup"),
        &[],
        &topics,
        common.keep,
    )
    .await;

    let sent = shared.sent_measured.load(Ordering::Relaxed);
    let received = shared.received_measured.load(Ordering::Relaxed);
    let cores = |cpu_s: f64| {
        if measured_secs > 0.0 {
            cpu_s / measured_secs
        } else {
            0.0
        }
    };
    let broker_cpu = match (broker_pid, cpu_before, cpu_after) {
        (Some(pid), Some(t0), Some(t1)) => {
            let cpu_s = t1.saturating_sub(t0).as_secs_f64();
            let own_s = match (own_before, own_after) {
                (Some(a), Some(b)) => b.saturating_sub(a).as_secs_f64(),
                _ => 0.0,
            };
            Some(BrokerCpu {
                pid,
                cpu_s,
                cores: cores(cpu_s),
                bench_cores: cores(own_s),
                us_per_sent: per_message_us(cpu_s, sent),
                us_per_received: per_message_us(cpu_s, received),
            })
        }
        _ => None,
    };
    let rows = shared.windows.rows(measure_start, measure_end);
    let publish_to_ack = LatencySummary::of(&publish_hist);
    let end_to_end = LatencySummary::of(&e2e_hist);
    let result = TargetResult {
        target: driver.name().to_string(),
        durability: if a.persistent {
            driver.durability()
        } else {
            driver.non_persistent_durability()
        },
        capabilities: driver.capabilities(),
        send_secs: measured_secs,
        receive_secs: measured_secs,
        sent,
        received,
        sent_per_s: rate(sent, measured_secs),
        received_per_s: rate(received, measured_secs),
        sent_mib_per_s: rate(sent, measured_secs) * f64::from(a.size) / (1024.0 * 1024.0),
        latency_ms: end_to_end.clone(),
        latency_kind: "end_to_end".to_string(),
        latencies_ms: BTreeMap::from([
            ("send_to_ack".to_string(), publish_to_ack),
            ("end_to_end".to_string(), end_to_end),
        ]),
        window_s: shared.windows.window().as_secs_f64(),
        window_stats: measured_stats(&rows),
        windows: rows,
        errors: shared.error_counts(),
        operations: BTreeMap::new(),
        percentile_curves_ms: BTreeMap::from([
            ("send_to_ack".to_string(), percentile_curve(&publish_hist)),
            ("end_to_end".to_string(), percentile_curve(&e2e_hist)),
        ]),
        broker_cpu,
        stream: None,
    };
    Ok(BenchReport {
        environment: None,
        workload: spec.workload.to_string(),
        params: params(spec, common, prefetch, broker_pid),
        results: vec![result],
        compare: None,
    })
}

/// CPU µs per message; 0 without messages.
fn per_message_us(cpu_s: f64, messages: u64) -> f64 {
    if messages == 0 {
        0.0
    } else {
        cpu_s * 1e6 / messages as f64
    }
}

/// Waits until the subscribers have received every delivery owed, or until they go
/// [`DRAIN_LIMIT`] without progress.
async fn drain(shared: &Shared, expected: &Expected) {
    let mut deadline = Instant::now() + DRAIN_LIMIT;
    let mut last = shared.received_total.load(Ordering::Relaxed);
    loop {
        let received = shared.received_total.load(Ordering::Relaxed);
        if received >= expected.deliveries.load(Ordering::Relaxed) {
            return;
        }
        if received > last {
            last = received;
            deadline = Instant::now() + DRAIN_LIMIT;
        }
        if Instant::now() >= deadline {
            shared.note_error(format!(
                "the subscribers stopped short: {received} of {} deliveries received",
                expected.deliveries.load(Ordering::Relaxed)
            ));
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn params(
    spec: &PubSubSpec,
    common: &CommonArgs,
    prefetch: u32,
    broker_pid: Option<u32>,
) -> serde_json::Value {
    let a = &spec.args;
    let p = &spec.plan;
    serde_json::json!({
        "topic": spec.topic,
        "subscriptions": p.subscriptions,
        "selectors": p.selectors,
        "regions": p.regions,
        "min_amount": p.min_amount,
        "match_fraction": p.match_fraction(),
        "deliveries_per_message": p.match_fraction() * f64::from(p.subscriptions),
        "persistent": a.persistent,
        "durable": a.durable,
        "ack": if a.ack_client() { "client" } else { "auto" },
        "size": a.size,
        "batch": a.batch,
        "in_flight": a.in_flight,
        "prefetch": prefetch,
        "max_backlog": a.max_backlog,
        "broker_pid": broker_pid,
        "mode": "duration",
        "duration_s": common.duration.as_secs_f64(),
        "warmup_s": common.warmup.as_secs_f64(),
        "cooldown_s": common.cooldown.as_secs_f64(),
        "window_s": common.trace_window().as_secs_f64(),
    })
}

/// The description lines above the figures.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let Some(r) = report.results.first() else {
        return String::new();
    };
    let mut out = format!(
        "ferry-bench {} ({}): 1 publisher, {} subscription(s){}, topic {}, {} B bodies, \
         {} messages, batch {}, {} batches in flight, {} ack, prefetch {}\n",
        report.workload,
        r.target,
        p["subscriptions"],
        if p["selectors"] == true {
            format!(
                " with selectors (each message reaches {:.1}% of them)",
                p["match_fraction"].as_f64().unwrap_or(0.0) * 100.0
            )
        } else {
            String::new()
        },
        p["topic"].as_str().unwrap_or("?"),
        p["size"],
        if p["persistent"] == true {
            "persistent"
        } else {
            "non-persistent"
        },
        p["batch"],
        p["in_flight"],
        p["ack"].as_str().unwrap_or("?"),
        p["prefetch"],
    );
    let cooldown = p["cooldown_s"].as_f64().unwrap_or(0.0);
    out.push_str(&format!(
        "measured {:.2} s after {:.2} s warm-up",
        r.send_secs,
        p["warmup_s"].as_f64().unwrap_or(0.0)
    ));
    if cooldown > 0.0 {
        out.push_str(&format!(", {cooldown:.2} s cool-down excluded"));
    }
    out.push_str("; sent = published, received = delivered (summed over subscriptions)\n");
    out
}

/// Runs `spec` against the broker the flags name: a child broker of the bench's own with
/// `--own-broker` (its CPU is measured), else `--server` (measured with `--broker-pid`).
pub async fn run_with_broker(spec: &PubSubSpec, common: &CommonArgs) -> Result<BenchReport> {
    if !spec.args.own_broker {
        return measure(spec, common, spec.args.broker_pid).await;
    }
    if common.target != crate::args::TargetArg::Ferry {
        bail!("--own-broker starts a Ferry broker: it needs --target ferry");
    }
    let Some(binary) = &spec.args.ferry_binary else {
        bail!("this program cannot start a broker: give --server HOST:PORT instead");
    };
    let broker = child_broker::ChildBroker::start(binary, &common.broker_fsync).await?;
    eprintln!("ferry-bench: broker: {}", broker.describe());
    let mut common = common.clone();
    common.server = broker.addr().to_string();
    let result = measure(spec, &common, Some(broker.pid())).await;
    broker.stop().await;
    result
}
