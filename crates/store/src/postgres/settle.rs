//! Settling client-ack deliveries other than acks (which go through the batcher): nack with
//! requeue, and the returns that a released session or an ended lease share (dead-lettering
//! those over their queue's limit). What makes messages ready again is announced to the other
//! nodes in the same transaction.

use ferry_protocol::DeliveryId;

use super::dead_letter::move_over_limit;
use super::inner::Inner;
use super::notify::notify;
use super::receive::as_i64;
use super::tally::Tally;
use super::tx::{retrying, TxResult};
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
}
