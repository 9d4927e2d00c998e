//! The `ftab` workload: the client archetypes of the FTaB report (`args`, `archetype`) as
//! closed-loop clients in any mix, each on its own connection (or, with `--ferry-connections`,
//! sharing some: [`connections`]), against one target. Every request is timed as an operation
//! (`ops`: send, read, read_empty, query_found, query_not_found, request_reply); the report
//! gives each operation's response-time distribution, its throughput and mean response time
//! per window with mean, standard deviation and 95% / 99.9% confidence intervals over the
//! measured windows (warm-up and cool-down excluded), as the FTaB report does.
//!
//! Modules: [`args`], [`archetype`] (the mix and what each archetype needs from a target),
//! [`plan`] (what clients share), [`connections`] (which connection each client gets),
//! [`text`] (English-like bodies), [`ops`] (recording), [`simple`] (Alice, Bob, Carl, Rick),
//! [`larry`], [`pairs`] (Tola and Maruja).

pub mod archetype;
pub mod args;
pub mod connections;
pub mod larry;
pub mod ops;
pub mod pairs;
pub mod plan;
pub mod simple;
pub mod text;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use tokio::task::JoinHandle;

pub use args::FtabArgs;

use crate::report::{rate, BenchReport, ErrorCounts, TargetResult};
use crate::stats::windows::measured_stats;
use crate::stats::WindowSeries;
use crate::workloads::progress::{Progress, ProgressPlan};
use crate::workloads::run::{Shared, WindowLatency, COOLDOWN, MEASURE, STOP, WARMUP};
use crate::workloads::setup;
use archetype::{count, Archetype, ALL};
use connections::Connections;
use ops::{OpSeries, Recorder};
use plan::{pair_queue, Client, Plan, REQUEST_QUEUE};

/// A running client: its histograms, one per operation, when it ends.
type ClientTask = JoinHandle<Vec<Histogram<u64>>>;

/// How long clients may take to finish their current request after the run stops.
const FINISH_LIMIT: Duration = Duration::from_secs(10);

super::workload::impl_workload!(FtabArgs, measure, header, html: report);

/// Runs the workload against `--target` and returns its report.
pub async fn measure(args: &FtabArgs) -> Result<BenchReport> {
    let common = &args.common;
    let driver = setup::driver(common)?;
    let caps = driver.capabilities();
    if let Some(why) = archetype::refusal(args, driver.name(), &caps) {
        bail!("{why}");
    }
    let base = common.client_name();
    let admin = setup::connect(driver.as_ref(), &format!("{base}-admin")).await?;
    let queues: Vec<String> = (0..args.queues).map(|i| format!("ftab-{i}")).collect();
    let mut all_queues = queues.clone();
    all_queues.extend((0..args.tola).map(pair_queue));
    if args.carl + args.rick > 0 {
        all_queues.push(REQUEST_QUEUE.to_string());
    }
    admin
        .ensure_queues(&all_queues)
        .await
        .map_err(|e| anyhow::anyhow!(e.message))?;
    // The set-up connection is not needed while the clients run: close it now, so that the
    // run holds only its clients' connections (PostgreSQL's max_connections counts them).
    admin.close().await;
    drop(admin);

    let name = |a: Archetype, i: u32| format!("{base}-{}-{i}", a.name());
    let run_id: u64 = rand::random();
    let plan = Arc::new(Plan {
        queues,
        targets_per_send: args.targets_per_send as usize,
        size: args.size as usize,
        priority: args.priority,
        by_priority: caps.priorities,
        larrys: (0..args.larry).map(|i| name(Archetype::Larry, i)).collect(),
        run_id,
        text: text::TextSource::new(run_id),
    });

    // Connect everyone before the clock starts (Larrys and the pairs also need their
    // addressees to exist).
    let ferry_connections = args.ferry_connections.filter(|_| driver.name() == "ferry");
    let mut connections = Connections::new(ferry_connections);
    let mut conns = Vec::new();
    for a in ALL {
        for i in 0..count(args, a) {
            let n = name(a, i);
            let conn = connections.connect(driver.as_ref(), &base, a, &n).await?;
            conns.push((a, i, n, conn));
        }
    }

    let (warmup, cooldown) = (common.warmup, common.cooldown);
    let started = Instant::now();
    let expected = warmup + common.duration + cooldown + FINISH_LIMIT;
    let window = common.trace_window();
    let make_series = || WindowSeries::new(started, warmup, window, expected);
    let shared = Arc::new(Shared::new(
        run_id,
        started,
        WARMUP,
        None,
        make_series(),
        WindowLatency::SendToAck,
    ));
    let op_series = Arc::new(OpSeries::new(make_series));
    let progress = Progress::start(
        shared.clone(),
        ProgressPlan::of("ftab", driver.name(), common),
        common.quiet,
    );
    let mut tasks: Vec<ClientTask> = Vec::new();
    for (a, i, n, conn) in conns {
        let client = Client {
            conn: conn.clone(),
            name: n,
            rec: Recorder::new(shared.clone(), op_series.clone()),
            plan: plan.clone(),
        };
        let task = match a {
            Archetype::Alice => tokio::spawn(simple::alice(client)),
            Archetype::Bob => tokio::spawn(simple::bob(client)),
            Archetype::Carl => tokio::spawn(simple::carl(client)),
            Archetype::Rick => tokio::spawn(simple::rick(client)),
            Archetype::Larry => tokio::spawn(larry::larry(client)),
            Archetype::Tola => tokio::spawn(pairs::tola(
                client,
                name(Archetype::Maruja, i),
                pair_queue(i),
            )),
            Archetype::Maruja => tokio::spawn(pairs::maruja(
                client,
                name(Archetype::Tola, i),
                pair_queue(i),
            )),
        };
        tasks.push(task);
    }

    let measure_start = started + warmup;
    let measure_end = measure_start + common.duration;
    tokio::time::sleep_until(measure_start.into()).await;
    shared.set_phase(MEASURE);
    let flipped = Instant::now();
    tokio::time::sleep_until(measure_end.into()).await;
    shared.set_phase(COOLDOWN);
    let secs = flipped.elapsed().as_secs_f64();
    tokio::time::sleep(cooldown).await;
    shared.set_phase(STOP);

    let mut hists = Vec::new();
    for task in tasks {
        match tokio::time::timeout(FINISH_LIMIT, task).await {
            Ok(Ok(h)) => hists.push(h),
            Ok(Err(e)) => shared.note_error(format!("client failed: {e}")),
            Err(_) => shared.note_error("a client did not finish its request in time".into()),
        }
    }
    // Only once every client is done: a shared connection serves several.
    for conn in connections.into_all() {
        conn.close().await;
    }
    progress.finish();
    setup::remove(
        driver.as_ref(),
        &format!("{base}-cleanup"),
        &all_queues,
        &[],
        common.keep,
    )
    .await;
    let hists = ops::merge(hists);

    let (operations, curves) = op_series.results(&hists, secs, measure_start, measure_end);
    let rows = shared.windows.rows(measure_start, measure_end);
    let sent = shared.sent_measured.load(Ordering::Relaxed);
    let received = shared.received_measured.load(Ordering::Relaxed);
    let latencies: BTreeMap<String, _> = operations
        .iter()
        .map(|(k, v)| (k.clone(), v.response_ms.clone()))
        .collect();
    let headline = if latencies.contains_key("send") {
        "send"
    } else {
        latencies.keys().next().map_or("send", String::as_str)
    }
    .to_string();
    let latency_ms = latencies
        .get(&headline)
        .cloned()
        .unwrap_or_else(|| crate::stats::LatencySummary::of(&crate::stats::new_histogram()));
    let result = TargetResult {
        target: driver.name().to_string(),
        durability: driver.durability(),
        capabilities: caps,
        send_secs: secs,
        receive_secs: secs,
        sent,
        received,
        sent_per_s: rate(sent, secs),
        received_per_s: rate(received, secs),
        sent_mib_per_s: rate(sent, secs) * f64::from(args.size) / (1024.0 * 1024.0),
        latency_ms,
        latency_kind: headline,
        latencies_ms: latencies,
        window_s: window.as_secs_f64(),
        window_stats: measured_stats(&rows),
        windows: rows,
        errors: ErrorCounts {
            send: shared.send_errors.load(Ordering::Relaxed),
            ack: shared.ack_errors.load(Ordering::Relaxed),
            receive: shared.receive_errors.load(Ordering::Relaxed),
            foreign: 0,
            first: shared.first_error(),
        },
        operations,
        percentile_curves_ms: curves,
        broker_cpu: None,
        stream: None,
    };
    let mix: serde_json::Map<String, serde_json::Value> = ALL
        .iter()
        .map(|&a| (a.name().to_string(), count(args, a).into()))
        .collect();
    Ok(BenchReport {
        environment: None,
        workload: "ftab".to_string(),
        params: serde_json::json!({
            "mix": mix,
            "size": args.size,
            "queues": args.queues,
            "targets_per_send": args.targets_per_send,
            "ferry_connections": args.ferry_connections,
            "priority": args.priority.label(),
            "duration_s": common.duration.as_secs_f64(),
            "warmup_s": warmup.as_secs_f64(),
            "cooldown_s": cooldown.as_secs_f64(),
            "window_s": window.as_secs_f64(),
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
    let mix: Vec<String> = p["mix"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
                .map(|(k, n)| format!("{n} {k}"))
                .collect()
        })
        .unwrap_or_default();
    let sharing = match p["ferry_connections"].as_u64() {
        Some(n) if r.target == "ferry" => {
            format!("; Alice, Bob, Carl and Rick share {n} connection(s)")
        }
        _ => String::new(),
    };
    format!(
        "ferry-bench ftab ({}): {}{sharing}; {} queue(s), {} B bodies, {} target queue(s) per send, \
         priority {}\nmeasured {:.2} s after {:.2} s warm-up, {:.2} s cool-down excluded; \
         {} s windows\n",
        r.target,
        mix.join(", "),
        p["queues"],
        p["size"],
        p["targets_per_send"],
        p["priority"].as_str().unwrap_or("?"),
        r.send_secs,
        p["warmup_s"].as_f64().unwrap_or(0.0),
        p["cooldown_s"].as_f64().unwrap_or(0.0),
        r.window_s,
    )
}
