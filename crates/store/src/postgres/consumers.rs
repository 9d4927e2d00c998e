//! Consumers of topic subscriptions across the nodes: one row of `subscription_consumers` per
//! (subscription, node, session), so that a subscription that is not shared has one consuming
//! session among all the nodes, and a shared non-durable one lives while it has consumers.
//! Attaching and detaching are part of the topics role (`topics`); what every path that
//! removes consumers shares is here.

use super::topics::{drop_subscriptions, Tx};
use super::tx::{first_column, TxResult};

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
