//! Periodic store upkeep: expired messages are removed from their queues, the embedded engine
//! compacts mostly-dead log segments (and makes its disk space reserve again once there is
//! room), client names that hold nothing expire, and the disk under the store is watched for
//! free space (see [`super::disk`]).
//!
//! None of it writes anything on an idle broker: compaction comes to rest, and the other two
//! write only when something expired.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tracing::warn;

use crate::shared::Shared;

/// Time between compaction runs. Short, because under a heavy write load the embedded log rolls
/// a segment about every half second: compacting each second returns the dead segments' files
/// to the pool of spares before the writer needs them, so that new segments reuse files instead
/// of growing new ones (which makes every commit's `fdatasync` dearer), and keeps the log at a
/// few segments. A run with nothing to do looks at the oldest segment and stops.
pub const COMPACTION_INTERVAL: Duration = Duration::from_secs(1);

/// Time between removals of expired messages. Cheap when nothing has expired: the embedded
/// engine looks them up in an index by expiry time, PostgreSQL in a partial index.
pub const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);

/// Longest time between two runs of client name expiry (ephemeral names go with their
/// session on the embedded engine; on PostgreSQL, with the next run).
pub const MAX_CLIENT_EXPIRY_INTERVAL: Duration = Duration::from_secs(60);

/// Time between runs of client name expiry for `client_expiry`: a quarter of it, at least a
/// second and at most [`MAX_CLIENT_EXPIRY_INTERVAL`].
pub fn client_expiry_interval(client_expiry: Option<Duration>) -> Duration {
    client_expiry.map_or(MAX_CLIENT_EXPIRY_INTERVAL, |e| {
        (e / 4).clamp(Duration::from_secs(1), MAX_CLIENT_EXPIRY_INTERVAL)
    })
}

/// Runs until shutdown: each task once at start (a broker restarted after a crash reclaims
/// what its predecessor left, so restarts do not replay ever more dead log), then each at its
/// interval. Client names that hold nothing are forgotten after `client_expiry` offline
/// (`None`: only ephemeral ones).
pub async fn run(shared: Arc<Shared>, client_expiry: Option<Duration>) {
    let mut compaction = tokio::time::interval(COMPACTION_INTERVAL);
    let mut disk = tokio::time::interval(super::disk::CHECK_INTERVAL);
    disk.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut watch = super::disk::DiskWatch::default();
    let mut expiry = tokio::time::interval(EXPIRY_INTERVAL);
    let mut clients = tokio::time::interval(client_expiry_interval(client_expiry));
    compaction.set_missed_tick_behavior(MissedTickBehavior::Delay);
    expiry.set_missed_tick_behavior(MissedTickBehavior::Delay);
    clients.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let idle_ms = client_expiry.map_or(u64::MAX, |e| {
        u64::try_from(e.as_millis()).unwrap_or(u64::MAX)
    });
    loop {
        tokio::select! {
            biased;
            _ = shared.shutdown.cancelled() => return,
            _ = expiry.tick() => match shared.store.upkeep().purge_expired(shared.now_ms()).await {
                // Expired messages may have gone to expiry queues: wake whoever waits anywhere.
                Ok(n) if n > 0 => shared.wakers.notify_all(),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "removing expired messages failed; will retry"),
            },
            _ = disk.tick() => {
                let e = shared.store.admin().engine_stats();
                let space = e.disk_free_bytes.zip(e.disk_total_bytes);
                if let Some(event) = watch.observe(space, std::time::Instant::now()) {
                    super::disk::log(event);
                }
            }
            _ = compaction.tick() => {
                if let Err(e) = shared.store.upkeep().maintain().await {
                    warn!(error = %e, "store upkeep failed; will retry");
                }
            }
            _ = clients.tick() => {
                if let Err(e) = shared.store.upkeep().expire_clients(shared.now_ms(), idle_ms).await {
                    warn!(error = %e, "client name expiry failed; will retry");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_expiry_runs_every_quarter_of_it_within_bounds() {
        let secs = Duration::from_secs;
        assert_eq!(client_expiry_interval(Some(secs(8))), secs(2));
        assert_eq!(client_expiry_interval(Some(secs(2))), secs(1));
        assert_eq!(client_expiry_interval(Some(secs(86_400))), secs(60));
        assert_eq!(client_expiry_interval(None), secs(60));
    }
}
