//! The `stream` workload: a monitoring-record stream, as Kieker measured its transports. One
//! writer emits operation-execution records ([`record`], 150 bytes) as fast as it can (or at
//! `--rate`) for the duration, one reader counts them; the report gives records per second
//! and per minute at the reader, and the loss rate (1 - received / sent, by sequence
//! numbers), per transport: Ferry non-persistent and persistent (batched publishes), a plain
//! TCP stream (the floor), RabbitMQ, core NATS and Ferry's datagram ingest.
//!
//! Each transport runs in turn (rotated per round with `--rounds`): warm-up, measurement,
//! then the writer stops and the reader drains for up to [`DRAIN_LIMIT`] without progress.
//!
//! Modules: [`args`] (the flags), [`record`] (the record), [`flows`] (writer and reader per
//! transport).

pub mod args;
pub mod flows;
pub mod record;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

pub use args::{StreamArgs, Transport};

use crate::drivers::amqp::AmqpDriver;
use crate::drivers::ferry::FerryDriver;
use crate::drivers::nats::{NatsDriver, NatsMode};
use crate::drivers::{Capabilities, Driver};
use crate::inproc::InProcessBroker;
use crate::report::stream::{IngestCounters, StreamFigures};
use crate::report::{rate, BenchReport, TargetResult};
use crate::stats::windows::measured_stats;
use crate::stats::{percentile_curve, LatencySummary, WindowSeries};
use crate::workloads::progress::{Progress, ProgressPlan};
use crate::workloads::run::{Shared, WindowLatency, MEASURE, STOP, WARMUP};
use flows::{Dest, Flow};

/// How long the reader may go without a new record after the writer stopped.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// The topic (or queue) the broker transports use.
pub const DESTINATION: &str = "bench-stream";

super::workload::impl_workload!(StreamArgs, measure, header);

/// What a run made, to remove after it: the driver, its queues and its topics.
type Made = (Arc<dyn Driver>, Vec<String>, Vec<String>);

/// Where the Ferry transports find their broker.
struct FerryAt {
    server: String,
    udp: Option<std::net::SocketAddr>,
    /// The broker's counters, when it runs in this process.
    stats: Option<Arc<ferry_broker::stats::Stats>>,
}

/// Runs every transport asked for, `--rounds` times, and reports each one's median round.
pub async fn measure(args: &StreamArgs) -> Result<BenchReport> {
    let need_ferry = args.transports.iter().any(|t| t.needs_ferry());
    let own = if need_ferry && args.server.is_none() {
        Some(InProcessBroker::start(&args.broker_fsync, Some(&args.udp_topic)).await?)
    } else {
        None
    };
    let ferry = match (&own, &args.server) {
        (Some(b), _) => Some(FerryAt {
            server: b.addr(),
            udp: b.udp_addr(),
            stats: b.stats(),
        }),
        (None, Some(server)) => Some(FerryAt {
            server: server.clone(),
            udp: match &args.udp_addr {
                Some(a) => Some(a.parse().map_err(|e| anyhow!("--udp-addr {a}: {e}"))?),
                None => None,
            },
            stats: None,
        }),
        (None, None) => None,
    };
    if args.transports.contains(&Transport::Udp) && ferry.as_ref().is_some_and(|f| f.udp.is_none())
    {
        bail!("the udp transport with --server needs --udp-addr: the address of that broker's datagram ingest (ferry serve --udp-listen)");
    }
    let mut rounds: BTreeMap<&'static str, Vec<TargetResult>> = BTreeMap::new();
    let n = args.transports.len();
    let mut outcome = Ok(());
    'rounds: for round in 0..args.rounds as usize {
        for k in 0..n {
            let Some(&t) = crate::round_robin::pick(&args.transports, k + round) else {
                continue;
            };
            match run_one(args, t, ferry.as_ref()).await {
                Ok(r) => rounds.entry(t.name()).or_default().push(r),
                Err(e) => {
                    outcome = Err(e.context(format!("transport {}", t.name())));
                    break 'rounds;
                }
            }
        }
    }
    if let Some(b) = own {
        b.stop().await;
    }
    outcome?;
    let results = args
        .transports
        .iter()
        .filter_map(|t| rounds.remove(t.name()).map(median_round))
        .collect();
    Ok(BenchReport {
        workload: "stream".to_string(),
        environment: None,
        params: serde_json::json!({
            "transports": args.transports.iter().map(|t| t.name()).collect::<Vec<_>>(),
            "rounds": args.rounds,
            "rate": args.rate,
            "batch": args.batch,
            "records_per_message": args.records_per_message,
            "in_flight": args.in_flight,
            "prefetch": args.prefetch,
            "datagram_bytes": args.datagram_bytes,
            "record_bytes": record::RECORD_LEN,
            "duration_s": args.duration.as_secs_f64(),
            "warmup_s": args.warmup.as_secs_f64(),
            "window_s": args.window.as_secs_f64(),
            "broker": if args.server.is_some() { "given (--server)" } else { "in-process" },
        }),
        results,
        compare: None,
    })
}

/// The round with the median records per second.
fn median_round(mut results: Vec<TargetResult>) -> TargetResult {
    results.sort_by(|a, b| a.received_per_s.total_cmp(&b.received_per_s));
    let mid = results.len() / 2;
    results.swap_remove(mid)
}

/// One transport, once.
async fn run_one(args: &StreamArgs, t: Transport, ferry: Option<&FerryAt>) -> Result<TargetResult> {
    let started = Instant::now();
    let windows = WindowSeries::new(
        started,
        args.warmup,
        args.window,
        args.warmup + args.duration + DRAIN_LIMIT * 4,
    );
    let run_id: u64 = rand::random();
    let shared = Arc::new(Shared::new(
        run_id,
        started,
        WARMUP,
        None,
        windows,
        WindowLatency::EndToEnd,
    ));
    let session = record::session(run_id);
    let flow = Arc::new(Flow {
        shared: shared.clone(),
        next_seq: std::sync::atomic::AtomicU64::new(0),
        session,
        encoder: record::Encoder::new(&session),
        rate: args.rate,
        batch: args.batch as usize,
        per_message: args.records_per_message as usize,
        datagrams_sent: std::sync::atomic::AtomicU64::new(0),
    });
    let name = format!(
        "ferry-bench-stream-{}-{:06x}",
        std::process::id(),
        run_id & 0xff_ffff
    );
    let ferry_driver = || -> Result<Arc<dyn Driver>> {
        let at = ferry.ok_or_else(|| anyhow!("no Ferry broker"))?;
        Ok(Arc::new(FerryDriver::new(
            at.server.clone(),
            args.broker_fsync.clone(),
        )))
    };
    // What to remove after the run (unless --keep).
    let mut made: Option<Made> = None;
    // The ingest's counters before the writer starts.
    let ingest_before = (t == Transport::Udp).then(|| IngestSnapshot::take(ferry));
    let (running, durability): (flows::Running, String) = match t {
        Transport::Ferry | Transport::FerryPersistent => {
            let driver = ferry_driver()?;
            let persistent = t == Transport::FerryPersistent;
            let durability = if persistent {
                driver.durability()
            } else {
                driver.non_persistent_durability()
            };
            let dest = Dest::Topic(DESTINATION.to_string());
            made = Some((driver.clone(), Vec::new(), vec![DESTINATION.to_string()]));
            (
                flows::broker(
                    driver,
                    dest,
                    persistent,
                    args.in_flight,
                    args.prefetch,
                    flow.clone(),
                    &name,
                )
                .await?,
                durability,
            )
        }
        Transport::Amqp | Transport::AmqpPersistent => {
            let driver: Arc<dyn Driver> = Arc::new(AmqpDriver::new(args.amqp_url.clone()));
            let persistent = t == Transport::AmqpPersistent;
            let durability = if persistent {
                driver.durability()
            } else {
                driver.non_persistent_durability()
            };
            let dest = Dest::Queue(DESTINATION.to_string());
            made = Some((driver.clone(), vec![DESTINATION.to_string()], Vec::new()));
            (
                flows::broker(
                    driver,
                    dest,
                    persistent,
                    args.in_flight,
                    args.prefetch,
                    flow.clone(),
                    &name,
                )
                .await?,
                durability,
            )
        }
        Transport::Nats => {
            let driver: Arc<dyn Driver> =
                Arc::new(NatsDriver::new(args.nats_url.clone(), NatsMode::Core));
            let durability = driver.durability();
            let dest = Dest::Topic(DESTINATION.to_string());
            (
                flows::broker(
                    driver,
                    dest,
                    false,
                    args.in_flight,
                    args.prefetch,
                    flow.clone(),
                    &name,
                )
                .await?,
                durability,
            )
        }
        Transport::Tcp => (
            flows::tcp(flow.clone()).await?,
            "no broker: a TCP stream from writer to reader, nothing stored".to_string(),
        ),
        Transport::Udp => {
            let driver = ferry_driver()?;
            let ingest = ferry
                .and_then(|f| f.udp)
                .ok_or_else(|| anyhow!("no datagram ingest"))?;
            (
                flows::udp(
                    driver,
                    ingest,
                    &args.udp_topic,
                    args.datagram_bytes as usize,
                    args.prefetch,
                    flow.clone(),
                    &name,
                )
                .await?,
                "Ferry's datagram ingest: fire and forget, records published non-persistent; \
                 datagrams the kernel or the ingest drop are lost"
                    .to_string(),
            )
        }
    };
    let plan = ProgressPlan::of("stream", t.name(), &args.common);
    let progress = Progress::start(shared.clone(), plan, args.output.quiet);
    let measure_start = started + args.warmup;
    let measure_end = measure_start + args.duration;
    tokio::time::sleep_until(measure_start.into()).await;
    shared.set_phase(MEASURE);
    let flipped = Instant::now();
    tokio::time::sleep_until(measure_end.into()).await;
    shared.set_phase(STOP);
    let secs = flipped.elapsed().as_secs_f64();
    for w in running.writers {
        if let Err(e) = w.await {
            shared.note_error(format!("writer failed: {e}"));
        }
    }
    shared.wait_for_consumers(DRAIN_LIMIT, true).await;
    let _ = running.stop.send(true);
    let end = running
        .reader
        .await
        .map_err(|e| anyhow!("reader failed: {e}"))?;
    for c in running.connections {
        c.close().await;
    }
    progress.finish();
    if let Some((driver, queues, topics)) = made {
        let cleanup = format!("{name}-cleanup");
        crate::workloads::setup::remove(driver.as_ref(), &cleanup, &queues, &topics, args.keep)
            .await;
    }

    let ingest = ingest_before.map(|before| {
        IngestSnapshot::take(ferry).since(&before, flow.datagrams_sent.load(Ordering::Relaxed))
    });
    let sent = shared.sent_measured.load(Ordering::Relaxed);
    let received = shared.received_measured.load(Ordering::Relaxed);
    let sent_total = shared.sent_total.load(Ordering::Relaxed);
    let received_total = shared.received_total.load(Ordering::Relaxed);
    let rows = shared.windows.rows(measure_start, measure_end);
    let ages = LatencySummary::of(&end.latency);
    let records_per_s = rate(received, secs);
    Ok(TargetResult {
        target: t.name().to_string(),
        durability,
        capabilities: Capabilities::NONE,
        send_secs: secs,
        receive_secs: secs,
        sent,
        received,
        sent_per_s: rate(sent, secs),
        received_per_s: records_per_s,
        sent_mib_per_s: rate(sent, secs) * record::RECORD_LEN as f64 / (1024.0 * 1024.0),
        latency_ms: ages.clone(),
        latency_kind: "end_to_end".to_string(),
        latencies_ms: BTreeMap::from([("end_to_end".to_string(), ages)]),
        window_s: args.window.as_secs_f64(),
        window_stats: measured_stats(&rows),
        windows: rows,
        errors: shared.error_counts(),
        operations: BTreeMap::new(),
        percentile_curves_ms: BTreeMap::from([(
            "end_to_end".to_string(),
            percentile_curve(&end.latency),
        )]),
        broker_cpu: None,
        stream: Some(StreamFigures {
            records_per_s,
            records_per_min: records_per_s * 60.0,
            offered_per_s: rate(sent, secs),
            sent_total,
            received_total,
            loss: StreamFigures::loss_of(sent_total, received_total),
            duplicates: end.duplicates,
            record_bytes: record::RECORD_LEN as u64,
            records_per_message: match t {
                Transport::Ferry
                | Transport::FerryPersistent
                | Transport::Amqp
                | Transport::AmqpPersistent
                | Transport::Nats => u64::from(args.records_per_message),
                Transport::Tcp | Transport::Udp => 1,
            },
            ingest,
        }),
    })
}

/// The datagram ingest's counters at one moment.
struct IngestSnapshot {
    kernel_drops: Option<u64>,
    /// Received, malformed, dropped (the broker's counters, when in this process).
    broker: Option<(u64, u64, u64)>,
}

impl IngestSnapshot {
    fn take(ferry: Option<&FerryAt>) -> IngestSnapshot {
        use ferry_broker::stats::Stats;
        IngestSnapshot {
            kernel_drops: ferry
                .and_then(|f| f.udp)
                .and_then(|a| crate::report::stream::socket_drops(a.port())),
            broker: ferry.and_then(|f| f.stats.as_ref()).map(|s| {
                let u = &s.udp;
                (
                    Stats::get(&u.datagrams_received),
                    Stats::get(&u.datagrams_malformed),
                    Stats::get(&u.datagrams_dropped),
                )
            }),
        }
    }

    /// The counters since `before`, with the writer's `datagrams_sent`.
    fn since(&self, before: &IngestSnapshot, datagrams_sent: u64) -> IngestCounters {
        let diff = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        let (now, then) = (self.broker, before.broker);
        IngestCounters {
            datagrams_sent,
            kernel_drops: diff(self.kernel_drops, before.kernel_drops),
            received: diff(now.map(|c| c.0), then.map(|c| c.0)),
            malformed: diff(now.map(|c| c.1), then.map(|c| c.1)),
            dropped: diff(now.map(|c| c.2), then.map(|c| c.2)),
        }
    }
}

/// The lines above the figures: one row per transport, as the Kieker table, with the share of
/// the TCP floor.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let mut out =
        format!(
        "ferry-bench stream: {} B operation-execution records, {} a message, batch {}, {} in flight, \
         rate {}, {} s measured per transport after {} s warm-up, {} round(s), median round shown\n",
        p["record_bytes"],
        p["records_per_message"],
        p["batch"],
        p["in_flight"],
        if p["rate"] == 0 { "as fast as possible".to_string() } else { format!("{}/s", p["rate"]) },
        p["duration_s"],
        p["warmup_s"],
        p["rounds"],
    );
    let floor = report
        .results
        .iter()
        .find(|r| r.target == "tcp")
        .map(|r| r.received_per_s);
    out.push_str(&format!(
        "{:<17} {:>14} {:>12} {:>9} {:>11}  {}\n",
        "transport", "records/min", "records/s", "loss", "p99 age ms", "of tcp floor"
    ));
    for r in &report.results {
        let Some(s) = &r.stream else { continue };
        let share = match floor {
            Some(f) if f > 0.0 => format!("{:.0}%", 100.0 * s.records_per_s / f),
            _ => "-".to_string(),
        };
        out.push_str(&format!(
            "{:<17} {:>14.0} {:>12.0} {:>8.3}% {:>11.2}  {}\n",
            r.target,
            s.records_per_min,
            s.records_per_s,
            100.0 * s.loss,
            r.latency_ms.p99,
            share
        ));
        if let Some(i) = &s.ingest {
            let n = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
            out.push_str(&format!(
                "  datagrams: {} sent, {} dropped by the kernel (receive buffer full), {} read, \
                 {} malformed, {} dropped by the ingest\n",
                i.datagrams_sent,
                n(i.kernel_drops),
                n(i.received),
                n(i.malformed),
                n(i.dropped)
            ));
        }
    }
    out
}
