//! Consumers of topic subscriptions across the nodes: one row of `subscription_consumers` per
//! (subscription, node, session), so that a subscription that is not shared has one consuming
//! session among all the nodes, and a shared non-durable one lives while it has consumers.

use ferry_protocol::subscription_queue;

use super::inner::Inner;
use super::receive::as_i64;
use super::topics::{drop_subscriptions, lock_subscription, RowLock, Tx};
use super::tx::{first_column, retrying, TxError, TxResult};
use crate::api::SessionId;
use crate::error::StoreError;

impl Inner {
    /// See [`crate::Topics::attach_consumer`].
    pub async fn attach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
        shared: bool,
    ) -> Result<(), StoreError> {
        let session = as_i64(session);
        let queue = subscription_queue(topic, name);
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            // Serialises the attaches of one subscription across nodes; publishes are not
            // held up.
            let Some(queue_id) =
                lock_subscription(&tx, topic, name, RowLock::NoKeyUpdate).await?
            else {
                return Err(StoreError::SubscriptionNotFound(queue.clone()).into());
            };
            let stmt = tx
                .prepare_cached(
                    "SELECT bool_and(shared) FROM subscription_consumers WHERE queue_id = $1",
                )
                .await?;
            let all_shared: Option<bool> = tx.query_one(&stmt, &[&queue_id]).await?.try_get(0)?;
            if all_shared.is_some_and(|all| !(all && shared)) {
                return Err(StoreError::SubscriptionInUse(queue.clone()).into());
            }
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO subscription_consumers (queue_id, node, session, shared, consumers) \
                     VALUES ($1, $2, $3, $4, 1) ON CONFLICT (queue_id, node, session) \
                     DO UPDATE SET consumers = subscription_consumers.consumers + 1",
                )
                .await?;
            tx.execute(&stmt, &[&queue_id, &self.node, &session, &shared])
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// See [`crate::Topics::detach_consumer`].
    pub async fn detach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
    ) -> Result<(), StoreError> {
        let session = as_i64(session);
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            // Locked first, as attaches do, so that a shared non-durable subscription losing
            // its last consumer here cannot lose one attaching on another node meanwhile.
            let queue_id = match lock_subscription(&tx, topic, name, RowLock::Update).await {
                Ok(Some(id)) => id,
                // Gone already (or its topic), and its consumers with it.
                Ok(None) | Err(TxError::Store(StoreError::TopicNotFound(_))) => return Ok(()),
                Err(e) => return Err(e),
            };
            let stmt = tx
                .prepare_cached(
                    "UPDATE subscription_consumers SET consumers = consumers - 1 \
                     WHERE queue_id = $1 AND node = $2 AND session = $3 RETURNING consumers",
                )
                .await?;
            if let Some(row) = tx
                .query_opt(&stmt, &[&queue_id, &self.node, &session])
                .await?
            {
                let left: i32 = row.try_get(0)?;
                if left <= 0 {
                    let stmt = tx
                        .prepare_cached(
                            "DELETE FROM subscription_consumers \
                             WHERE queue_id = $1 AND node = $2 AND session = $3",
                        )
                        .await?;
                    tx.execute(&stmt, &[&queue_id, &self.node, &session])
                        .await?;
                }
            }
            drop_unconsumed_shared(&tx, &[queue_id]).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// Drops those of `queue_ids` that are shared non-durable subscriptions nobody consumes any
/// more: such a subscription lives as long as it has consumers.
pub async fn drop_unconsumed_shared(tx: &Tx<'_>, queue_ids: &[i64]) -> TxResult<()> {
    if queue_ids.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(
            "SELECT s.queue_id FROM subscriptions s \
             WHERE s.queue_id = ANY($1) AND NOT s.durable AND s.shared \
               AND NOT EXISTS (SELECT 1 FROM subscription_consumers c \
                               WHERE c.queue_id = s.queue_id) \
             ORDER BY s.queue_id FOR UPDATE OF s",
        )
        .await?;
    let queues = first_column::<i64>(&tx.query(&stmt, &[&queue_ids]).await?)?;
    drop_subscriptions(tx, &queues).await
}
