//! The latency workload: open loop at a fixed `--rate`, latency measured from each message's
//! intended send time (coordinated-omission corrected) into HDR histograms; p50, p90, p99,
//! p99.9, p99.99 and max of send-to-ack latency (corrected and as issued) and, with consumers,
//! of end-to-end latency (corrected: the body carries the intended send time).
//!
//! The schedule runs for warm-up, measurement and cool-down; a message counts when its intended
//! time falls in the measurement, whenever it completes.

pub mod args;
pub mod sender;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::sync::watch;

pub use args::LatencyArgs;

use crate::payload;
use crate::report::{rate, BenchReport, TargetResult};
use crate::stats::omission::Schedule;
use crate::stats::windows::measured_stats;
use crate::stats::{new_histogram, percentile_curve, LatencySummary, WindowSeries};
use crate::workloads::progress::{Progress, ProgressPlan};
use crate::workloads::run::{Shared, WindowLatency, COOLDOWN, MEASURE, STOP, WARMUP};
use crate::workloads::{consumer, setup};

/// How long consumers may take to catch up after the schedule ends.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// Time for connecting and subscribing before the schedule starts.
const LEAD: Duration = Duration::from_millis(50);

super::workload::impl_workload!(LatencyArgs, measure, header, html: report);

/// Runs the workload and returns its report.
pub async fn measure(args: &LatencyArgs) -> Result<BenchReport> {
    if !(args.rate.is_finite() && args.rate > 0.0) {
        bail!("--rate must be a positive number of messages per second");
    }
    let common = &args.common;
    let driver = setup::driver(common)?;
    let base = common.client_name();
    let admin = setup::connect(driver.as_ref(), &format!("{base}-admin")).await?;
    let prefetch = args.prefetch.min(admin.limits().max_prefetch);
    let queues = setup::queues(admin.as_ref(), args.queues).await?;
    let mut sender_conns = Vec::new();
    for i in 0..args.producers {
        sender_conns.push(setup::connect(driver.as_ref(), &format!("{base}-p{i}")).await?);
    }
    let mut consumer_conns = Vec::new();
    for i in 0..args.consumers {
        consumer_conns.push(setup::connect(driver.as_ref(), &format!("{base}-c{i}")).await?);
    }

    let started = Instant::now() + LEAD;
    let measure_start = started + common.warmup;
    let measure_end = measure_start + common.duration;
    let end = measure_end + common.cooldown;
    let windows = WindowSeries::new(
        started,
        common.warmup,
        common.trace_window(),
        common.warmup + common.duration + common.cooldown + DRAIN_LIMIT,
    );
    let window_latency = if args.consumers > 0 {
        WindowLatency::EndToEnd
    } else {
        WindowLatency::SendToAck
    };
    // Wall-clock µs of an instant, as bodies are stamped: sends and receipts count when the
    // stamp (the intended send time) falls in the measurement.
    let wall_now = payload::now_micros();
    let now = Instant::now();
    let wall = |at: Instant| {
        wall_now + u64::try_from(at.saturating_duration_since(now).as_micros()).unwrap_or(0)
    };
    let shared = Arc::new(
        Shared::new(
            rand::random(),
            started,
            WARMUP,
            None,
            windows,
            window_latency,
        )
        .counting_stamps(wall(measure_start)..wall(measure_end)),
    );
    let progress = Progress::start(
        shared.clone(),
        ProgressPlan::of("latency", driver.name(), common),
        common.quiet,
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut consumers = Vec::new();
    for (i, conn) in consumer_conns.into_iter().enumerate() {
        let mine = setup::assigned_queues(i, args.consumers as usize, &queues);
        consumers
            .push(consumer::start(conn, mine, prefetch, shared.clone(), stop_rx.clone()).await?);
    }
    let per_sender = args.rate / f64::from(args.producers);
    // Senders are staggered across one interval so that their sends interleave.
    let interval = Duration::from_secs_f64(1.0 / per_sender);
    let queues = Arc::new(queues);
    let mut senders = Vec::new();
    for (i, conn) in sender_conns.into_iter().enumerate() {
        let start = started + interval.mul_f64(i as f64 / f64::from(args.producers));
        let cfg = sender::SenderConfig {
            index: i as u32,
            schedule: Schedule::at_rate(start, per_sender),
            wall_start_micros: wall(start),
            end,
            size: args.size as usize,
            queues: queues.clone(),
            max_outstanding: args.max_outstanding,
        };
        senders.push(tokio::spawn(sender::run(conn, cfg, shared.clone())));
    }

    tokio::time::sleep_until(measure_start.into()).await;
    shared.set_phase(MEASURE);
    tokio::time::sleep_until(measure_end.into()).await;
    shared.set_phase(COOLDOWN);
    let mut corrected = new_histogram();
    let mut uncorrected = new_histogram();
    for s in senders {
        match s.await {
            Ok(l) => {
                let _ = corrected.add(l.corrected);
                let _ = uncorrected.add(l.uncorrected);
            }
            Err(e) => shared.note_error(format!("sender failed: {e}")),
        }
    }
    if args.consumers > 0 {
        shared.wait_for_consumers(DRAIN_LIMIT, false).await;
    }
    shared.set_phase(STOP);
    let _ = stop_tx.send(true);
    let e2e = consumer::merged(consumers, &shared).await;
    progress.finish();
    admin.close().await;
    setup::remove(
        driver.as_ref(),
        &format!("{base}-cleanup"),
        &queues,
        &[],
        common.keep,
    )
    .await;

    let secs = common.duration.as_secs_f64();
    let sent = shared.sent_measured.load(Ordering::Relaxed);
    let received = shared.received_measured.load(Ordering::Relaxed);
    let rows = shared.windows.rows(measure_start, measure_end);
    let mut latencies = BTreeMap::from([
        ("send_to_ack".to_string(), LatencySummary::of(&uncorrected)),
        (
            "send_to_ack_corrected".to_string(),
            LatencySummary::of(&corrected),
        ),
    ]);
    let mut curves = BTreeMap::from([
        ("send_to_ack".to_string(), percentile_curve(&uncorrected)),
        (
            "send_to_ack_corrected".to_string(),
            percentile_curve(&corrected),
        ),
    ]);
    let (kind, latency) = if args.consumers > 0 {
        let summary = LatencySummary::of(&e2e);
        latencies.insert("end_to_end_corrected".to_string(), summary.clone());
        curves.insert("end_to_end_corrected".to_string(), percentile_curve(&e2e));
        ("end_to_end_corrected", summary)
    } else {
        ("send_to_ack_corrected", LatencySummary::of(&corrected))
    };
    let result = TargetResult {
        target: driver.name().to_string(),
        durability: driver.durability(),
        capabilities: driver.capabilities(),
        send_secs: secs,
        receive_secs: secs,
        sent,
        received,
        sent_per_s: rate(sent, secs),
        received_per_s: rate(received, secs),
        sent_mib_per_s: rate(sent, secs) * f64::from(args.size) / (1024.0 * 1024.0),
        latency_ms: latency,
        latency_kind: kind.to_string(),
        latencies_ms: latencies,
        window_s: shared.windows.window().as_secs_f64(),
        window_stats: measured_stats(&rows),
        windows: rows,
        errors: shared.error_counts(),
        operations: BTreeMap::new(),
        percentile_curves_ms: curves,
        broker_cpu: None,
        stream: None,
    };
    Ok(BenchReport {
        environment: None,
        workload: "latency".to_string(),
        params: serde_json::json!({
            "rate": args.rate,
            "producers": args.producers,
            "consumers": args.consumers,
            "size": args.size,
            "queues": args.queues,
            "max_outstanding": args.max_outstanding,
            "prefetch": prefetch,
            "duration_s": secs,
            "warmup_s": common.warmup.as_secs_f64(),
            "cooldown_s": common.cooldown.as_secs_f64(),
            "window_s": common.trace_window().as_secs_f64(),
        }),
        results: vec![result],
        compare: None,
    })
}

/// The description lines above the figures.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let Some(r) = report.results.first() else {
        return String::new();
    };
    format!(
        "ferry-bench latency ({}): open loop at {} msg/s, {} sender(s), {} consumer(s), \
         {} queue(s), {} B bodies\nmeasured {:.2} s after {:.2} s warm-up, {:.2} s cool-down \
         excluded; latency from the intended send time (coordinated-omission corrected)\n",
        r.target,
        p["rate"],
        p["producers"],
        p["consumers"],
        p["queues"],
        p["size"],
        r.send_secs,
        p["warmup_s"].as_f64().unwrap_or(0.0),
        p["cooldown_s"].as_f64().unwrap_or(0.0),
    )
}
