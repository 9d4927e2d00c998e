//! [`Admin`] for the embedded engine: each operation locks the state once (a browse examines
//! at most [`BROWSE_BUDGET`] entries under it), and the figures come from counters the engine
//! keeps anyway.

use std::sync::atomic::Ordering;

use async_trait::async_trait;
use ferry_protocol::{MessageId, QueueOptions};

use super::store::{Class, EmbeddedStore};
use crate::admin::{
    Admin, BrowsePage, BrowseSpec, ClientRecord, EngineStats, MoveReport, MoveTarget, QueueDetails,
    BROWSE_BUDGET, MIN_FREE_BYTES,
};
use crate::error::StoreError;

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
            index_bytes: Some(self.index_bytes()),
            cache_bytes: Some(self.cache.bytes.load(Ordering::Relaxed)),
            cache_hits: Some(self.cache.hits.load(Ordering::Relaxed)),
            cache_misses: Some(self.cache.misses.load(Ordering::Relaxed)),
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
