//! The engine's figures kept outside the state lock: fsync latency and group-commit sizes
//! (recorded by the writer thread, read by scrapes), compactions and the recovery time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::admin::Histogram;

/// A histogram of fixed buckets kept with relaxed atomics (recorded by the writer thread,
/// read by scrapes).
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    /// Sum of observations, in millionths of the unit.
    sum_micros: AtomicU64,
}

impl AtomicHistogram {
    /// An empty histogram over `bounds` (ascending).
    pub fn new(bounds: &'static [f64]) -> Self {
        AtomicHistogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micros
            .fetch_add((v * 1e6) as u64, Ordering::Relaxed);
    }

    /// A copy for a scrape.
    pub fn snapshot(&self) -> Histogram {
        Histogram {
            bounds: self.bounds.to_vec(),
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// Bucket bounds of fsync latency, in seconds.
pub const FSYNC_BOUNDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
/// Bucket bounds of group-commit batch sizes (appends per write).
pub const BATCH_BOUNDS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// The engine's figures kept outside the state lock.
#[derive(Debug)]
pub struct EngineFigures {
    /// Seconds per fsync of the log.
    pub fsync: AtomicHistogram,
    /// Appends per group commit.
    pub batch: AtomicHistogram,
    /// Compaction runs that freed segments.
    pub compactions: AtomicU64,
    /// How long recovery took at open.
    pub recovery: Duration,
    /// Fsyncs slower than the warning threshold (logged).
    pub slow_fsyncs: AtomicU64,
}

impl EngineFigures {
    /// Figures of a store whose recovery took `recovery`.
    pub fn new(recovery: Duration) -> Self {
        EngineFigures {
            fsync: AtomicHistogram::new(FSYNC_BOUNDS),
            batch: AtomicHistogram::new(BATCH_BOUNDS),
            compactions: AtomicU64::new(0),
            recovery,
            slow_fsyncs: AtomicU64::new(0),
        }
    }
}
