//! Delayed delivery and time to live: which queues' delayed rows became due (so the broker can
//! wake their waiters) and the deletion of expired ready rows (receives skip them anyway).

use super::dead_letter::move_expired;
use super::inner::Inner;
use super::notify::notify;
use super::receive::as_i64;
use super::tally::Tally;
use super::tx::{drop_orphans, retrying};
use crate::error::StoreError;

impl Inner {
    /// See [`crate::Upkeep::delayed_due`].
    pub async fn delayed_due(
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

    /// See [`crate::Upkeep::purge_expired`].
    pub async fn purge_expired(&self, now_ms: u64) -> Result<u64, StoreError> {
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
}
