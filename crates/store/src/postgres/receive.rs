//! Receiving: peek, auto-ack and client-ack takes, by queue or by sender, in either order.
//!
//! One query picks the ready rows (locking them with `FOR UPDATE SKIP LOCKED` for takes, so
//! concurrent receivers on any node never wait for each other nor get the same row) and reads
//! the messages; a second one deletes (auto ack) or leases (client ack) the picked rows.

use bytes::Bytes;
use ferry_protocol::{AckMode, Delivery, Message, Order, ReceiveMode, Source};
use tokio_postgres::Row;

use super::errors::bad_data;
use super::props;
use super::store::Inner;
use super::tx::{drop_orphans, retrying, TxError, TxResult};
use crate::api::ReceiveSpec;
use crate::error::StoreError;

/// One picked row: the message and the queue row it came from.
struct Picked {
    message: Message,
    queue_id: i64,
}

impl Inner {
    /// See [`crate::Store::receive`].
    pub async fn receive(
        &self,
        spec: &ReceiveSpec,
        max: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        retrying(|| self.try_receive(spec, max)).await
    }

    async fn try_receive(&self, spec: &ReceiveSpec, max: usize) -> TxResult<Vec<Delivery>> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let (source_sql, source_id) = match &spec.source {
            Source::Queue(name) => {
                let stmt = tx
                    .prepare_cached("SELECT id FROM queues WHERE name = $1")
                    .await?;
                let Some(row) = tx.query_opt(&stmt, &[name]).await? else {
                    return Err(StoreError::QueueNotFound(name.clone()).into());
                };
                ("mq.queue_id", row.try_get::<_, i64>(0)?)
            }
            Source::Sender(name) => {
                let found = self.clients.lookup(&tx, &[name.as_str()]).await?;
                let Some(&id) = found.get(name.as_str()) else {
                    return Err(StoreError::ClientNotFound(name.clone()).into());
                };
                ("mq.sender_id", id)
            }
        };
        let client_id = self
            .clients
            .lookup(&tx, &[spec.client.as_str()])
            .await?
            .get(spec.client.as_str())
            .copied();
        let order = match spec.order {
            Order::Priority => "mq.priority DESC, mq.message_id, mq.queue_id",
            Order::Time => "mq.message_id, mq.queue_id",
        };
        let lock = match spec.mode {
            ReceiveMode::Peek => "",
            ReceiveMode::Take => "FOR UPDATE OF mq SKIP LOCKED",
        };
        let sql = format!(
            "SELECT mq.message_id, mq.queue_id, q.name, s.name, r.name, m.priority, m.context, \
               m.created_at, m.properties::text, m.body, mq.delivery_count \
             FROM message_queue mq \
             JOIN queues q ON q.id = mq.queue_id \
             JOIN messages m ON m.id = mq.message_id \
             JOIN clients s ON s.id = m.sender_id \
             LEFT JOIN clients r ON r.id = m.receiver_id \
             WHERE {source_sql} = $1 AND mq.lease_delivery_id IS NULL \
               AND (mq.receiver_id IS NULL OR mq.receiver_id = $2) \
             ORDER BY {order} LIMIT $3 {lock}"
        );
        let limit = i64::try_from(max.max(1)).unwrap_or(i64::MAX);
        let stmt = tx.prepare_cached(&sql).await?;
        let rows = tx.query(&stmt, &[&source_id, &client_id, &limit]).await?;
        let picked = rows.iter().map(picked).collect::<Result<Vec<_>, _>>()?;
        let message_ids: Vec<i64> = picked.iter().map(|p| as_i64(p.message.id)).collect();
        let queue_ids: Vec<i64> = picked.iter().map(|p| p.queue_id).collect();
        let mut delivery_ids = vec![0u64; picked.len()];
        match (spec.mode, spec.ack) {
            (ReceiveMode::Peek, _) => {}
            _ if picked.is_empty() => {}
            (ReceiveMode::Take, AckMode::Auto) => {
                let stmt = tx
                    .prepare_cached(
                        "DELETE FROM message_queue mq \
                         USING unnest($1::bigint[], $2::bigint[]) AS p(m, q) \
                         WHERE mq.message_id = p.m AND mq.queue_id = p.q",
                    )
                    .await?;
                tx.execute(&stmt, &[&message_ids, &queue_ids]).await?;
                let mut ids = message_ids.clone();
                ids.sort_unstable();
                ids.dedup();
                drop_orphans(&tx, &ids).await?;
            }
            (ReceiveMode::Take, AckMode::Client) => {
                let stmt = tx
                    .prepare_cached(
                        "UPDATE message_queue mq SET delivery_count = mq.delivery_count + 1, \
                           lease_node = $3, lease_session = $4, lease_until = $5, \
                           lease_delivery_id = nextval('delivery_ids') \
                         FROM unnest($1::bigint[], $2::bigint[]) AS p(m, q) \
                         WHERE mq.message_id = p.m AND mq.queue_id = p.q \
                         RETURNING mq.message_id, mq.queue_id, mq.lease_delivery_id",
                    )
                    .await?;
                let session = as_i64(spec.session);
                let until = as_i64(spec.lease_until_ms);
                let rows = tx
                    .query(
                        &stmt,
                        &[&message_ids, &queue_ids, &self.node, &session, &until],
                    )
                    .await?;
                for row in rows {
                    let (m, q, d): (i64, i64, i64) =
                        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                    let slot = picked
                        .iter()
                        .position(|p| as_i64(p.message.id) == m && p.queue_id == q)
                        .and_then(|i| delivery_ids.get_mut(i))
                        .ok_or_else(|| bad_data("lease of a row not picked"))?;
                    *slot = u64::try_from(d).map_err(|_| bad_data("delivery id"))?;
                }
            }
        }
        tx.commit().await?;
        Ok(picked
            .into_iter()
            .zip(delivery_ids)
            .map(|(p, delivery_id)| Delivery {
                delivery_id,
                message: p.message,
            })
            .collect())
    }
}

/// Reinterprets an unsigned id or time as PostgreSQL's signed bigint (and back with `as u64`).
pub fn as_i64(v: u64) -> i64 {
    v as i64
}

fn picked(row: &Row) -> Result<Picked, TxError> {
    let id: i64 = row.try_get(0)?;
    let priority: i16 = row.try_get(5)?;
    let context: i64 = row.try_get(6)?;
    let created_at: i64 = row.try_get(7)?;
    let properties: String = row.try_get(8)?;
    let body: Vec<u8> = row.try_get(9)?;
    let count: i32 = row.try_get(10)?;
    Ok(Picked {
        queue_id: row.try_get(1)?,
        message: Message {
            id: u64::try_from(id).map_err(|_| bad_data("message id"))?,
            queue: row.try_get(2)?,
            sender: row.try_get(3)?,
            receiver: row.try_get(4)?,
            priority: u8::try_from(priority).map_err(|_| bad_data("priority"))?,
            context: context as u64,
            properties: props::decode(&properties)?,
            body: Bytes::from(body),
            created_at: created_at as u64,
            delivery_count: u32::try_from(count).map_err(|_| bad_data("delivery count"))?,
        },
    })
}
