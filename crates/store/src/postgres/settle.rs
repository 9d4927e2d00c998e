//! Settling client-ack deliveries other than acks (which go through the batcher): nack,
//! release of a session, lease expiry, and the next lease deadline. What makes messages ready
//! again is announced to the other nodes in the same transaction.

use ferry_protocol::DeliveryId;

use super::consumers::drop_unconsumed_shared;
use super::dead_letter::move_over_limit;
use super::inner::Inner;
use super::notify::notify;
use super::receive::as_i64;
use super::tally::Tally;
use super::tx::{first_column, retrying, TxResult};
use crate::api::SessionId;
use crate::error::StoreError;

/// Clears the lease columns (the row becomes ready again, its delivery count kept).
pub const UNLEASE: &str = "lease_node = NULL, lease_session = NULL, lease_until = NULL, \
                       lease_delivery_id = NULL";

/// The `ctid`s of the leased rows named by (session, delivery id) pairs, $2 and $3 (arrays),
/// held by node $1: one index probe per pair whatever the statistics say (a join of the pairs
/// with the table could be planned as a scan of every lease per pair). A statement deletes or
/// updates the rows by these `ctid`s; a row changed meanwhile (its lease expired) no longer
/// matches and is left alone.
pub const LEASED_ROWS: &str = "SELECT l.ctid \
    FROM unnest($2::bigint[], $3::bigint[]) AS a(session, id), \
    LATERAL (SELECT mq.ctid FROM message_queue mq \
      WHERE mq.lease_delivery_id = a.id AND mq.lease_node = $1 AND mq.lease_session = a.session \
      LIMIT 1) l";

/// The delivery ids of `asked` that are not in `settled`, in the order asked (an id asked twice
/// is unknown the second time, as it was settled the first).
pub fn unknown_ids(asked: &[DeliveryId], settled: &[DeliveryId]) -> Vec<DeliveryId> {
    let mut left: Vec<DeliveryId> = settled.to_vec();
    let mut unknown = Vec::new();
    for id in asked {
        match left.iter().position(|s| s == id) {
            Some(i) => {
                left.swap_remove(i);
            }
            None => unknown.push(*id),
        }
    }
    unknown
}

pub fn sorted_names(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names.dedup();
    names
}

/// From rows of (queue name, ctid text) just returned to their queues: dead-letters those over
/// their queue's maximum delivery count, and returns the queues that got messages, sorted.
pub(super) async fn names_after_dead_letters(
    tx: &deadpool_postgres::Transaction<'_>,
    rows: &[tokio_postgres::Row],
    tally: &mut Tally,
) -> TxResult<Vec<String>> {
    let mut names = Vec::with_capacity(rows.len());
    let mut ctids = Vec::with_capacity(rows.len());
    for row in rows {
        names.push(row.try_get::<_, String>(0)?);
        ctids.push(row.try_get::<_, String>(1)?);
    }
    names.extend(move_over_limit(tx, &ctids, tally).await?);
    Ok(sorted_names(names))
}

impl Inner {
    /// Requeues deliveries held by `session` (drops go through the batcher as acks).
    pub async fn requeue(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
    ) -> Result<Vec<String>, StoreError> {
        let (queues, settled) = retrying(|| self.try_requeue(session, ids)).await?;
        let unknown = unknown_ids(ids, &settled);
        if unknown.is_empty() {
            Ok(sorted_names(queues))
        } else {
            Err(StoreError::DeliveriesNotFound(unknown))
        }
    }

    async fn try_requeue(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
    ) -> TxResult<(Vec<String>, Vec<DeliveryId>)> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // RETURNING sees the new (NULL) delivery id, so the id is read before the update.
        let stmt = tx
            .prepare_cached(&format!(
                "WITH t AS (SELECT mq.ctid AS t, mq.lease_delivery_id AS id \
                   FROM message_queue mq WHERE mq.ctid = ANY(ARRAY({LEASED_ROWS}))), \
                 u AS (UPDATE message_queue mq SET {UNLEASE} FROM t \
                   WHERE mq.ctid = ANY(ARRAY(SELECT t.t FROM t)) AND mq.ctid = t.t \
                   RETURNING t.id, mq.queue_id, mq.ctid) \
                 SELECT u.id, q.name, u.ctid::text FROM u JOIN queues q ON q.id = u.queue_id"
            ))
            .await?;
        let ids_i: Vec<i64> = ids.iter().map(|i| as_i64(*i)).collect();
        let sessions = vec![as_i64(session); ids_i.len()];
        let rows = tx.query(&stmt, &[&self.node, &sessions, &ids_i]).await?;
        let mut queues = Vec::with_capacity(rows.len());
        let mut settled = Vec::with_capacity(rows.len());
        let mut ctids = Vec::with_capacity(rows.len());
        for row in rows {
            settled.push(row.try_get::<_, i64>(0)? as u64);
            queues.push(row.try_get::<_, String>(1)?);
            ctids.push(row.try_get::<_, String>(2)?);
        }
        let mut tally = Tally::default();
        queues.extend(move_over_limit(&tx, &ctids, &mut tally).await?);
        notify(&tx, &self.node, &sorted_names(queues.clone())).await?;
        tx.commit().await?;
        self.count(tally);
        Ok((queues, settled))
    }

    /// Returns every delivery `session` holds to its queue.
    pub async fn release_session(&self, session: SessionId) -> Result<Vec<String>, StoreError> {
        let session = as_i64(session);
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let stmt = tx
                .prepare_cached(&format!(
                    "WITH u AS (UPDATE message_queue SET {UNLEASE} \
                       WHERE lease_node = $1 AND lease_session = $2 \
                         AND lease_delivery_id IS NOT NULL \
                       RETURNING queue_id, ctid) \
                     SELECT q.name, u.ctid::text FROM u JOIN queues q ON q.id = u.queue_id"
                ))
                .await?;
            let rows = tx.query(&stmt, &[&self.node, &session]).await?;
            let mut tally = Tally::default();
            let names = names_after_dead_letters(&tx, &rows, &mut tally).await?;
            notify(&tx, &self.node, &names).await?;
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM subscription_consumers WHERE node = $1 AND session = $2 \
                     RETURNING queue_id",
                )
                .await?;
            let consumed = first_column::<i64>(&tx.query(&stmt, &[&self.node, &session]).await?)?;
            drop_unconsumed_shared(&tx, &consumed).await?;
            tx.commit().await?;
            self.count(tally);
            Ok(names)
        })
        .await
    }

    /// Returns every delivery whose lease ended at or before `now_ms`.
    pub async fn expire_leases(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
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
    pub async fn next_lease_deadline(&self) -> Result<Option<u64>, StoreError> {
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
}
