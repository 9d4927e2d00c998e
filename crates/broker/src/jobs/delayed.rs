//! Wakes long-poll receivers and subscriptions when delayed messages become due: the job sleeps
//! (on the broker's clock) until the earliest delivery time the store knows of, then asks the
//! store which queues got messages due since it last looked and wakes their waiters.
//!
//! A delayed send wakes the job so it can sleep until an earlier time; it also looks again at
//! least every [`RECHECK`], which covers delayed messages sent through other nodes sharing the
//! store.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::shared::Shared;

/// Longest the job sleeps without looking at the store.
pub const RECHECK: Duration = Duration::from_secs(1);

/// How far before its last look the job asks again (see [`run`]).
const SLACK_MS: u64 = 2_000;

/// Runs until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let mut after = shared.now_ms();
    loop {
        let now = shared.now_ms();
        // The span starts a little before the last look: a delayed message stored just after
        // that look with a delivery time already behind it is still found (a waiter woken for
        // nothing looks again and goes back to waiting).
        let from = after.saturating_sub(SLACK_MS);
        let next = match shared.store.upkeep().delayed_due(from, now).await {
            Ok((queues, next)) => {
                shared.wakers.notify(&queues);
                after = now;
                next
            }
            Err(e) => {
                warn!(error = %e, "delayed delivery: cannot read the schedule; will retry");
                None
            }
        };
        let until = async {
            match next {
                Some(at) => shared.clock.sleep_until_ms(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = until => {}
            _ = shared.delayed_sent.notified() => {}
            _ = tokio::time::sleep(RECHECK) => {}
            _ = shared.shutdown.cancelled() => return,
        }
    }
}
