//! Rates over the last minute: a task samples the broker's counters and the queues' figures
//! every second (every five on PostgreSQL, where figures cost a query) and keeps a minute of
//! samples; the overview, the queue listing and the console's charts read them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_broker::stats::Stats;
use ferry_store::QueueDetails;
use serde::Serialize;

use crate::Management;

/// Samples kept: a minute and one.
const KEEP: usize = 61;

/// One sample of the broker-wide figures.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Sample {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// Messages received so far (sends and publishes).
    pub received: u64,
    /// Deliveries so far.
    pub delivered: u64,
    /// Acknowledgements so far.
    pub acked: u64,
    /// Ready messages on every queue (subscription queues included).
    pub ready: u64,
    /// Delayed messages on every queue.
    pub delayed: u64,
    /// In-flight deliveries on every queue.
    pub in_flight: u64,
    /// Live sessions on this node.
    pub sessions: u64,
}

/// Messages per second over the last minute.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct RateFigures {
    /// Received per second.
    pub received: f64,
    /// Delivered per second.
    pub delivered: f64,
    /// Acknowledged per second.
    pub acked: f64,
}

#[derive(Default)]
struct Samples {
    global: VecDeque<Sample>,
    /// Per queue: (ms, entered, left) samples over the last minute.
    queues: HashMap<String, VecDeque<(u64, u64, u64)>>,
    /// The latest figures of every queue.
    latest: Arc<Vec<QueueDetails>>,
}

/// The sampled figures, shared by the handlers.
#[derive(Clone, Default)]
pub struct Rates {
    inner: Arc<Mutex<Samples>>,
}

fn per_second(delta: u64, ms: u64) -> f64 {
    if ms == 0 {
        0.0
    } else {
        delta as f64 * 1000.0 / ms as f64
    }
}

impl Rates {
    fn lock(&self) -> MutexGuard<'_, Samples> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the sampling task (it ends with the broker).
    pub fn start(mgmt: Management) -> Rates {
        let rates = Rates::default();
        let r = rates.clone();
        tokio::spawn(async move {
            let every = if mgmt.engine() == "postgres" {
                Duration::from_secs(5)
            } else {
                Duration::from_secs(1)
            };
            let shutdown = mgmt.shutdown_token();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => return,
                }
                r.sample(&mgmt).await;
            }
        });
        rates
    }

    /// Takes one sample now.
    pub async fn sample(&self, mgmt: &Management) {
        let details = mgmt.store().admin().queue_details().await.ok();
        let stats = mgmt.stats();
        let now = mgmt.now_ms();
        let mut s = Sample {
            at_ms: now,
            received: Stats::get(&stats.messages_sent),
            delivered: Stats::get(&stats.deliveries),
            acked: Stats::get(&stats.acks),
            sessions: mgmt.session_count() as u64,
            ..Sample::default()
        };
        let mut samples = self.lock();
        if let Some(details) = details {
            for q in &details {
                s.ready += q.ready;
                s.delayed += q.delayed;
                s.in_flight += q.in_flight;
                if let (Some(e), Some(l)) = (q.entered_total, q.left_total) {
                    let ring = samples.queues.entry(q.name.clone()).or_default();
                    ring.push_back((now, e, l));
                    while ring.len() > KEEP {
                        ring.pop_front();
                    }
                }
            }
            if samples.queues.len() > details.len() {
                let names: std::collections::HashSet<&str> =
                    details.iter().map(|q| q.name.as_str()).collect();
                samples.queues.retain(|k, _| names.contains(k.as_str()));
            }
            samples.latest = Arc::new(details);
        } else if let Some(last) = samples.global.back() {
            (s.ready, s.delayed, s.in_flight) = (last.ready, last.delayed, last.in_flight);
        }
        samples.global.push_back(s);
        while samples.global.len() > KEEP {
            samples.global.pop_front();
        }
    }

    /// The samples of the last minute, oldest first.
    pub fn series(&self) -> Vec<Sample> {
        self.lock().global.iter().copied().collect()
    }

    /// The latest figures of every queue (empty before the first sample).
    pub fn latest_queues(&self) -> Arc<Vec<QueueDetails>> {
        self.lock().latest.clone()
    }

    /// Broker-wide rates over the samples kept.
    pub fn global(&self) -> RateFigures {
        let s = self.lock();
        match (s.global.front(), s.global.back()) {
            (Some(a), Some(b)) => {
                let ms = b.at_ms.saturating_sub(a.at_ms);
                RateFigures {
                    received: per_second(b.received.saturating_sub(a.received), ms),
                    delivered: per_second(b.delivered.saturating_sub(a.delivered), ms),
                    acked: per_second(b.acked.saturating_sub(a.acked), ms),
                }
            }
            _ => RateFigures::default(),
        }
    }

    /// Messages per second in and out of `queue` over the last minute, where the engine
    /// counts them.
    pub fn queue(&self, queue: &str) -> Option<(f64, f64)> {
        let s = self.lock();
        let ring = s.queues.get(queue)?;
        let (a, b) = (ring.front()?, ring.back()?);
        let ms = b.0.saturating_sub(a.0);
        Some((
            per_second(b.1.saturating_sub(a.1), ms),
            per_second(b.2.saturating_sub(a.2), ms),
        ))
    }
}
