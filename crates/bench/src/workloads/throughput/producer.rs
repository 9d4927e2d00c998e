//! A throughput producer: one connection with `in_flight` lanes, each a closed loop of sends
//! (or batches), so that up to `in_flight` requests are in flight on the connection at once.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::task::JoinSet;

use crate::drivers::{Connection, DriverError, OutMessage};
use crate::payload;
use crate::stats::histogram::clamp_micros;
use crate::stats::new_histogram;
use crate::workloads::run::{Shared, WindowLatency, MEASURE};

/// What one producer does.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Its number, to spread lanes over the queues.
    pub index: u32,
    /// Requests in flight.
    pub in_flight: u32,
    /// Messages per request.
    pub batch: u32,
    /// Body size.
    pub size: usize,
    /// Queues to send to, in rotation.
    pub queues: Arc<Vec<String>>,
    /// Pause while more than this many messages are sent and not received (0 = never).
    pub max_backlog: u64,
    /// Persistent messages, or in memory only.
    pub persistent: bool,
}

/// Sends until the run stops (or the messages to send run out), then closes the connection.
/// Returns the send-to-ack latencies measured (µs).
pub async fn run(
    conn: Arc<dyn Connection>,
    cfg: ProducerConfig,
    shared: Arc<Shared>,
) -> Histogram<u64> {
    // One histogram for all lanes: with a thousand lanes in flight, a histogram each (a few
    // hundred KiB apiece) turned every record into cache misses.
    let hist = Arc::new(Mutex::new(new_histogram()));
    let mut lanes = JoinSet::new();
    for lane in 0..cfg.in_flight {
        let start =
            (cfg.index as usize * cfg.in_flight as usize + lane as usize) % cfg.queues.len();
        lanes.spawn(run_lane(
            conn.clone(),
            cfg.clone(),
            shared.clone(),
            start,
            hist.clone(),
        ));
    }
    while let Some(joined) = lanes.join_next().await {
        if let Err(e) = joined {
            shared.note_error(format!("producer lane failed: {e}"));
        }
    }
    conn.close().await;
    // Every lane has ended, so nothing else holds the histogram.
    hist.lock()
        .map(|h| h.clone())
        .unwrap_or_else(|_| new_histogram())
}

async fn run_lane(
    conn: Arc<dyn Connection>,
    cfg: ProducerConfig,
    shared: Arc<Shared>,
    mut next_queue: usize,
    hist: Arc<Mutex<Histogram<u64>>>,
) {
    let queue_count = cfg.queues.len();
    loop {
        if cfg.max_backlog > 0 {
            shared
                .wait_for_backlog(&shared.sent_total, cfg.max_backlog)
                .await;
        }
        let n = shared.claim(u64::from(cfg.batch));
        if n == 0 {
            break;
        }
        let stamp = payload::now_micros();
        let mut messages: Vec<OutMessage> = (0..n)
            .map(|_| {
                let queue = cfg.queues.get(next_queue).cloned().unwrap_or_default();
                next_queue = (next_queue + 1) % queue_count;
                let mut m =
                    OutMessage::to_queue(queue, payload::encode(cfg.size, stamp, shared.run_id));
                m.persistent = cfg.persistent;
                m
            })
            .collect();
        let t0 = Instant::now();
        let outcome: Result<Vec<Result<(), DriverError>>, DriverError> = if cfg.batch == 1 {
            match messages.pop() {
                Some(m) => conn.send(m).await.map(|()| vec![Ok(())]),
                None => Ok(Vec::new()),
            }
        } else {
            conn.send_batch(messages).await
        };
        let done = Instant::now();
        let latency = clamp_micros(done - t0);
        let (ok, failed, fatal) = match outcome {
            Ok(results) => {
                let mut failed = 0;
                for r in results {
                    if let Err(e) = r {
                        failed += 1;
                        shared.note_error(e.message);
                    }
                }
                (n - failed, failed, false)
            }
            Err(e) => {
                let fatal = e.fatal;
                shared.note_error(e.message);
                (0, n, fatal)
            }
        };
        shared.sent_total.fetch_add(ok, Ordering::Relaxed);
        shared
            .last_sent_at
            .fetch_max(shared.elapsed_micros(), Ordering::Relaxed);
        if ok > 0 {
            shared.windows.sent(done, ok);
            if shared.window_latency == WindowLatency::SendToAck {
                shared.windows.latency(done, latency, ok);
            }
            if shared.phase() == MEASURE {
                shared.sent_measured.fetch_add(ok, Ordering::Relaxed);
                if let Ok(mut h) = hist.lock() {
                    h.saturating_record_n(latency, ok);
                }
            }
        }
        if failed > 0 {
            shared.send_errors.fetch_add(failed, Ordering::Relaxed);
            if fatal {
                break;
            }
            // A refused send (a deleted queue, a full store) would otherwise spin at full speed.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
