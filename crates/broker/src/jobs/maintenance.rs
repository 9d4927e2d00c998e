//! Periodic store upkeep: expired messages are removed from their queues, and the embedded
//! engine compacts mostly-dead log segments.

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

/// Runs until shutdown: both tasks once at start (a broker restarted after a crash reclaims
/// what its predecessor left, so restarts do not replay ever more dead log), then each at its
/// interval.
pub async fn run(shared: Arc<Shared>) {
    let mut compaction = tokio::time::interval(COMPACTION_INTERVAL);
    let mut expiry = tokio::time::interval(EXPIRY_INTERVAL);
    compaction.set_missed_tick_behavior(MissedTickBehavior::Delay);
    expiry.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shared.shutdown.cancelled() => return,
            _ = expiry.tick() => match shared.store.purge_expired(shared.now_ms()).await {
                // Expired messages may have gone to expiry queues: wake whoever waits anywhere.
                Ok(n) if n > 0 => shared.wakers.notify_all(),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "removing expired messages failed; will retry"),
            },
            _ = compaction.tick() => {
                if let Err(e) = shared.store.maintain().await {
                    warn!(error = %e, "store upkeep failed; will retry");
                }
            }
        }
    }
}
