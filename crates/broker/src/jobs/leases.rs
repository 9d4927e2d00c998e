//! Returns expired client-ack deliveries to their queues and wakes their waiters.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::shared::Shared;

/// How often to look for expired leases: a quarter of the lease, between 10 ms and 1 s, so a
/// lease ends at most 25% late.
pub fn tick(lease_ms: u32) -> Duration {
    Duration::from_millis(u64::from(lease_ms / 4).clamp(10, 1000))
}

/// Runs until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let tick = tick(shared.limits.lease_ms);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shared.shutdown.cancelled() => return,
        }
        match shared.store.upkeep().next_lease_deadline().await {
            Ok(Some(deadline)) if deadline <= shared.now_ms() => {}
            Ok(_) => continue,
            Err(e) => {
                warn!(error = %e, "lease expiry: cannot read lease deadlines");
                continue;
            }
        }
        match shared.store.upkeep().expire_leases(shared.now_ms()).await {
            Ok(queues) => shared.wakers.notify(&queues),
            Err(e) => warn!(error = %e, "lease expiry failed; will retry"),
        }
    }
}
