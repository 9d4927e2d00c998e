//! Periodic store upkeep: expired messages are removed from their queues, and the embedded
//! engine compacts mostly-dead log segments.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::shared::Shared;

/// Time between upkeep runs.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// Runs until shutdown: once at start (a broker restarted after a crash reclaims what its
/// predecessor left, so restarts do not replay ever more dead log), then every [`INTERVAL`].
pub async fn run(shared: Arc<Shared>) {
    loop {
        match shared.store.purge_expired(shared.now_ms()).await {
            // Expired messages may have gone to expiry queues: wake whoever waits anywhere.
            Ok(n) if n > 0 => shared.wakers.notify_all(),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "removing expired messages failed; will retry"),
        }
        if let Err(e) = shared.store.maintain().await {
            warn!(error = %e, "store upkeep failed; will retry");
        }
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = shared.shutdown.cancelled() => return,
        }
    }
}
