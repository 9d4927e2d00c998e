//! The grants reloader: every [`RELOAD_EVERY`] reads the users' grants again, so changes made
//! through other nodes sharing a PostgreSQL store, or by `ferry user` on it, take effect.

use std::sync::Arc;

use tracing::warn;

use crate::access::RELOAD_EVERY;
use crate::shared::Shared;

/// Reloads the grants until shutdown.
pub async fn run(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(RELOAD_EVERY) => {}
            _ = shared.shutdown.cancelled() => return,
        }
        if let Err(e) = shared.access.reload(&*shared.store).await {
            warn!(error = %e, "cannot read the users' grants; keeping the last ones read");
        }
    }
}
