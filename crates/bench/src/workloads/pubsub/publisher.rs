//! The publisher: one connection with `in_flight` lanes, each a closed loop of batched
//! publishes to the topic, so that up to `in_flight` batches are in flight at once. Every
//! message gets a run-wide sequence number that fixes its properties ([`SelectorPlan`]), and
//! the deliveries it will cause are added to [`Expected`] once the publish is acknowledged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::task::JoinSet;

use super::plan::SelectorPlan;
use crate::drivers::{Connection, DriverError, OutMessage, PropertyValue};
use crate::payload;
use crate::stats::histogram::clamp_micros;
use crate::stats::new_histogram;
use crate::workloads::run::{Shared, MEASURE};

/// Deliveries the acknowledged publishes will cause, and the next sequence number.
#[derive(Debug, Default)]
pub struct Expected {
    /// Deliveries owed to the subscribers, summed.
    pub deliveries: AtomicU64,
    next: AtomicU64,
}

/// What the publisher does.
#[derive(Debug, Clone)]
pub struct PublisherConfig {
    /// The topic.
    pub topic: String,
    /// Batches in flight.
    pub in_flight: u32,
    /// Messages per publish request.
    pub batch: u32,
    /// Body size.
    pub size: usize,
    /// Persistent or in memory only.
    pub persistent: bool,
    /// Properties and expected deliveries.
    pub plan: SelectorPlan,
    /// Pause while more than this many deliveries are owed and not received (0 = never).
    pub max_backlog: u64,
}

/// Publishes until the run stops, then closes the connection. Returns the publish-to-ack
/// latencies (µs).
pub async fn run(
    conn: Arc<dyn Connection>,
    cfg: PublisherConfig,
    shared: Arc<Shared>,
    expected: Arc<Expected>,
) -> Histogram<u64> {
    let cfg = Arc::new(cfg);
    let mut lanes = JoinSet::new();
    for _ in 0..cfg.in_flight {
        lanes.spawn(lane(
            conn.clone(),
            cfg.clone(),
            shared.clone(),
            expected.clone(),
        ));
    }
    let mut hist = new_histogram();
    while let Some(joined) = lanes.join_next().await {
        match joined {
            Ok(h) => {
                let _ = hist.add(h);
            }
            Err(e) => shared.note_error(format!("publisher lane failed: {e}")),
        }
    }
    conn.close().await;
    hist
}

async fn lane(
    conn: Arc<dyn Connection>,
    cfg: Arc<PublisherConfig>,
    shared: Arc<Shared>,
    expected: Arc<Expected>,
) -> Histogram<u64> {
    let mut hist = new_histogram();
    loop {
        if cfg.max_backlog > 0 {
            shared
                .wait_for_backlog(&expected.deliveries, cfg.max_backlog)
                .await;
        }
        let n = shared.claim(u64::from(cfg.batch));
        if n == 0 {
            break;
        }
        let first = expected.next.fetch_add(n, Ordering::Relaxed);
        let stamp = payload::now_micros();
        // Every message of a batch carries the same send stamp, so one body serves them all:
        // each message holds a reference to it rather than a copy of its own.
        let body = payload::encode(cfg.size, stamp, shared.run_id);
        let messages: Vec<OutMessage> = (first..first + n)
            .map(|seq| {
                let mut m = OutMessage::for_topic(body.clone());
                m.persistent = cfg.persistent;
                if cfg.plan.with_properties {
                    let (region, amount) = cfg.plan.properties(seq);
                    m.properties = vec![
                        ("region".to_string(), PropertyValue::Str(region)),
                        ("amount".to_string(), PropertyValue::Int(amount)),
                    ]
                    .into();
                }
                m
            })
            .collect();
        let t0 = Instant::now();
        let outcome = conn.publish_batch(&cfg.topic, messages).await;
        let done = Instant::now();
        let latency = clamp_micros(done - t0);
        let (ok, owed, failed, fatal) = tally(outcome, first, n, &cfg.plan, &shared);
        expected.deliveries.fetch_add(owed, Ordering::Relaxed);
        shared.sent_total.fetch_add(ok, Ordering::Relaxed);
        if ok > 0 {
            shared.windows.sent(done, ok);
            if shared.phase() == MEASURE {
                shared.sent_measured.fetch_add(ok, Ordering::Relaxed);
                hist.saturating_record_n(latency, ok);
            }
        }
        if failed > 0 {
            shared.send_errors.fetch_add(failed, Ordering::Relaxed);
            if fatal {
                break;
            }
            // A refused publish (a deleted topic) would otherwise spin at full speed.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    hist
}

/// Published, deliveries owed, failed, and whether the connection is gone.
fn tally(
    outcome: Result<Vec<Result<(), DriverError>>, DriverError>,
    first: u64,
    n: u64,
    plan: &SelectorPlan,
    shared: &Shared,
) -> (u64, u64, u64, bool) {
    match outcome {
        Ok(results) => {
            let (mut ok, mut owed, mut failed) = (0, 0, 0);
            for (seq, r) in (first..).zip(results) {
                match r {
                    Ok(()) => {
                        ok += 1;
                        owed += plan.deliveries(seq);
                    }
                    Err(e) => {
                        failed += 1;
                        shared.note_error(e.message);
                    }
                }
            }
            (ok, owed, failed, false)
        }
        Err(e) => {
            let fatal = e.fatal;
            shared.note_error(e.message);
            // None was published.
            (0, 0, n, fatal)
        }
    }
}
