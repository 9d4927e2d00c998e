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
use crate::drivers::{Connection, Consumer, DriverError, Received};
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

/// Waits for every consumer of `handles` and merges the end-to-end latencies (µs) they
/// recorded; a consumer that failed is noted as an error of the run.
pub async fn merged(handles: Vec<JoinHandle<Histogram<u64>>>, shared: &Shared) -> Histogram<u64> {
    let mut all = new_histogram();
    for handle in handles {
        match handle.await {
            Ok(h) => {
                let _ = all.add(h);
            }
            Err(e) => shared.note_error(format!("consumer failed: {e}")),
        }
    }
    all
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
                Err(e) => {
                    shared.receive_errors.fetch_add(1, Ordering::Relaxed);
                    shared.note_error(format!("consumer task failed: {e}"));
                }
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
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        if *stop.borrow() {
            break;
        }
        // Deliveries already there are taken without waiting on `stop` too: registering and
        // dropping a waiter on the stop signal for every wait costs more than handling them.
        // Dropping a pending `next_batch` loses nothing (see `Consumer::next_batch`).
        batch.clear();
        let open = match consumer.next_batch(&mut batch, BATCH).now_or_never() {
            Some(open) => open,
            None => tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                open = consumer.next_batch(&mut batch, BATCH) => open,
            },
        };
        if !handle(&mut *consumer, &mut batch, &shared, &mut hist) || !open {
            break;
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

/// Deliveries a consumer handles per wait, at most.
const BATCH: usize = 256;

/// Counts, times and acknowledges the deliveries of `batch`; `false` after an error, which
/// ends the consumer.
fn handle(
    consumer: &mut dyn Consumer,
    batch: &mut Vec<Result<Received, DriverError>>,
    shared: &Shared,
    hist: &mut Histogram<u64>,
) -> bool {
    if batch.is_empty() {
        return true;
    }
    // One clock reading for the batch: its deliveries were all at hand when it was taken, and
    // this loop's cost per message must stay small next to the broker's.
    let now = payload::now_micros();
    let at = Instant::now();
    let (mut counted, mut measured) = (0u64, 0u64);
    // Deliveries sent together carry one stamp, so their latencies come in runs of equal
    // values: each run is recorded at once rather than one sample at a time.
    let end_to_end = shared.window_latency == WindowLatency::EndToEnd;
    let mut window_run = Run::default();
    let mut hist_run = Run::default();
    let mut ok = true;
    for item in batch.drain(..) {
        let delivery = match item {
            Ok(d) => d,
            Err(e) => {
                shared.receive_errors.fetch_add(1, Ordering::Relaxed);
                shared.note_error(e.message);
                ok = false;
                break;
            }
        };
        match payload::decode(&delivery.body, shared.run_id) {
            Some(stamp) => {
                let latency = clamp_micros(Duration::from_micros(now.saturating_sub(stamp)));
                counted += 1;
                if end_to_end {
                    window_run.add(latency, |v, n| shared.windows.latency(at, v, n));
                }
                if shared.counts(stamp) {
                    measured += 1;
                    hist_run.add(latency, |v, n| hist.saturating_record_n(v, n));
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
    window_run.flush(|v, n| shared.windows.latency(at, v, n));
    hist_run.flush(|v, n| hist.saturating_record_n(v, n));
    if measured > 0 {
        shared
            .received_measured
            .fetch_add(measured, Ordering::Relaxed);
    }
    if counted > 0 {
        shared.add_received(counted);
        let since_start = at.saturating_duration_since(shared.started).as_micros();
        shared.last_received_at.fetch_max(
            u64::try_from(since_start).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        shared.windows.received_n(at, counted);
    }
    ok
}

/// A run of equal latency samples not recorded yet.
#[derive(Default)]
struct Run {
    value: u64,
    n: u64,
}

impl Run {
    /// Adds a sample; records the run so far through `record(value, n)` when `value` ends it.
    fn add(&mut self, value: u64, record: impl FnOnce(u64, u64)) {
        if self.n > 0 && self.value != value {
            record(self.value, self.n);
            self.n = 0;
        }
        self.value = value;
        self.n += 1;
    }

    /// Records what the run holds.
    fn flush(&mut self, record: impl FnOnce(u64, u64)) {
        if self.n > 0 {
            record(self.value, self.n);
            self.n = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Run;

    #[test]
    fn runs_of_equal_samples_are_recorded_once() {
        let mut recorded = Vec::new();
        let mut run = Run::default();
        for v in [5, 5, 5, 7, 5, 5] {
            run.add(v, |v, n| recorded.push((v, n)));
        }
        run.flush(|v, n| recorded.push((v, n)));
        run.flush(|v, n| recorded.push((v, n)));
        assert_eq!(recorded, vec![(5, 3), (7, 1), (5, 2)]);
    }
}
