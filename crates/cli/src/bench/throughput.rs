//! The throughput workload: producers send to `bench-<n>` queues as fast as their window
//! allows, consumers drain them through client-ack subscriptions; the report gives messages per
//! second both ways and send-to-ack and end-to-end latency distributions.
//!
//! Duration mode: warm up, measure for `--duration`, stop the producers, let the consumers drain
//! what was sent (briefly), stop. Message-count mode: send `--messages` messages from the start
//! and time until the last acknowledgement and the last receipt.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use ferry_client::Client;
use ferry_protocol::ErrorCode;
use tokio::sync::watch;

use super::args::ThroughputArgs;
use super::report::{rate, ThroughputConfig, ThroughputReport};
use super::stats::{new_histogram, LatencySummary, Shared, MEASURE, STOP, WARMUP};
use super::{consumer, producer};
use crate::connection::explain;

/// How long consumers may take to catch up after the producers stop, in duration mode.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// In message-count mode, how long consumers may go without progress before the run gives up.
const STALL_LIMIT: Duration = Duration::from_secs(10);

/// Runs the workload and prints (and optionally writes) the report.
pub async fn run(args: ThroughputArgs) -> Result<()> {
    if !args.persistent {
        bail!("non-persistent messages are not supported by the broker yet; use --persistent true");
    }
    if args.producers == 0 && args.consumers == 0 {
        bail!("nothing to do: --producers and --consumers are both 0");
    }
    let base = args.conn.client_name();
    let admin = args.conn.connect_as(&format!("{base}-admin")).await?;
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
        eprintln!("ferry: prefetch lowered to the broker's limit of {prefetch}");
    }
    let queues = create_queues(&admin, args.queues).await?;

    // Connect everyone before the clock starts: connecting is not what is measured.
    let mut producer_clients = Vec::new();
    for i in 0..args.producers {
        producer_clients.push(args.conn.connect_as(&format!("{base}-p{i}")).await?);
    }
    let mut consumer_clients = Vec::new();
    for i in 0..args.consumers {
        consumer_clients.push(args.conn.connect_as(&format!("{base}-c{i}")).await?);
    }

    let first_phase = if args.messages.is_some() {
        MEASURE
    } else {
        WARMUP
    };
    let shared = Arc::new(Shared::new(rand::random(), first_phase, args.messages));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut consumers = Vec::new();
    for (i, client) in consumer_clients.into_iter().enumerate() {
        let mine = assigned_queues(i, args.consumers as usize, &queues);
        consumers
            .push(consumer::start(client, mine, prefetch, shared.clone(), stop_rx.clone()).await?);
    }
    let queues = Arc::new(queues);
    let mut producers = Vec::new();
    for (i, client) in producer_clients.into_iter().enumerate() {
        let cfg = producer::ProducerConfig {
            index: i as u32,
            window: args.window,
            batch: args.batch,
            size: args.size as usize,
            queues: queues.clone(),
            max_backlog: if args.consumers == 0 {
                0
            } else {
                args.max_backlog
            },
        };
        producers.push(tokio::spawn(producer::run(client, cfg, shared.clone())));
    }

    let (send_secs, receive_secs) = match args.messages {
        None => {
            tokio::time::sleep(args.warmup).await;
            shared.set_phase(MEASURE);
            let measuring = Instant::now();
            tokio::time::sleep(args.duration).await;
            shared.set_phase(STOP);
            let secs = measuring.elapsed().as_secs_f64();
            (secs, secs)
        }
        Some(_) => (0.0, 0.0),
    };

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
        let limit = if args.messages.is_some() {
            STALL_LIMIT
        } else {
            DRAIN_LIMIT
        };
        wait_for_consumers(&shared, limit, args.messages.is_some()).await;
    }
    shared.set_phase(STOP);
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
    let _ = admin.disconnect().await;

    let (send_secs, receive_secs) = match args.messages {
        None => (send_secs, receive_secs),
        Some(_) => (
            shared.last_sent_at.load(Ordering::Relaxed) as f64 / 1e6,
            shared.last_received_at.load(Ordering::Relaxed) as f64 / 1e6,
        ),
    };
    let sent = shared.sent_measured.load(Ordering::Relaxed);
    let received = shared.received_measured.load(Ordering::Relaxed);
    let report = ThroughputReport {
        config: ThroughputConfig {
            producers: args.producers,
            consumers: args.consumers,
            size: args.size,
            queues: args.queues,
            window: args.window,
            batch: args.batch,
            prefetch,
            warmup_secs: if args.messages.is_some() {
                0.0
            } else {
                args.warmup.as_secs_f64()
            },
            mode: if args.messages.is_some() {
                "messages"
            } else {
                "duration"
            },
            messages: args.messages,
        },
        send_secs,
        receive_secs,
        sent,
        received,
        sent_per_sec: rate(sent, send_secs),
        received_per_sec: rate(received, receive_secs),
        sent_mib_per_sec: rate(sent, send_secs) * f64::from(args.size) / (1024.0 * 1024.0),
        send_to_ack_us: LatencySummary::of(&send_hist),
        end_to_end_us: LatencySummary::of(&e2e_hist),
        send_errors: shared.send_errors.load(Ordering::Relaxed),
        ack_errors: shared.ack_errors.load(Ordering::Relaxed),
        foreign_messages: shared.foreign.load(Ordering::Relaxed),
        first_error: shared.first_error(),
    };
    crate::commands::emit(&report.text())?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if report.send_errors + report.ack_errors > 0 {
        bail!(
            "{} sends and {} acks failed; first error: {}",
            report.send_errors,
            report.ack_errors,
            report.first_error.as_deref().unwrap_or("unknown")
        );
    }
    Ok(())
}

/// Creates `bench-0` .. `bench-<n-1>` where missing.
async fn create_queues(admin: &Client, n: u32) -> Result<Vec<String>> {
    let mut names = Vec::with_capacity(n as usize);
    for i in 0..n {
        let name = format!("bench-{i}");
        match admin.create_queue(&name).await {
            Ok(()) => {}
            Err(e) if e.code() == Some(ErrorCode::QueueExists) => {}
            Err(e) => return Err(explain(e)),
        }
        names.push(name);
    }
    Ok(names)
}

/// The queues consumer `i` of `n` subscribes to: every queue gets at least one consumer; with
/// more consumers than queues, they share queues round-robin.
pub fn assigned_queues(i: usize, n: usize, queues: &[String]) -> Vec<String> {
    if n >= queues.len() {
        vec![queues[i % queues.len()].clone()]
    } else {
        queues.iter().skip(i).step_by(n).cloned().collect()
    }
}

/// Waits until the consumers have received every message the producers got acknowledged, or
/// until `limit` passes (without progress, when `reset_on_progress`).
async fn wait_for_consumers(shared: &Shared, limit: Duration, reset_on_progress: bool) {
    let mut deadline = Instant::now() + limit;
    let mut last = shared.received_total.load(Ordering::Relaxed);
    loop {
        let received = shared.received_total.load(Ordering::Relaxed);
        if received >= shared.sent_total.load(Ordering::Relaxed) {
            return;
        }
        if reset_on_progress && received > last {
            last = received;
            deadline = Instant::now() + limit;
        }
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("bench-{i}")).collect()
    }

    #[test]
    fn every_queue_has_a_consumer() {
        let q = names(5);
        let mut seen: Vec<String> = (0..2).flat_map(|i| assigned_queues(i, 2, &q)).collect();
        seen.sort();
        assert_eq!(seen, q);
        assert_eq!(
            assigned_queues(0, 2, &q),
            vec!["bench-0", "bench-2", "bench-4"]
        );
        assert_eq!(assigned_queues(3, 4, &names(2)), vec!["bench-1"]);
    }
}
