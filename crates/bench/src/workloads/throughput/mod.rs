//! The throughput workload: producers send to `bench-<n>` queues as fast as their requests in
//! flight allow, consumers drain them through client-ack subscriptions; the report gives
//! messages per second both ways, send-to-ack and end-to-end latency distributions, and a
//! per-window trace.
//!
//! Duration mode: warm up, measure for `--duration`, keep the load for `--cooldown`, stop the
//! producers, let the consumers drain what was sent (briefly), stop. Message-count mode: send
//! `--messages` messages from the start and time until the last acknowledgement and the last
//! receipt.

pub mod args;
pub mod producer;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::sync::watch;

pub use args::ThroughputArgs;

use crate::report::{rate, BenchReport, TargetResult};
use crate::stats::windows::measured_stats;
use crate::stats::{new_histogram, percentile_curve, LatencySummary, WindowSeries};
use crate::workloads::progress::{Progress, ProgressPlan};
use crate::workloads::run::{Shared, WindowLatency, COOLDOWN, MEASURE, STOP, WARMUP};
use crate::workloads::{consumer, setup};

/// How long consumers may take to catch up after the producers stop, in duration mode.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// In message-count mode, how long consumers may go without progress before the run gives up.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// Windows kept for a message-count run, whose length is not known ahead.
const MESSAGE_MODE_TRACE: Duration = Duration::from_secs(600);

super::workload::impl_workload!(ThroughputArgs, measure, header, html: report);

/// Runs the workload and returns its report.
pub async fn measure(args: &ThroughputArgs) -> Result<BenchReport> {
    if args.producers == 0 && args.consumers == 0 {
        bail!("nothing to do: --producers and --consumers are both 0");
    }
    let in_flight = args.in_flight;
    let common = &args.common;
    let driver = setup::driver(common)?;
    if !args.persistent && !driver.supports_non_persistent() {
        bail!(
            "--persistent false: the {} target cannot send non-persistent messages{}",
            driver.name(),
            if driver.name() == "nats" {
                " in JetStream mode (use --nats-mode core)"
            } else {
                ""
            }
        );
    }
    let base = common.client_name();
    let admin = setup::connect(driver.as_ref(), &format!("{base}-admin")).await?;
    let limits = admin.limits();
    if args.batch > limits.max_batch {
        bail!(
            "--batch {} is above the broker's limit of {}",
            args.batch,
            limits.max_batch
        );
    }
    let prefetch = args.prefetch.min(limits.max_prefetch);
    if prefetch < args.prefetch {
        eprintln!("ferry-bench: prefetch lowered to the broker's limit of {prefetch}");
    }
    let queues = setup::queues(admin.as_ref(), args.queues).await?;

    // Connect everyone before the clock starts: connecting is not what is measured.
    let mut producer_conns = Vec::new();
    for i in 0..args.producers {
        producer_conns.push(setup::connect(driver.as_ref(), &format!("{base}-p{i}")).await?);
    }
    let mut consumer_conns = Vec::new();
    for i in 0..args.consumers {
        consumer_conns.push(setup::connect(driver.as_ref(), &format!("{base}-c{i}")).await?);
    }

    let count_mode = args.messages.is_some();
    let (warmup, cooldown) = if count_mode {
        (Duration::ZERO, Duration::ZERO)
    } else {
        (common.warmup, common.cooldown)
    };
    let started = Instant::now();
    let expected = if count_mode {
        MESSAGE_MODE_TRACE
    } else {
        warmup + common.duration + cooldown + DRAIN_LIMIT
    };
    let windows = WindowSeries::new(started, warmup, common.trace_window(), expected);
    let window_latency = if args.consumers > 0 {
        WindowLatency::EndToEnd
    } else {
        WindowLatency::SendToAck
    };
    let first_phase = if count_mode { MEASURE } else { WARMUP };
    let shared = Arc::new(Shared::new(
        rand::random(),
        started,
        first_phase,
        args.messages,
        windows,
        window_latency,
    ));
    let mut plan = ProgressPlan::of("throughput", driver.name(), common);
    if count_mode {
        plan.warmup = Duration::ZERO;
        plan.cooldown = Duration::ZERO;
        plan.messages = args.messages;
    }
    let progress = Progress::start(shared.clone(), plan, common.quiet);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut consumers = Vec::new();
    for (i, conn) in consumer_conns.into_iter().enumerate() {
        let mine = setup::assigned_queues(i, args.consumers as usize, &queues);
        consumers
            .push(consumer::start(conn, mine, prefetch, shared.clone(), stop_rx.clone()).await?);
    }
    let queues = Arc::new(queues);
    let mut producers = Vec::new();
    for (i, conn) in producer_conns.into_iter().enumerate() {
        let cfg = producer::ProducerConfig {
            index: i as u32,
            in_flight,
            batch: args.batch,
            size: args.size as usize,
            queues: queues.clone(),
            max_backlog: if args.consumers == 0 {
                0
            } else {
                args.max_backlog
            },
            persistent: args.persistent,
        };
        producers.push(tokio::spawn(producer::run(conn, cfg, shared.clone())));
    }

    // The windows are labelled against the planned phase boundaries (the ones the series is
    // aligned on); the rates use the time between the actual phase changes.
    let measure_start = started + warmup;
    let mut measure_end = measure_start + common.duration;
    let mut measured_secs = 0.0;
    if !count_mode {
        tokio::time::sleep_until(measure_start.into()).await;
        shared.set_phase(MEASURE);
        let flipped = Instant::now();
        tokio::time::sleep_until(measure_end.into()).await;
        shared.set_phase(COOLDOWN);
        measured_secs = flipped.elapsed().as_secs_f64();
        tokio::time::sleep(cooldown).await;
        shared.set_phase(STOP);
    }

    let mut send_hist = new_histogram();
    for p in producers {
        match p.await {
            Ok(h) => {
                let _ = send_hist.add(h);
            }
            Err(e) => shared.note_error(format!("producer failed: {e}")),
        }
    }
    if args.consumers > 0 {
        let limit = if count_mode { STALL_LIMIT } else { DRAIN_LIMIT };
        shared.wait_for_consumers(limit, count_mode).await;
    }
    shared.set_phase(STOP);
    let _ = stop_tx.send(true);
    let e2e_hist = consumer::merged(consumers, &shared).await;
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

    let (send_secs, receive_secs) = if count_mode {
        let sent_at = shared.last_sent_at.load(Ordering::Relaxed);
        let received_at = shared.last_received_at.load(Ordering::Relaxed);
        measure_end = started + Duration::from_micros(sent_at.max(received_at));
        (sent_at as f64 / 1e6, received_at as f64 / 1e6)
    } else {
        (measured_secs, measured_secs)
    };
    let sent = shared.sent_measured.load(Ordering::Relaxed);
    let received = shared.received_measured.load(Ordering::Relaxed);
    let rows = shared.windows.rows(measure_start, measure_end);
    let send_to_ack = LatencySummary::of(&send_hist);
    let end_to_end = LatencySummary::of(&e2e_hist);
    let (latency_kind, latency_ms) = if args.consumers > 0 {
        ("end_to_end", end_to_end.clone())
    } else {
        ("send_to_ack", send_to_ack.clone())
    };
    let result = TargetResult {
        target: driver.name().to_string(),
        durability: if args.persistent {
            driver.durability()
        } else {
            driver.non_persistent_durability()
        },
        capabilities: driver.capabilities(),
        send_secs,
        receive_secs,
        sent,
        received,
        sent_per_s: rate(sent, send_secs),
        received_per_s: rate(received, receive_secs),
        sent_mib_per_s: rate(sent, send_secs) * f64::from(args.size) / (1024.0 * 1024.0),
        latency_ms,
        latency_kind: latency_kind.to_string(),
        latencies_ms: BTreeMap::from([
            ("send_to_ack".to_string(), send_to_ack),
            ("end_to_end".to_string(), end_to_end),
        ]),
        window_s: shared.windows.window().as_secs_f64(),
        window_stats: measured_stats(&rows),
        windows: rows,
        errors: shared.error_counts(),
        operations: BTreeMap::new(),
        percentile_curves_ms: BTreeMap::from([
            ("send_to_ack".to_string(), percentile_curve(&send_hist)),
            ("end_to_end".to_string(), percentile_curve(&e2e_hist)),
        ]),
        broker_cpu: None,
        stream: None,
    };
    Ok(BenchReport {
        environment: None,
        workload: "throughput".to_string(),
        params: serde_json::json!({
            "producers": args.producers,
            "consumers": args.consumers,
            "size": args.size,
            "queues": args.queues,
            "in_flight": in_flight,
            "batch": args.batch,
            "prefetch": prefetch,
            "max_backlog": args.max_backlog,
            "persistent": args.persistent,
            "mode": if count_mode { "messages" } else { "duration" },
            "messages": args.messages,
            "duration_s": if count_mode { send_secs.max(receive_secs) } else { common.duration.as_secs_f64() },
            "warmup_s": warmup.as_secs_f64(),
            "cooldown_s": cooldown.as_secs_f64(),
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
    let mut out = format!(
        "ferry-bench throughput ({}): {} producer(s), {} consumer(s), {} queue(s), {} B bodies, \
         {} in flight, batch {}, prefetch {}\n",
        r.target,
        p["producers"],
        p["consumers"],
        p["queues"],
        p["size"],
        p["in_flight"],
        p["batch"],
        p["prefetch"]
    );
    if p["mode"] == "messages" {
        out.push_str(&format!("{} messages, no warm-up\n", p["messages"]));
    } else {
        let cooldown = p["cooldown_s"].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "measured {:.2} s after {:.2} s warm-up",
            r.send_secs,
            p["warmup_s"].as_f64().unwrap_or(0.0)
        ));
        if cooldown > 0.0 {
            out.push_str(&format!(", {cooldown:.2} s cool-down excluded"));
        }
        out.push('\n');
    }
    out
}
