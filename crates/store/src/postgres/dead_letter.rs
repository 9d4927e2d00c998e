//! Dead-lettering: a client-ack delivery that came back after its queue's maximum number of
//! deliveries leaves that queue; a copy with its history (see [`crate::api::dead_letter`])
//! goes to the queue's dead-letter queue, in the transaction that returned the delivery.
//! Without a dead-letter queue (or when it has been deleted) the message is dropped. Expired
//! messages go the same way to their queue's expiry queue when the upkeep removes them.
//!
//! What moved or was dropped is counted in the transaction's [`Tally`], which
//! the caller adds to the store's counters once the transaction commits (a retried one is
//! counted once).

use deadpool_postgres::Transaction;

use super::props;
use super::tally::Tally;
use super::tx::{drop_orphans, TxResult};
use crate::api::dead_letter;

/// Moves the rows among `ctids` (rows just returned to their queues, as text) that reached
/// their queue's maximum delivery count; returns the dead-letter queues that got messages.
pub async fn move_over_limit(
    tx: &Transaction<'_>,
    ctids: &[String],
    tally: &mut Tally,
) -> TxResult<Vec<String>> {
    if ctids.is_empty() {
        return Ok(Vec::new());
    }
    let over = tx
        .prepare_cached(
            "SELECT mq.ctid::text, mq.message_id, mq.delivery_count, mq.alone, q.name, \
               q.dead_letter_queue_id, m.sender_id, m.receiver_id, m.priority, m.context, \
               m.created_at, m.properties::text, m.body, mq.queue_id \
             FROM message_queue mq \
             JOIN queues q ON q.id = mq.queue_id \
             JOIN messages m ON m.id = mq.message_id \
             WHERE mq.ctid = ANY($1::text[]::tid[]) AND mq.lease_delivery_id IS NULL \
               AND q.max_deliveries > 0 AND mq.delivery_count >= q.max_deliveries",
        )
        .await?;
    let rows = tx.query(&over, &[&ctids]).await?;
    move_rows(tx, &rows, dead_letter::MAX_DELIVERIES, tally).await
}

/// Moves the expired ready rows (at `now`) of queues with an expiry queue there; returns the
/// expiry queues that got messages and how many rows went. The caller deletes the other
/// expired rows.
pub async fn move_expired(
    tx: &Transaction<'_>,
    now: i64,
    tally: &mut Tally,
) -> TxResult<(Vec<String>, u64)> {
    let expired = tx
        .prepare_cached(
            "SELECT mq.ctid::text, mq.message_id, mq.delivery_count, mq.alone, q.name, \
               q.expiry_queue_id, m.sender_id, m.receiver_id, m.priority, m.context, \
               m.created_at, m.properties::text, m.body, mq.queue_id \
             FROM message_queue mq \
             JOIN queues q ON q.id = mq.queue_id \
             JOIN messages m ON m.id = mq.message_id \
             WHERE mq.expires_at > 0 AND mq.expires_at <= $1 AND mq.lease_delivery_id IS NULL \
               AND q.expiry_queue_id IS NOT NULL \
             ORDER BY mq.message_id",
        )
        .await?;
    let rows = tx.query(&expired, &[&now]).await?;
    let targets = move_rows(tx, &rows, dead_letter::EXPIRED, tally).await?;
    Ok((targets, rows.len() as u64))
}

/// Moves `rows` (columns as selected above: ctid text, message id, delivery count, alone,
/// queue name, target queue id, the message's fields, then the queue id) to their target queues for
/// `reason`, or drops them when the target is gone; counts both in `tally`.
async fn move_rows(
    tx: &Transaction<'_>,
    rows: &[tokio_postgres::Row],
    reason: &str,
    tally: &mut Tally,
) -> TxResult<Vec<String>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let target = tx
        .prepare_cached("SELECT name FROM queues WHERE id = $1 FOR KEY SHARE")
        .await?;
    let next_id = tx.prepare_cached("SELECT nextval('message_ids')").await?;
    let insert = tx
        .prepare_cached(
            "WITH m AS (INSERT INTO messages (id, sender_id, receiver_id, priority, context, \
               created_at, properties, body, expires_at) \
               VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8, 0)) \
             INSERT INTO message_queue (message_id, queue_id, priority, sender_id, receiver_id, \
               alone, body_bytes) VALUES ($1, $9, $4, $2, $3, true, octet_length($8))",
        )
        .await?;
    let remove = tx
        .prepare_cached(
            "WITH r AS (DELETE FROM message_queue WHERE ctid = $1::text::tid RETURNING alone) \
             DELETE FROM messages WHERE id = $2 AND (SELECT alone FROM r)",
        )
        .await?;
    let mut targets = Vec::new();
    let mut shared = Vec::new();
    for row in rows {
        let ctid: String = row.try_get(0)?;
        let id: i64 = row.try_get(1)?;
        let count: i32 = row.try_get(2)?;
        let alone: bool = row.try_get(3)?;
        let queue: String = row.try_get(4)?;
        let dlq: Option<i64> = row.try_get(5)?;
        match dlq {
            None => {}
            Some(dlq) => match tx.query_opt(&target, &[&dlq]).await? {
                None => tally.counters.dropped_target_missing += 1,
                Some(t) => {
                    let properties = props::decode(&row.try_get::<_, String>(11)?)?;
                    let history = dead_letter::history(
                        &properties,
                        &queue,
                        id as u64,
                        u32::try_from(count).unwrap_or(0),
                        reason,
                    );
                    let new_id: i64 = tx.query_one(&next_id, &[]).await?.try_get(0)?;
                    let sender: i64 = row.try_get(6)?;
                    let receiver: Option<i64> = row.try_get(7)?;
                    let priority: i16 = row.try_get(8)?;
                    let context: i64 = row.try_get(9)?;
                    let created_at: i64 = row.try_get(10)?;
                    let body: Vec<u8> = row.try_get(12)?;
                    tx.execute(
                        &insert,
                        &[
                            &new_id,
                            &sender,
                            &receiver,
                            &priority,
                            &context,
                            &created_at,
                            &props::encode(&history),
                            &body,
                            &dlq,
                        ],
                    )
                    .await?;
                    targets.push(t.try_get::<_, String>(0)?);
                    tally.entered(dlq, 1);
                    if reason == dead_letter::EXPIRED {
                        tally.counters.dead_lettered_expired += 1;
                    } else {
                        tally.counters.dead_lettered_max_deliveries += 1;
                    }
                }
            },
        }
        tx.execute(&remove, &[&ctid, &id]).await?;
        tally.left(row.try_get(13)?, 1);
        if !alone {
            shared.push(id);
        }
    }
    shared.sort_unstable();
    shared.dedup();
    drop_orphans(tx, &shared).await?;
    targets.sort();
    targets.dedup();
    Ok(targets)
}
