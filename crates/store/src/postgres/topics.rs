//! Topics and subscriptions (the topics role): create, delete, list, subscribe, unsubscribe,
//! attach and detach consumers, and dropping the non-durable subscriptions of clients whose
//! sessions ended without unsubscribing.
//!
//! Consumers of topic subscriptions across the nodes: one row of `subscription_consumers` per
//! (subscription, node, session), so that a subscription that is not shared has one consuming
//! session among all the nodes, and a shared non-durable one lives while it has consumers.
//!
//! A subscription is a row of `subscriptions` plus its queue, a row of `queues` named
//! `topic:name` and marked with the topic's id. Statements that change the set of a topic's
//! subscriptions lock the topic row `FOR KEY SHARE` (subscribe, unsubscribe) or `FOR UPDATE`
//! (deleting the topic), so a topic is never deleted while a subscription is being made on it.
//! Removing a subscription locks its row `FOR UPDATE`, which waits for the publishes that read
//! it (see `publish`).
//!
//! A pattern of wildcard subscriptions is a `topics` row with `is_pattern` set: a subscribe
//! makes it if it is missing (and tries again should it vanish before it is locked), and the
//! statements that drop subscriptions remove the patterns they leave without any, unless
//! another transaction holds the row (then it stays, empty: unlisted, and reused by the next
//! subscription on it).

use async_trait::async_trait;
use ferry_protocol::topic::{check_pattern, is_pattern};
use ferry_protocol::{subscription_queue, SubscriptionInfo, SubscriptionOptions, TopicInfo};

use super::inner::Inner;
use super::names;
use super::receive::as_i64;
use super::tx::{drop_orphans, first_column, retrying, TxError, TxResult};
use crate::api::{SessionId, Topics};
use crate::error::StoreError;

pub(super) type Tx<'a> = deadpool_postgres::Transaction<'a>;

#[async_trait]
impl Topics for Inner {
    async fn create_topic(&self, name: &str) -> Result<(), StoreError> {
        names::check("topic", name)?;
        not_a_pattern("a topic to create", name)?;
        retrying(|| async {
            let conn = self.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "INSERT INTO topics (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
                )
                .await?;
            if conn.execute(&stmt, &[&name]).await? == 0 {
                return Err(StoreError::TopicExists(name.to_owned()).into());
            }
            Ok(())
        })
        .await
    }

    async fn delete_topic(&self, name: &str, force: bool) -> Result<(), StoreError> {
        not_a_pattern("a topic to delete", name)?;
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "SELECT id FROM topics WHERE name = $1 AND NOT is_pattern FOR UPDATE",
                )
                .await?;
            let Some(row) = tx.query_opt(&stmt, &[&name]).await? else {
                return Err(StoreError::TopicNotFound(name.to_owned()).into());
            };
            let topic: i64 = row.try_get(0)?;
            let stmt = tx
                .prepare_cached(
                    "SELECT queue_id FROM subscriptions WHERE topic_id = $1 \
                     ORDER BY queue_id FOR UPDATE",
                )
                .await?;
            let queues = first_column::<i64>(&tx.query(&stmt, &[&topic]).await?)?;
            if !force {
                let depth = depth(&tx, &queues).await?;
                if depth > 0 {
                    return Err(StoreError::TopicNotEmpty {
                        name: name.to_owned(),
                        depth,
                    }
                    .into());
                }
            }
            drop_subscriptions(&tx, &queues).await?;
            let stmt = tx
                .prepare_cached("DELETE FROM topics WHERE id = $1")
                .await?;
            tx.execute(&stmt, &[&topic]).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            // Ready and leased rows counted apart, so that each count uses its index.
            let stmt = conn
                .prepare_cached(
                    "SELECT t.name, s.name, s.durable, s.shared, s.selector, \
                       (SELECT count(*) FROM message_queue mq \
                         WHERE mq.queue_id = s.queue_id AND mq.lease_delivery_id IS NULL), \
                       (SELECT count(*) FROM message_queue mq \
                         WHERE mq.queue_id = s.queue_id AND mq.lease_delivery_id IS NOT NULL) \
                     FROM topics t LEFT JOIN subscriptions s ON s.topic_id = t.id \
                     WHERE NOT t.is_pattern OR s.name IS NOT NULL",
                )
                .await?;
            let mut out: Vec<TopicInfo> = Vec::new();
            for row in conn.query(&stmt, &[]).await? {
                let topic: String = row.try_get(0)?;
                let index = match out.iter().position(|t| t.name == topic) {
                    Some(i) => i,
                    None => {
                        out.push(TopicInfo {
                            name: topic,
                            subscriptions: Vec::new(),
                        });
                        out.len() - 1
                    }
                };
                let Some(name) = row.try_get::<_, Option<String>>(1)? else {
                    continue;
                };
                let ready: Option<i64> = row.try_get(5)?;
                let in_flight: Option<i64> = row.try_get(6)?;
                let info = SubscriptionInfo {
                    name,
                    durable: row.try_get(2)?,
                    shared: row.try_get(3)?,
                    selector: row.try_get(4)?,
                    ready: u64::try_from(ready.unwrap_or(0)).unwrap_or(0),
                    in_flight: u64::try_from(in_flight.unwrap_or(0)).unwrap_or(0),
                };
                if let Some(t) = out.get_mut(index) {
                    t.subscriptions.push(info);
                }
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            for t in &mut out {
                t.subscriptions.sort_by(|a, b| a.name.cmp(&b.name));
            }
            Ok(out)
        })
        .await
    }

    async fn subscribe_topic(
        &self,
        topic: &str,
        name: &str,
        options: &SubscriptionOptions,
        owner: &str,
    ) -> Result<String, StoreError> {
        names::check("topic", topic)?;
        names::check("subscription", name)?;
        if is_pattern(topic) {
            check_pattern(topic, u16::MAX).map_err(|e| {
                StoreError::InvalidArgument(format!("invalid topic pattern '{topic}': {e}"))
            })?;
        }
        // Parsed here so that a bad selector fails now, not at every publish.
        self.selectors.get(&options.selector)?;
        let queue = subscription_queue(topic, name);
        retrying(|| self.try_subscribe(topic, name, &queue, options, owner)).await?;
        Ok(queue)
    }

    async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let Some(queue_id) = lock_subscription(&tx, topic, name, RowLock::Update).await? else {
                return Err(
                    StoreError::SubscriptionNotFound(subscription_queue(topic, name)).into(),
                );
            };
            let stmt = tx
                .prepare_cached("SELECT 1 FROM subscription_consumers WHERE queue_id = $1 LIMIT 1")
                .await?;
            if tx.query_opt(&stmt, &[&queue_id]).await?.is_some() {
                return Err(StoreError::SubscriptionInUse(subscription_queue(topic, name)).into());
            }
            drop_subscriptions(&tx, &[queue_id]).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn attach_consumer(
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

    async fn detach_consumer(
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

impl Inner {
    async fn try_subscribe(
        &self,
        topic: &str,
        name: &str,
        queue: &str,
        options: &SubscriptionOptions,
        owner: &str,
    ) -> TxResult<()> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let topic_id = if is_pattern(topic) {
            ensure_pattern(&tx, topic).await?
        } else {
            lock_topic(&tx, topic).await?
        };
        let stmt = tx
            .prepare_cached(
                "SELECT queue_id, durable, shared, selector FROM subscriptions \
                 WHERE topic_id = $1 AND name = $2 FOR UPDATE",
            )
            .await?;
        if let Some(row) = tx.query_opt(&stmt, &[&topic_id, &name]).await? {
            let queue_id: i64 = row.try_get(0)?;
            let durable: bool = row.try_get(1)?;
            let shared: bool = row.try_get(2)?;
            let selector: String = row.try_get(3)?;
            if !durable && !options.durable && !shared && !options.shared {
                // A non-durable name left over from an earlier session: start afresh. (A
                // shared one is attached to: it lives while it has consumers.)
                drop_subscriptions(&tx, &[queue_id]).await?;
            } else {
                let differs = if durable != options.durable {
                    Some(format!("durable is {durable}"))
                } else if shared != options.shared {
                    Some(format!("shared is {shared}"))
                } else if selector != options.selector {
                    Some(format!("its selector is '{selector}'"))
                } else {
                    None
                };
                return match differs {
                    Some(d) => Err(StoreError::InvalidArgument(format!(
                        "subscription '{queue}' exists and differs: {d}"
                    ))
                    .into()),
                    None => {
                        tx.commit().await?;
                        Ok(())
                    }
                };
            }
        }
        let lookup = tx
            .prepare_cached("SELECT id FROM queues WHERE name = $1 FOR KEY SHARE")
            .await?;
        let mut targets: [Option<i64>; 2] = [None, None];
        for (slot, other) in targets.iter_mut().zip([
            &options.queue.dead_letter_queue,
            &options.queue.expiry_queue,
        ]) {
            if let Some(d) = other {
                match tx.query_opt(&lookup, &[d]).await? {
                    Some(row) => *slot = Some(row.try_get(0)?),
                    None => return Err(StoreError::QueueNotFound(d.clone()).into()),
                }
            }
        }
        let [dead_letter, expiry] = targets;
        let max = i32::try_from(options.queue.max_deliveries).unwrap_or(i32::MAX);
        let stmt = tx
            .prepare_cached(
                "INSERT INTO queues (name, max_deliveries, dead_letter_queue_id, \
                   expiry_queue_id, topic_id) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING id",
            )
            .await?;
        let Some(row) = tx
            .query_opt(&stmt, &[&queue, &max, &dead_letter, &expiry, &topic_id])
            .await?
        else {
            return Err(StoreError::InvalidArgument(format!(
                "a queue named '{queue}' exists and is not a subscription's"
            ))
            .into());
        };
        let queue_id: i64 = row.try_get(0)?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO subscriptions (topic_id, name, queue_id, durable, shared, selector, \
                   owner) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .await?;
        tx.execute(
            &stmt,
            &[
                &topic_id,
                &name,
                &queue_id,
                &options.durable,
                &options.shared,
                &options.selector,
                &owner,
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// How [`lock_subscription`] locks a subscription's row.
#[derive(Debug, Clone, Copy)]
pub(super) enum RowLock {
    /// For removing it (or maybe removing it): waits for, and holds off, everything but reads.
    Update,
    /// For attaching a consumer: attaches wait for each other, publishes (which lock the row
    /// `FOR KEY SHARE`) go on.
    NoKeyUpdate,
}

/// The queue id of subscription `name` of `topic`, its row locked as `lock` says (and the topic
/// `FOR KEY SHARE`); `None` when there is no such subscription, `TopicNotFound` for the topic
/// (a pattern without subscriptions is no missing topic: `None`).
pub(super) async fn lock_subscription(
    tx: &Tx<'_>,
    topic: &str,
    name: &str,
    lock: RowLock,
) -> TxResult<Option<i64>> {
    let topic_id = match lock_topic(tx, topic).await {
        Ok(id) => id,
        Err(TxError::Store(StoreError::TopicNotFound(_))) if is_pattern(topic) => return Ok(None),
        Err(e) => return Err(e),
    };
    let stmt = tx
        .prepare_cached(match lock {
            RowLock::Update => {
                "SELECT queue_id FROM subscriptions WHERE topic_id = $1 AND name = $2 FOR UPDATE"
            }
            RowLock::NoKeyUpdate => {
                "SELECT queue_id FROM subscriptions WHERE topic_id = $1 AND name = $2 \
                 FOR NO KEY UPDATE"
            }
        })
        .await?;
    match tx.query_opt(&stmt, &[&topic_id, &name]).await? {
        Some(row) => Ok(Some(row.try_get(0)?)),
        None => Ok(None),
    }
}

/// `InvalidArgument` for a pattern where a topic name is needed.
fn not_a_pattern(what: &str, name: &str) -> Result<(), StoreError> {
    if is_pattern(name) {
        return Err(StoreError::InvalidArgument(format!(
            "'{name}' is a pattern: only subscriptions may name one, not {what}"
        )));
    }
    Ok(())
}

/// The id of pattern `pattern`'s row, made if missing, locked `FOR KEY SHARE` (so that it is
/// not removed as empty before the subscription being made on it commits).
async fn ensure_pattern(tx: &Tx<'_>, pattern: &str) -> TxResult<i64> {
    let insert = tx
        .prepare_cached(
            "INSERT INTO topics (name, is_pattern) VALUES ($1, true) \
             ON CONFLICT (name) DO NOTHING",
        )
        .await?;
    // The row found by the insert may be removed (as empty) before it is locked; the next
    // insert then makes it anew. Each try waits for that removal to commit, so two suffice
    // unless removals keep coming.
    for _ in 0..5 {
        tx.execute(&insert, &[&pattern]).await?;
        match lock_topic(tx, pattern).await {
            Ok(id) => return Ok(id),
            Err(TxError::Store(StoreError::TopicNotFound(_))) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Unavailable(format!(
        "pattern '{pattern}' kept being removed while subscribing to it; try again"
    ))
    .into())
}

/// Removes those of the patterns `topic_ids` (ids of `topics` rows; others are ignored) that
/// have no subscriptions left, as seen after locking them. A pattern row that another
/// transaction holds (a subscribe on it, or another drop) is skipped, not waited for: two
/// transactions dropping subscriptions of one pattern would otherwise deadlock. One skipped
/// that ends up empty stays, unlisted, until a later drop on it removes it.
async fn drop_empty_patterns(tx: &Tx<'_>, topic_ids: &[i64]) -> TxResult<()> {
    if topic_ids.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(
            "SELECT id FROM topics WHERE id = ANY($1) AND is_pattern \
             ORDER BY id FOR UPDATE SKIP LOCKED",
        )
        .await?;
    let locked = first_column::<i64>(&tx.query(&stmt, &[&topic_ids]).await?)?;
    if locked.is_empty() {
        return Ok(());
    }
    // A statement of its own, so that its snapshot, taken after the locks, sees every
    // subscription committed on them.
    let stmt = tx
        .prepare_cached(
            "DELETE FROM topics t WHERE t.id = ANY($1) \
             AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.topic_id = t.id)",
        )
        .await?;
    tx.execute(&stmt, &[&locked]).await?;
    Ok(())
}

/// The id of `topic`, locked `FOR KEY SHARE` (it cannot be deleted until `tx` ends), or
/// `TopicNotFound`.
pub(super) async fn lock_topic(tx: &Tx<'_>, topic: &str) -> TxResult<i64> {
    let stmt = tx
        .prepare_cached("SELECT id FROM topics WHERE name = $1 FOR KEY SHARE")
        .await?;
    match tx.query_opt(&stmt, &[&topic]).await? {
        Some(row) => Ok(row.try_get(0)?),
        None => Err(StoreError::TopicNotFound(topic.to_owned()).into()),
    }
}

/// Ready plus in-flight messages on the queues `queue_ids`.
async fn depth(tx: &Tx<'_>, queue_ids: &[i64]) -> TxResult<u64> {
    if queue_ids.is_empty() {
        return Ok(0);
    }
    let stmt = tx
        .prepare_cached(
            "SELECT (SELECT count(*) FROM message_queue \
               WHERE queue_id = ANY($1) AND lease_delivery_id IS NULL) \
             + (SELECT count(*) FROM message_queue \
               WHERE queue_id = ANY($1) AND lease_delivery_id IS NOT NULL)",
        )
        .await?;
    let n: i64 = tx.query_one(&stmt, &[&queue_ids]).await?.try_get(0)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Removes the subscriptions whose queues are `queue_ids` (locked by the caller), with their
/// queues and messages (in-flight deliveries of them become unknown).
pub async fn drop_subscriptions(tx: &Tx<'_>, queue_ids: &[i64]) -> TxResult<()> {
    if queue_ids.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(
            // Ready and leased rows apart, so that each part uses its index.
            "WITH r AS (DELETE FROM message_queue \
               WHERE queue_id = ANY($1) AND lease_delivery_id IS NULL RETURNING message_id), \
             l AS (DELETE FROM message_queue \
               WHERE queue_id = ANY($1) AND lease_delivery_id IS NOT NULL RETURNING message_id) \
             SELECT message_id FROM r UNION ALL SELECT message_id FROM l",
        )
        .await?;
    let mut ids = Vec::new();
    for row in tx.query(&stmt, &[&queue_ids]).await? {
        ids.push(row.try_get::<_, i64>(0)?);
    }
    ids.sort_unstable();
    ids.dedup();
    drop_orphans(tx, &ids).await?;
    let stmt = tx
        .prepare_cached(
            "WITH s AS (DELETE FROM subscriptions WHERE queue_id = ANY($1) RETURNING topic_id), \
             c AS (DELETE FROM subscription_consumers WHERE queue_id = ANY($1)), \
             f AS (DELETE FROM queue_counters WHERE queue_id = ANY($1)), \
             q AS (DELETE FROM queues WHERE id = ANY($1)) \
             SELECT DISTINCT topic_id FROM s",
        )
        .await?;
    let topics = first_column::<i64>(&tx.query(&stmt, &[&queue_ids]).await?)?;
    drop_empty_patterns(tx, &topics).await
}

/// Drops the non-durable subscriptions `clients` made: those that are not shared, and shared
/// ones that nobody consumes (made, and never consumed before their maker's end).
pub async fn drop_owned(tx: &Tx<'_>, clients: &[String]) -> TxResult<()> {
    if clients.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(
            "SELECT s.queue_id FROM subscriptions s WHERE NOT s.durable AND s.owner = ANY($1) \
               AND (NOT s.shared OR NOT EXISTS (SELECT 1 FROM subscription_consumers c \
                                                WHERE c.queue_id = s.queue_id)) \
             ORDER BY s.queue_id FOR UPDATE OF s",
        )
        .await?;
    let queues = first_column::<i64>(&tx.query(&stmt, &[&clients]).await?)?;
    if !queues.is_empty() {
        tracing::info!(
            clients = ?clients,
            subscriptions = queues.len(),
            "dropping the non-durable subscriptions of sessions that ended"
        );
    }
    drop_subscriptions(tx, &queues).await
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
