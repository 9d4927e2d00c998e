//! Client names that hold nothing expire: the upkeep deletes the rows of names with no session
//! (ephemeral ones, and permanent ones offline since before the cut) that no stored message
//! names as its sender or receiver and that own no durable subscription.
//!
//! Against a send that names a row being deleted: the rows are locked first (`FOR UPDATE SKIP
//! LOCKED`, so a row a send holds `FOR KEY SHARE` is left for the next run), and only then, in a
//! statement of its own (a newer snapshot), checked and deleted: every message committed before
//! the lock is seen, and a send that comes after waits for the deletion and then finds no row
//! (`ClientNotFound`). A claim of the name waits too, then registers it anew.
//!
//! Telling whether a name holds messages reads the messages table's sender and receiver
//! columns (there is no index on them: it would cost every send); this is done once per run,
//! and only when some name is due.

use super::inner::Inner;
use super::receive::as_i64;
use super::tx::{first_column, retrying};
use crate::error::StoreError;

impl Inner {
    /// See [`crate::Upkeep::expire_clients`].
    pub async fn expire_clients(&self, now_ms: u64, idle_ms: u64) -> Result<u64, StoreError> {
        let cut = as_i64(now_ms.saturating_sub(idle_ms));
        let gone = retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "SELECT id FROM clients \
                     WHERE node IS NULL AND (ephemeral OR last_seen <= $1) \
                     ORDER BY id FOR UPDATE SKIP LOCKED",
                )
                .await?;
            let due = first_column::<i64>(&tx.query(&stmt, &[&cut]).await?)?;
            if due.is_empty() {
                return Ok(Vec::new());
            }
            // One pass over the messages for all of them (the connection's planner settings
            // forbid sequential scans, which this one needs).
            tx.batch_execute("SET LOCAL enable_seqscan = on; SET LOCAL enable_hashagg = on")
                .await?;
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM clients c WHERE c.id = ANY($1) \
                       AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.sender_id = c.id) \
                       AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.receiver_id = c.id) \
                       AND NOT EXISTS (SELECT 1 FROM subscriptions s \
                                       WHERE s.owner = c.name AND s.durable) \
                     RETURNING c.name",
                )
                .await?;
            let gone = first_column::<String>(&tx.query(&stmt, &[&due]).await?)?;
            tx.commit().await?;
            Ok(gone)
        })
        .await?;
        for name in &gone {
            self.clients.forget(name);
        }
        if !gone.is_empty() {
            tracing::info!(
                forgotten = gone.len(),
                "forgot client names that held nothing"
            );
        }
        Ok(gone.len() as u64)
    }
}
