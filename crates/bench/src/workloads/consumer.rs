//! A consumer: one connection with a client-ack subscription per assigned queue, one task per
//! subscription. Each delivery of this run is counted, its end-to-end latency (from the stamp
//! in the body to now) recorded, and it is acknowledged through the driver, which batches the
//! acknowledgements. Whether a delivery counts as measured is [`Shared::counts`]: received
//! during the measurement, or, in the open-loop workload, stamped with an intended send time
//! inside it (as its sender counted it).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::FutureExt;
use hdrhistogram::Histogram;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::run::{Shared, WindowLatency};
use crate::drivers::{Connection, Consumer};
use crate::payload;
use crate::stats::histogram::clamp_micros;
use crate::stats::new_histogram;

/// Subscribes to `queues` and consumes in the background until `stop` turns true. Returns once
/// every subscription is live; the handle yields the end-to-end latencies (µs).
pub async fn start(
    conn: Arc<dyn Connection>,
    queues: Vec<String>,
    prefetch: u32,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<Histogram<u64>>> {
    let mut consumers = Vec::with_capacity(queues.len());
    for queue in &queues {
        let c = conn
            .consume(queue, prefetch)
            .await
            .map_err(|e| anyhow!(e.message))?;
        consumers.push(c);
    }
    Ok(spawn(conn, consumers, shared, stop))
}

/// Consumes from `consumers` (subscriptions already live on `conn`) in the background until
/// `stop` turns true, then closes `conn`; the handle yields the end-to-end latencies (µs).
pub fn spawn(
    conn: Arc<dyn Connection>,
    consumers: Vec<Box<dyn Consumer>>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> JoinHandle<Histogram<u64>> {
    tokio::spawn(async move {
        let mut loops = JoinSet::new();
        for c in consumers {
            loops.spawn(take_deliveries(c, shared.clone(), stop.clone()));
        }
        let mut hist = new_histogram();
        while let Some(joined) = loops.join_next().await {
            match joined {
                Ok(h) => {
                    let _ = hist.add(h);
                }
                Err(e) => shared.note_error(format!("consumer task failed: {e}")),
            }
        }
        // Deliveries pushed but not handled return to their queues with the session.
        conn.close().await;
        hist
    })
}

async fn take_deliveries(
    mut consumer: Box<dyn Consumer>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Histogram<u64> {
    let mut hist = new_histogram();
    loop {
        if *stop.borrow() {
            break;
        }
        // A delivery already there is taken without waiting on `stop` too: registering and
        // dropping a waiter on the stop signal for every message costs more than handling it.
        // Dropping a pending `next` loses nothing: every driver's is a stream's `next`.
        let item = match consumer.next().now_or_never() {
            Some(item) => item,
            None => tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                item = consumer.next() => item,
            },
        };
        let delivery = match item {
            None => break,
            Some(Ok(d)) => d,
            Some(Err(e)) => {
                shared.note_error(e.message);
                break;
            }
        };
        let now = payload::now_micros();
        match payload::decode(&delivery.body, shared.run_id) {
            Some(stamp) => {
                let at = Instant::now();
                let latency = clamp_micros(Duration::from_micros(now.saturating_sub(stamp)));
                shared.received_total.fetch_add(1, Ordering::Relaxed);
                // From the instant just read rather than a clock call of its own: this loop
                // runs once per message and its cost must stay small next to the broker's.
                let since_start = at.saturating_duration_since(shared.started).as_micros();
                shared.last_received_at.fetch_max(
                    u64::try_from(since_start).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                shared.windows.received(at);
                if shared.window_latency == WindowLatency::EndToEnd {
                    shared.windows.latency(at, latency, 1);
                }
                if shared.counts(stamp) {
                    shared.received_measured.fetch_add(1, Ordering::Relaxed);
                    hist.saturating_record(latency);
                }
            }
            // Left over from an earlier run: consume it so it does not linger, but do not count it.
            None => {
                shared.foreign.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(token) = delivery.ack {
            consumer.ack(token);
        }
    }
    let outcome = consumer.finish().await;
    if outcome.failed > 0 {
        shared
            .ack_errors
            .fetch_add(outcome.failed, Ordering::Relaxed);
        if let Some(e) = outcome.first_error {
            shared.note_error(e);
        }
    }
    hist
}
