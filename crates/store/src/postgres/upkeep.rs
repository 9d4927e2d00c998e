//! The upkeep role on PostgreSQL: leases that ended, delayed rows that became due (so the
//! broker can wake their waiters), expired ready rows (receives skip them anyway), and client
//! names that hold nothing.
//!
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

use async_trait::async_trait;

use super::dead_letter::move_expired;
use super::inner::Inner;
use super::notify::notify;
use super::receive::as_i64;
use super::settle::{names_after_dead_letters, UNLEASE};
use super::tally::Tally;
use super::tx::{drop_orphans, first_column, retrying};
use crate::api::Upkeep;
use crate::error::StoreError;

#[async_trait]
impl Upkeep for Inner {
    async fn expire_clients(&self, now_ms: u64, idle_ms: u64) -> Result<u64, StoreError> {
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

    /// Returns every delivery whose lease ended at or before `now_ms`.
    async fn expire_leases(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        // Deadlines past i64::MAX ms are never reached; clamp rather than wrap.
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let stmt = tx
                .prepare_cached(&format!(
                    "WITH u AS (UPDATE message_queue SET {UNLEASE} \
                       WHERE lease_delivery_id IS NOT NULL AND lease_until <= $1 \
                       RETURNING queue_id, ctid) \
                     SELECT q.name, u.ctid::text FROM u JOIN queues q ON q.id = u.queue_id"
                ))
                .await?;
            let rows = tx.query(&stmt, &[&now]).await?;
            let mut tally = Tally::default();
            let names = names_after_dead_letters(&tx, &rows, &mut tally).await?;
            notify(&tx, &self.node, &names).await?;
            tx.commit().await?;
            self.count(tally);
            Ok(names)
        })
        .await
    }

    /// The earliest lease deadline.
    async fn next_lease_deadline(&self) -> Result<Option<u64>, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "SELECT min(lease_until) FROM message_queue \
                     WHERE lease_delivery_id IS NOT NULL",
                )
                .await?;
            let min: Option<i64> = conn.query_one(&stmt, &[]).await?.try_get(0)?;
            Ok(min.map(|v| u64::try_from(v).unwrap_or(0)))
        })
        .await
    }

    async fn delayed_due(
        &self,
        after_ms: u64,
        until_ms: u64,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        let (after, until) = (as_i64(after_ms), as_i64(until_ms));
        retrying(|| async {
            let conn = self.conn().await?;
            let due = conn
                .prepare_cached(
                    "SELECT q.name FROM queues q WHERE q.id IN (SELECT DISTINCT mq.queue_id \
                       FROM message_queue mq \
                       WHERE mq.deliver_at > 0 AND mq.deliver_at > $1 AND mq.deliver_at <= $2) \
                     ORDER BY q.name",
                )
                .await?;
            let mut names = Vec::new();
            for row in conn.query(&due, &[&after, &until]).await? {
                names.push(row.try_get::<_, String>(0)?);
            }
            let next = conn
                .prepare_cached(
                    "SELECT min(deliver_at) FROM message_queue \
                     WHERE deliver_at > 0 AND deliver_at > $1",
                )
                .await?;
            let min: Option<i64> = conn.query_one(&next, &[&until]).await?.try_get(0)?;
            Ok((names, min.map(|v| v as u64)))
        })
        .await
    }

    async fn purge_expired(&self, now_ms: u64) -> Result<u64, StoreError> {
        let now = as_i64(now_ms);
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            // Those whose queue has an expiry queue move there first; the rest are deleted.
            let mut tally = Tally::default();
            let (moved, n) = move_expired(&tx, now, &mut tally).await?;
            let stmt = tx
                .prepare_cached(
                    "WITH r AS (DELETE FROM message_queue mq \
                       WHERE mq.expires_at > 0 AND mq.expires_at <= $1 \
                         AND mq.lease_delivery_id IS NULL \
                       RETURNING mq.message_id, mq.alone, mq.queue_id), \
                     gone AS (DELETE FROM messages g USING r WHERE r.alone AND g.id = r.message_id) \
                     SELECT r.message_id, r.alone, r.queue_id FROM r",
                )
                .await?;
            let rows = tx.query(&stmt, &[&now]).await?;
            let mut shared: Vec<i64> = Vec::new();
            for row in &rows {
                tally.left(row.try_get(2)?, 1);
                if !row.try_get::<_, bool>(1)? {
                    shared.push(row.try_get(0)?);
                }
            }
            shared.sort_unstable();
            shared.dedup();
            drop_orphans(&tx, &shared).await?;
            if !moved.is_empty() {
                notify(&tx, &self.node, &moved).await?;
            }
            tx.commit().await?;
            tally.counters.expired = n + rows.len() as u64;
            self.count(tally);
            Ok(n + rows.len() as u64)
        })
        .await
    }

    async fn maintain(&self) -> Result<(), StoreError> {
        // PostgreSQL's autovacuum reclaims dead rows; nothing to do here.
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        // Every call returns after its transaction committed (synchronous_commit; a
        // transaction of non-persistent messages only does not wait for the WAL flush, and
        // such messages are not promised to survive a crash).
        Ok(())
    }
}
