//! The jobs that make a node one of several over a shared store: heartbeats (which also free
//! what dead nodes held, and close this node's sessions when the others took it for dead) and
//! forwarding other nodes' change reports to the local wakers.
//! Both survive a lost database: the heartbeat retries on its next tick, the store's listener
//! reconnects by itself and then reports "anything may have changed".

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tracing::warn;

use crate::shared::Shared;

/// How often a node heartbeats: a fifth of the timeout, between 50 ms and 1 s.
pub fn heartbeat_tick(node_timeout_ms: u32) -> Duration {
    Duration::from_millis(u64::from(node_timeout_ms / 5).clamp(50, 1000))
}

/// Heartbeats until shutdown, the first time at once.
pub async fn heartbeat(shared: Arc<Shared>, node_timeout_ms: u32) {
    let tick = heartbeat_tick(node_timeout_ms);
    let mut failing = false;
    loop {
        match shared
            .store
            .sessions()
            .heartbeat(u64::from(node_timeout_ms))
            .await
        {
            Ok(beat) => {
                if failing {
                    tracing::info!("heartbeat: the store is reachable again");
                }
                failing = false;
                if beat.was_taken_for_dead {
                    // The others freed our sessions' names and leases: a session that went on
                    // would share its name with a new one elsewhere. End them all.
                    warn!("this node was taken for dead; closing every session so that clients connect again");
                    shared.fence_sessions();
                }
                shared.wakers.notify(&beat.returned);
            }
            Err(e) => {
                if !failing {
                    warn!(error = %e, "heartbeat failed; retrying");
                }
                failing = true;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shared.shutdown.cancelled() => return,
        }
    }
}

/// Wakes local waiters for what other nodes changed, until shutdown (or at once, for a store
/// no other node shares).
pub async fn forward_changes(shared: Arc<Shared>) {
    let Some(mut changes) = shared.store.sessions().subscribe_changes() else {
        return;
    };
    loop {
        let received = tokio::select! {
            r = changes.recv() => r,
            _ = shared.shutdown.cancelled() => return,
        };
        match received {
            Ok(queues) if queues.is_empty() => shared.wakers.notify_all(),
            Ok(queues) => shared.wakers.notify(&queues),
            Err(RecvError::Lagged(_)) => shared.wakers.notify_all(),
            Err(RecvError::Closed) => return,
        }
    }
}
