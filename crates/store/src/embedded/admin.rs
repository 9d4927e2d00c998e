//! [`Admin`] for the embedded engine: each operation locks the state once (a browse examines
//! at most [`BROWSE_BUDGET`] entries under it), and the figures come from counters the engine
//! keeps anyway.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ferry_protocol::{MessageId, QueueOptions};

use super::store::{Class, EmbeddedStore};
use crate::admin::{
    Admin, BrowsePage, BrowseSpec, ClientRecord, EngineStats, Histogram, MoveReport, MoveTarget,
    QueueDetails, BROWSE_BUDGET, MIN_FREE_BYTES,
};
use crate::error::StoreError;

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

#[async_trait]
impl Admin for EmbeddedStore {
    async fn queue_details(&self) -> Result<Vec<QueueDetails>, StoreError> {
        Ok(self.state().queue_details())
    }

    async fn set_queue_options(
        &self,
        name: &str,
        options: &QueueOptions,
    ) -> Result<(), StoreError> {
        self.mutate(Class::Grows, |st, log| {
            st.set_queue_options(log, name, options)
        })
        .await
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.mutate(Class::Frees, |st, log| st.purge_queue(log, name))
            .await
    }

    async fn browse(&self, spec: &BrowseSpec) -> Result<BrowsePage, StoreError> {
        // As a peek: what a crash could still take back is not shown while writes fail.
        self.writable().await?;
        self.state().browse(spec, BROWSE_BUDGET)
    }

    async fn delete_message(&self, queue: &str, id: MessageId) -> Result<(), StoreError> {
        self.mutate(Class::Frees, |st, log| st.delete_message(log, queue, id))
            .await
    }

    async fn move_messages(
        &self,
        from: &str,
        target: &MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<MoveReport, StoreError> {
        self.mutate(Class::Grows, |st, log| {
            st.move_messages(log, from, target, ids, limit)
        })
        .await
    }

    async fn list_clients(&self) -> Result<Vec<ClientRecord>, StoreError> {
        let mut names = self.state().client_names();
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| ClientRecord {
                node: self.claims.is_online(&name).then(String::new),
                name,
            })
            .collect())
    }

    async fn forget_client(&self, name: &str) -> Result<(), StoreError> {
        let claims = &self.claims;
        self.mutate(Class::Frees, |st, log| {
            st.forget_client(log, name, |n| claims.is_online(n))
        })
        .await
    }

    fn engine_stats(&self) -> EngineStats {
        let (log_bytes, live, segments, counters) = {
            let st = self.state();
            let total: u64 = st.journal.segments.values().map(|s| s.total).sum();
            let live: u64 = st.journal.segments.values().map(|s| s.live).sum();
            (total, live, st.journal.segments.len() as u64, st.counters)
        };
        let disk = self.backend.disk_space(&self.seg_dir).ok();
        EngineStats {
            engine: "embedded",
            log_bytes: Some(log_bytes),
            segments: Some(segments),
            live_ratio: Some(if log_bytes == 0 {
                1.0
            } else {
                live as f64 / log_bytes as f64
            }),
            spare_segments: Some(self.spare_segments() as u64),
            fsync_seconds: Some(self.figures.fsync.snapshot()),
            commit_batch: Some(self.figures.batch.snapshot()),
            compactions: Some(self.figures.compactions.load(Ordering::Relaxed)),
            recovery_seconds: Some(self.figures.recovery.as_secs_f64()),
            recovered_messages: Some(self.recovered_messages),
            refusing_writes: self.log.check_writable().is_err() || self.log.is_degraded(),
            counters,
            disk_free_bytes: disk.map(|d| d.free),
            disk_total_bytes: disk.map(|d| d.total),
        }
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        self.writable().await?;
        match self.backend.disk_space(&self.seg_dir) {
            Ok(d) if d.free < MIN_FREE_BYTES => Err(StoreError::Unavailable(format!(
                "out of disk: {} bytes free where the log is ({} needed to be ready)",
                d.free, MIN_FREE_BYTES
            ))),
            _ => Ok(()),
        }
    }
}
