//! The queues role on PostgreSQL: create, delete and list queues, the queues waiting for a
//! client; sends and acks handed to the batcher, receives to `receive`, `gather` and `select`.

use async_trait::async_trait;
use ferry_protocol::{AckMode, Delivery, DeliveryId, MessageId, QueueInfo, ReceiveMode};

use super::batch::{Done, Work};
use super::gather;
use super::inner::Inner;
use super::names;
use super::store::PostgresStore;
use super::tx::{drop_orphans, retrying, TxResult};
use crate::api::{NewMessage, Queues, ReceiveSpec, SessionId};
use crate::error::StoreError;

impl PostgresStore {
    async fn settle_by_removal(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        match self
            .batcher
            .submit(Work::Ack(session, ids.to_vec()))
            .await?
        {
            Done::Ack(r) => r,
            Done::Send(_) => Err(StoreError::Internal("batcher answered out of kind".into())),
        }
    }
}

#[async_trait]
impl Queues for PostgresStore {
    /// Creates a queue.
    async fn create_queue_with(
        &self,
        name: &str,
        options: &ferry_protocol::QueueOptions,
    ) -> Result<(), StoreError> {
        names::check("queue", name)?;
        for (what, other) in [
            ("dead-letter", &options.dead_letter_queue),
            ("expiry", &options.expiry_queue),
        ] {
            if other.as_deref() == Some(name) {
                return Err(StoreError::InvalidArgument(format!(
                    "queue '{name}' cannot be its own {what} queue"
                )));
            }
        }
        let max = i32::try_from(options.max_deliveries).unwrap_or(i32::MAX);
        retrying(|| async {
            let mut conn = self.inner.conn().await?;
            let tx = conn.transaction().await?;
            let lookup = tx
                .prepare_cached("SELECT id FROM queues WHERE name = $1 FOR KEY SHARE")
                .await?;
            let mut ids: Vec<Option<i64>> = Vec::new();
            for other in [&options.dead_letter_queue, &options.expiry_queue] {
                ids.push(match other {
                    None => None,
                    Some(d) => match tx.query_opt(&lookup, &[d]).await? {
                        Some(row) => Some(row.try_get(0)?),
                        None => return Err(StoreError::QueueNotFound(d.clone()).into()),
                    },
                });
            }
            let (dlq, expiry) = (
                ids.first().copied().flatten(),
                ids.get(1).copied().flatten(),
            );
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO queues (name, max_deliveries, dead_letter_queue_id, \
                       expiry_queue_id) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
                )
                .await?;
            if tx.execute(&stmt, &[&name, &max, &dlq, &expiry]).await? == 0 {
                return Err(StoreError::QueueExists(name.to_owned()).into());
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Deletes a queue (see [`crate::Queues::delete_queue`]).
    async fn delete_queue(&self, name: &str, force: bool) -> Result<(), StoreError> {
        retrying(|| self.inner.try_delete_queue(name, force)).await
    }

    /// Every queue with its depth, sorted by name (bytewise, as Rust sorts); subscriptions'
    /// queues are listed with their topics instead.
    async fn list_queues(&self) -> Result<Vec<QueueInfo>, StoreError> {
        retrying(|| async {
            let conn = self.inner.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "SELECT q.name, coalesce(r.n, 0), coalesce(l.n, 0) FROM queues q \
                     LEFT JOIN (SELECT queue_id, count(*) AS n FROM message_queue \
                       WHERE lease_delivery_id IS NULL GROUP BY queue_id) r ON r.queue_id = q.id \
                     LEFT JOIN (SELECT queue_id, count(*) AS n FROM message_queue \
                       WHERE lease_delivery_id IS NOT NULL GROUP BY queue_id) l \
                       ON l.queue_id = q.id \
                     WHERE q.topic_id IS NULL",
                )
                .await?;
            let mut out = Vec::new();
            for row in conn.query(&stmt, &[]).await? {
                let (ready, in_flight): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
                out.push(QueueInfo {
                    name: row.try_get(0)?,
                    ready: u64::try_from(ready).unwrap_or(0),
                    in_flight: u64::try_from(in_flight).unwrap_or(0),
                });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
    }

    async fn count_queues(&self) -> Result<usize, StoreError> {
        retrying(|| async {
            let conn = self.inner.conn().await?;
            let stmt = conn
                .prepare_cached("SELECT count(*) FROM queues WHERE topic_id IS NULL")
                .await?;
            let n: i64 = conn.query_one(&stmt, &[]).await?.try_get(0)?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn queue_exists(&self, name: &str) -> Result<bool, StoreError> {
        retrying(|| async {
            let conn = self.inner.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM queues WHERE name = $1 AND topic_id IS NULL)",
                )
                .await?;
            Ok(conn.query_one(&stmt, &[&name]).await?.try_get(0)?)
        })
        .await
    }

    async fn send(&self, msg: NewMessage) -> Result<MessageId, StoreError> {
        let mut results = self.send_batch(vec![msg]).await;
        results
            .pop()
            .unwrap_or_else(|| Err(StoreError::Internal("a send got no result".into())))
    }

    async fn send_batch(&self, msgs: Vec<NewMessage>) -> Vec<Result<MessageId, StoreError>> {
        if msgs.is_empty() {
            return Vec::new();
        }
        let n = msgs.len();
        match self.batcher.submit(Work::Send(msgs)).await {
            Ok(Done::Send(results)) => results,
            Ok(Done::Ack(_)) => {
                vec![Err(StoreError::Internal("batcher answered out of kind".into())); n]
            }
            Err(e) => vec![Err(e); n],
        }
    }

    async fn receive(&self, spec: &ReceiveSpec, max: usize) -> Result<Vec<Delivery>, StoreError> {
        if spec.selector.is_some() {
            // Evaluated in Rust, one receive at a time: not gathered with others (`select`).
            return self.inner.receive_selected(spec, max).await;
        }
        match (spec.mode, spec.ack) {
            (ReceiveMode::Take, AckMode::Client) => {
                gather::receive(&self.inner, &self.gathers, spec, max).await
            }
            _ => self.inner.receive(spec, max).await,
        }
    }

    async fn ack(&self, session: SessionId, ids: &[DeliveryId]) -> Result<(), StoreError> {
        self.settle_by_removal(session, ids).await
    }

    async fn nack(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        if requeue {
            self.inner.requeue(session, ids).await
        } else {
            self.settle_by_removal(session, ids)
                .await
                .map(|()| Vec::new())
        }
    }

    /// Queues holding ready messages addressed to `client` (delayed ones once due at
    /// `now_ms`), sorted; subscriptions' queues are not among them.
    async fn waiting_queues(&self, client: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        retrying(|| async {
            let conn = self.inner.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "SELECT DISTINCT q.name FROM clients c \
                     JOIN message_queue mq ON mq.receiver_id = c.id \
                       AND mq.lease_delivery_id IS NULL AND mq.deliver_at <= $2 \
                     JOIN queues q ON q.id = mq.queue_id AND q.topic_id IS NULL \
                     WHERE c.name = $1",
                )
                .await?;
            let mut out = Vec::new();
            for row in conn.query(&stmt, &[&client, &now]).await? {
                out.push(row.try_get::<_, String>(0)?);
            }
            out.sort();
            Ok(out)
        })
        .await
    }
}

impl Inner {
    async fn try_delete_queue(&self, name: &str, force: bool) -> TxResult<()> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // The row lock keeps concurrent sends (whose foreign keys lock it too) out until commit.
        let stmt = tx
            .prepare_cached("SELECT id FROM queues WHERE name = $1 AND topic_id IS NULL FOR UPDATE")
            .await?;
        // A subscription's queue goes with its subscription (unsubscribe), not on its own.
        let Some(row) = tx.query_opt(&stmt, &[&name]).await? else {
            return Err(StoreError::QueueNotFound(name.to_owned()).into());
        };
        let qid: i64 = row.try_get(0)?;
        if !force {
            let users = tx
                .prepare_cached(
                    "SELECT name, dead_letter_queue_id = $1 FROM queues \
                     WHERE dead_letter_queue_id = $1 OR expiry_queue_id = $1 \
                     ORDER BY name LIMIT 1",
                )
                .await?;
            if let Some(row) = tx.query_opt(&users, &[&qid]).await? {
                let dead_letter: bool = row.try_get(1)?;
                return Err(StoreError::QueueInUse {
                    name: name.to_owned(),
                    role: if dead_letter { "dead-letter" } else { "expiry" },
                    used_by: row.try_get(0)?,
                }
                .into());
            }
            let stmt = tx
                .prepare_cached(
                    "SELECT (SELECT count(*) FROM message_queue \
                       WHERE queue_id = $1 AND lease_delivery_id IS NULL) \
                     + (SELECT count(*) FROM message_queue \
                       WHERE queue_id = $1 AND lease_delivery_id IS NOT NULL)",
                )
                .await?;
            let depth: i64 = tx.query_one(&stmt, &[&qid]).await?.try_get(0)?;
            if depth > 0 {
                return Err(StoreError::QueueNotEmpty {
                    name: name.to_owned(),
                    depth: u64::try_from(depth).unwrap_or(0),
                }
                .into());
            }
        }
        let stmt = tx
            .prepare_cached(
                // Ready and leased rows apart, so that each part uses its index.
                "WITH r AS (DELETE FROM message_queue \
                   WHERE queue_id = $1 AND lease_delivery_id IS NULL RETURNING message_id), \
                 l AS (DELETE FROM message_queue \
                   WHERE queue_id = $1 AND lease_delivery_id IS NOT NULL RETURNING message_id) \
                 SELECT message_id FROM r UNION ALL SELECT message_id FROM l",
            )
            .await?;
        let mut ids = Vec::new();
        for row in tx.query(&stmt, &[&qid]).await? {
            ids.push(row.try_get::<_, i64>(0)?);
        }
        ids.sort_unstable();
        drop_orphans(&tx, &ids).await?;
        let stmt = tx
            .prepare_cached(
                "WITH c AS (DELETE FROM queue_counters WHERE queue_id = $1) \
                 DELETE FROM queues WHERE id = $1",
            )
            .await?;
        tx.execute(&stmt, &[&qid]).await?;
        tx.commit().await?;
        Ok(())
    }
}
