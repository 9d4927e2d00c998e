//! One batch of sends and acks in one transaction: multi-row statements over `unnest` arrays.
//!
//! Each message is checked on its own (queues exist, receiver known, ...) and only the good
//! ones are written, so one bad message does not fail the others. Message ids come from the
//! `message_ids` sequence, sorted so that they increase in the order the batch lists them.
//! The queues that got messages are announced to the other nodes in the same transaction.
//!
//! A publish goes on the queues of its topic's subscriptions whose selectors select it (see
//! `publish`); when none does, it gets an id and is stored nowhere. A batch of non-persistent
//! messages only (and no acks) commits without waiting for the WAL flush. The parts that store
//! messages and remove acked rows serve transactions (`commit`) too.

use std::collections::HashMap;

use deadpool_postgres::Transaction;
use ferry_protocol::{DeliveryId, MessageId, MAX_PRIORITY, MIN_PRIORITY};

use super::inner::Inner;
use super::names;
use super::notify::notify;
use super::props;
use super::publish::{subscribers, Subscriber};
use super::receive::{as_i64, time_as_i64};
use super::settle::{unknown_ids, LEASED_ROWS};
use super::tally::Tally;
use super::tx::{drop_orphans, TxResult};
use crate::api::{NewMessage, SessionId};
use crate::error::StoreError;

/// What a batch asks for.
#[derive(Debug)]
pub enum Work {
    /// Messages to store (one `send` or one `send_batch`).
    Send(Vec<NewMessage>),
    /// Deliveries to settle by removing them (ack, or nack without requeue).
    Ack(SessionId, Vec<DeliveryId>),
}

/// What a batch did, per item of [`Work`].
#[derive(Debug)]
pub enum Done {
    /// One result per message.
    Send(Vec<Result<MessageId, StoreError>>),
    /// The ack's outcome.
    Ack(Result<(), StoreError>),
}

impl Work {
    /// Messages or ids in this item (what `batch_max` counts).
    pub fn size(&self) -> usize {
        match self {
            Work::Send(m) => m.len(),
            Work::Ack(_, ids) => ids.len(),
        }
        .max(1)
    }
}

/// Checks a message that needs nothing from the database.
fn check_alone(m: &NewMessage) -> Result<(), StoreError> {
    match &m.topic {
        Some(_) if !m.queues.is_empty() => {
            return Err(StoreError::InvalidArgument(
                "a message is either sent to queues or published to a topic".into(),
            ))
        }
        Some(t) if ferry_protocol::topic::is_pattern(t) => {
            return Err(StoreError::InvalidArgument(format!(
                "'{t}' is a pattern: only subscriptions may name one, not a topic to publish to"
            )))
        }
        Some(_) => {}
        None if m.queues.is_empty() => {
            return Err(StoreError::InvalidArgument(
                "a message needs at least one queue".into(),
            ))
        }
        None => {}
    }
    if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&m.priority) {
        return Err(StoreError::InvalidArgument(format!(
            "priority {} is outside {MIN_PRIORITY}..={MAX_PRIORITY}",
            m.priority
        )));
    }
    Ok(())
}

/// The columns of the good messages that are stored somewhere, as arrays for `unnest`.
#[derive(Default)]
struct Columns<'a> {
    sender: Vec<i64>,
    receiver: Vec<Option<i64>>,
    priority: Vec<i16>,
    context: Vec<i64>,
    created_at: Vec<i64>,
    deliver_at: Vec<i64>,
    expires_at: Vec<i64>,
    properties: Vec<String>,
    body: Vec<&'a [u8]>,
    /// Queue ids of each message.
    queues: Vec<Vec<i64>>,
    /// Whether each row of `queues` is a subscription queue's (its rows get no sender).
    published: Vec<bool>,
}

/// What storing messages did within a transaction.
pub struct Stored {
    /// Per message: accepted, or why not.
    pub verdicts: Vec<Result<(), StoreError>>,
    /// The ids of the accepted messages, in order.
    pub ids: Vec<MessageId>,
}

/// Whether a transaction writing `msgs` (and settling nothing) may commit without waiting for
/// the WAL flush: every message is non-persistent.
pub fn all_transient(msgs: &[&NewMessage]) -> bool {
    !msgs.is_empty() && msgs.iter().all(|m| !m.persistent)
}

/// Lets `tx` commit without waiting for its WAL to reach the disk (non-persistent messages:
/// they may survive a crash or not).
pub async fn relax_commit(tx: &Transaction<'_>) -> TxResult<()> {
    tx.batch_execute("SET LOCAL synchronous_commit = off")
        .await?;
    Ok(())
}

impl Inner {
    /// Runs `work` in one transaction. An `Err` means the whole transaction failed.
    pub async fn run_batch(&self, work: &[Work]) -> TxResult<Vec<Done>> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let msgs: Vec<&NewMessage> = work
            .iter()
            .flat_map(|w| match w {
                Work::Send(m) => m.iter().collect(),
                Work::Ack(..) => Vec::new(),
            })
            .collect();
        let settles = work.iter().any(|w| matches!(w, Work::Ack(..)));
        let relax = !settles && all_transient(&msgs);
        let mut tally = Tally::default();
        let Stored { verdicts, ids } = self.store_relaxed(&tx, &msgs, relax, &mut tally).await?;

        // Acks: remove the leased rows held by each session.
        let mut ack_sessions = Vec::new();
        let mut ack_ids = Vec::new();
        for w in work {
            if let Work::Ack(session, ids) = w {
                for id in ids {
                    ack_sessions.push(as_i64(*session));
                    ack_ids.push(as_i64(*id));
                }
            }
        }
        let mut acked = self
            .remove_leased(&tx, &ack_sessions, &ack_ids, &mut tally)
            .await?;
        tx.commit().await?;
        self.count(tally);

        // Hand each item its results.
        let mut ids = ids.into_iter();
        let mut verdicts = verdicts.into_iter();
        let mut out = Vec::with_capacity(work.len());
        for w in work {
            match w {
                Work::Send(m) => {
                    let mut results = Vec::with_capacity(m.len());
                    for _ in m {
                        results.push(match verdicts.next() {
                            Some(Ok(())) => ids
                                .next()
                                .ok_or_else(|| StoreError::Internal("missing message id".into())),
                            Some(Err(e)) => Err(e),
                            None => Err(StoreError::Internal("missing verdict".into())),
                        });
                    }
                    out.push(Done::Send(results));
                }
                Work::Ack(session, asked) => {
                    let settled = acked.remove(&as_i64(*session)).unwrap_or_default();
                    let mine: Vec<DeliveryId> = settled
                        .iter()
                        .copied()
                        .filter(|s| asked.contains(s))
                        .collect();
                    // Put back what another ack of the same session in this batch asked for.
                    let rest: Vec<DeliveryId> =
                        settled.into_iter().filter(|s| !asked.contains(s)).collect();
                    if !rest.is_empty() {
                        acked.insert(as_i64(*session), rest);
                    }
                    let unknown = unknown_ids(asked, &mine);
                    out.push(Done::Ack(if unknown.is_empty() {
                        Ok(())
                    } else {
                        Err(StoreError::DeliveriesNotFound(unknown))
                    }));
                }
            }
        }
        Ok(out)
    }

    /// [`Inner::store_messages`], after letting `tx` commit without waiting for the WAL
    /// flush if `relax`. The setting is pipelined with the first statement that stores (both
    /// requests go out before either answer is awaited), so it costs no round trip of its own.
    pub async fn store_relaxed(
        &self,
        tx: &Transaction<'_>,
        msgs: &[&NewMessage],
        relax: bool,
        tally: &mut Tally,
    ) -> TxResult<Stored> {
        if !relax {
            return self.store_messages(tx, msgs, tally).await;
        }
        // `join!` polls the setting first, so its request is queued on the connection first.
        let (relaxed, stored) =
            tokio::join!(relax_commit(tx), self.store_messages(tx, msgs, tally));
        relaxed?;
        stored
    }

    /// Checks each of `msgs` on its own and stores the good ones within `tx` (a publish on the
    /// queues of its topic's matching subscriptions, or nowhere), announcing the queues that
    /// got messages. Registers the senders of the good ones. Counts the messages each queue got
    /// in `tally`.
    pub async fn store_messages(
        &self,
        tx: &Transaction<'_>,
        msgs: &[&NewMessage],
        tally: &mut Tally,
    ) -> TxResult<Stored> {
        if msgs.is_empty() {
            return Ok(Stored {
                verdicts: Vec::new(),
                ids: Vec::new(),
            });
        }
        // Names the messages use.
        let mut queue_names: Vec<&str> = msgs
            .iter()
            .flat_map(|m| m.queues.iter().map(String::as_str))
            .collect();
        queue_names.sort_unstable();
        queue_names.dedup();
        let mut queue_ids: HashMap<String, i64> = HashMap::new();
        if !queue_names.is_empty() {
            // KEY SHARE keeps a concurrent delete_queue out until this commits.
            let stmt = tx
                .prepare_cached(
                    "SELECT id, name FROM queues WHERE name = ANY($1) ORDER BY id FOR KEY SHARE",
                )
                .await?;
            for row in tx.query(&stmt, &[&queue_names]).await? {
                queue_ids.insert(row.try_get(1)?, row.try_get(0)?);
            }
        }
        let mut topic_names: Vec<&str> = msgs.iter().filter_map(|m| m.topic.as_deref()).collect();
        topic_names.sort_unstable();
        topic_names.dedup();
        let topics: HashMap<String, Vec<Subscriber>> = if topic_names.is_empty() {
            HashMap::new()
        } else {
            subscribers(tx, &self.selectors, &topic_names).await?
        };
        let mut receivers: Vec<&str> = msgs.iter().filter_map(|m| m.receiver.as_deref()).collect();
        receivers.sort_unstable();
        receivers.dedup();
        // Read and locked afresh: a cached id may belong to a name that expired since, and
        // the lock keeps the name from expiring before the message is stored.
        let receiver_ids = self.clients.lookup_fresh(tx, &receivers, true).await?;

        // Check each message; the good ones' senders get registered.
        let mut verdicts: Vec<Result<(), StoreError>> = Vec::with_capacity(msgs.len());
        for m in msgs {
            verdicts.push(check(m, &queue_ids, &topics, &receiver_ids));
        }
        let senders: Vec<&str> = msgs
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_ok())
            .map(|(m, _)| &*m.sender)
            .collect();
        let sender_ids = self.clients.ensure(tx, &senders).await?;

        let mut cols = Columns::default();
        let mut kept: Vec<bool> = Vec::with_capacity(msgs.len());
        let mut arrived: Vec<&str> = Vec::new();
        for (m, v) in msgs.iter().zip(&verdicts) {
            if v.is_err() {
                continue;
            }
            let queues: Vec<i64> = match &m.topic {
                Some(t) => {
                    let mut qs = Vec::new();
                    for s in topics.get(t.as_str()).into_iter().flatten() {
                        if s.wants(m) {
                            qs.push(s.queue_id);
                            arrived.push(&s.queue);
                        }
                    }
                    qs
                }
                None => {
                    arrived.extend(m.queues.iter().map(String::as_str));
                    m.queues
                        .iter()
                        .filter_map(|q| queue_ids.get(q).copied())
                        .collect()
                }
            };
            // A publish no subscription selects gets an id and is stored nowhere.
            kept.push(!queues.is_empty());
            if queues.is_empty() {
                continue;
            }
            let sender = *sender_ids
                .get(&*m.sender)
                .ok_or_else(|| StoreError::Internal("sender not registered".into()))?;
            cols.sender.push(sender);
            cols.receiver.push(
                m.receiver
                    .as_ref()
                    .and_then(|r| receiver_ids.get(r).copied()),
            );
            cols.priority.push(i16::from(m.priority));
            cols.context.push(m.context as i64);
            cols.created_at.push(as_i64(m.created_at));
            cols.deliver_at.push(time_as_i64(m.deliver_at_ms));
            cols.expires_at.push(time_as_i64(m.expires_at_ms));
            cols.properties.push(props::encode(&m.properties));
            cols.body.push(&m.body[..]);
            cols.queues.push(queues);
            cols.published.push(m.topic.is_some());
        }
        let ids = self.insert_messages(tx, &cols, &kept).await?;
        for q in cols.queues.iter().flatten() {
            tally.entered(*q, 1);
        }
        if !arrived.is_empty() {
            arrived.sort_unstable();
            arrived.dedup();
            notify(tx, &self.node, &arrived).await?;
        }
        Ok(Stored { verdicts, ids })
    }

    /// Removes the leased rows named by (session, delivery id) pairs held by this node's
    /// sessions, within `tx`; returns the delivery ids removed, by session, and counts them
    /// in `tally`.
    pub async fn remove_leased(
        &self,
        tx: &Transaction<'_>,
        sessions: &[i64],
        ids: &[i64],
        tally: &mut Tally,
    ) -> TxResult<HashMap<i64, Vec<DeliveryId>>> {
        let mut acked: HashMap<i64, Vec<DeliveryId>> = HashMap::new();
        if ids.is_empty() {
            return Ok(acked);
        }
        // A message that was on this one queue goes with its queue row; one on several
        // queues when its last row is gone (drop_orphans).
        let stmt = tx
            .prepare_cached(&format!(
                "WITH a AS (DELETE FROM message_queue mq \
                   WHERE mq.ctid = ANY(ARRAY({LEASED_ROWS})) \
                   RETURNING mq.lease_session, mq.lease_delivery_id, mq.message_id, \
                     mq.alone, mq.queue_id), \
                 gone AS (DELETE FROM messages m \
                   WHERE m.id = ANY(ARRAY(SELECT a.message_id FROM a WHERE a.alone))) \
                 SELECT lease_session, lease_delivery_id, message_id, alone, queue_id FROM a"
            ))
            .await?;
        let rows = tx.query(&stmt, &[&self.node, &sessions, &ids]).await?;
        let mut shared = Vec::new();
        for row in rows {
            let (session, id, message, alone): (i64, i64, i64, bool) = (
                row.try_get(0)?,
                row.try_get(1)?,
                row.try_get(2)?,
                row.try_get(3)?,
            );
            acked.entry(session).or_default().push(id as u64);
            tally.left(row.try_get(4)?, 1);
            if !alone {
                shared.push(message);
            }
        }
        shared.sort_unstable();
        shared.dedup();
        drop_orphans(tx, &shared).await?;
        Ok(acked)
    }

    /// Inserts the messages of `cols` and their queue rows; returns the ids of every good
    /// message in order, `kept` telling which of them `cols` holds (the others are stored
    /// nowhere but get an id all the same).
    async fn insert_messages(
        &self,
        tx: &Transaction<'_>,
        cols: &Columns<'_>,
        kept: &[bool],
    ) -> TxResult<Vec<MessageId>> {
        let total = kept.len();
        if total == 0 {
            return Ok(Vec::new());
        }
        let stmt = tx
            .prepare_cached("SELECT nextval('message_ids') FROM generate_series(1, $1::bigint)")
            .await?;
        let count = i64::try_from(total).unwrap_or(i64::MAX);
        let mut all: Vec<i64> = Vec::with_capacity(total);
        for row in tx.query(&stmt, &[&count]).await? {
            all.push(row.try_get(0)?);
        }
        all.sort_unstable();
        if all.len() != total {
            return Err(StoreError::Internal("the id sequence returned too few ids".into()).into());
        }
        if kept.iter().all(|k| *k) {
            self.insert_rows(tx, cols, &all).await?;
        } else {
            let ids: Vec<i64> = all
                .iter()
                .zip(kept)
                .filter(|(_, k)| **k)
                .map(|(id, _)| *id)
                .collect();
            if !ids.is_empty() {
                self.insert_rows(tx, cols, &ids).await?;
            }
        }
        Ok(all.into_iter().map(|id| id as u64).collect())
    }

    /// Inserts the messages of `cols` under `ids`, with their queue rows, in one statement.
    async fn insert_rows(
        &self,
        tx: &Transaction<'_>,
        cols: &Columns<'_>,
        ids: &[i64],
    ) -> TxResult<()> {
        if ids.len() != cols.sender.len() {
            return Err(StoreError::Internal("messages and ids disagree".into()).into());
        }
        let (mut m, mut q, mut p, mut s, mut r, mut a) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut d, mut x, mut b) = (vec![], vec![], vec![]);
        let rows = ids
            .iter()
            .zip(cols.queues.iter().zip(&cols.body))
            .zip(&cols.priority)
            .zip(cols.sender.iter().zip(&cols.published))
            .zip(&cols.receiver)
            .zip(cols.deliver_at.iter().zip(&cols.expires_at));
        for (((((id, (queues, body)), prio), (sender, published)), receiver), (deliver, expires)) in
            rows
        {
            let bytes = i32::try_from(body.len()).unwrap_or(i32::MAX);
            // Receives by sender look rows up by sender: a subscription's rows have none.
            let sender = (!*published).then_some(*sender);
            for queue in queues {
                m.push(*id);
                q.push(*queue);
                p.push(*prio);
                s.push(sender);
                r.push(*receiver);
                a.push(queues.len() == 1);
                d.push(*deliver);
                x.push(*expires);
                b.push(bytes);
            }
        }
        // Both tables in one statement (one round trip).
        let stmt = tx
            .prepare_cached(
                "WITH m AS (INSERT INTO messages \
                   (id, sender_id, receiver_id, priority, context, created_at, properties, body, \
                    expires_at) \
                   SELECT id, s, r, p, c, t, props::jsonb, b, x FROM unnest($1::bigint[], \
                     $2::bigint[], $3::bigint[], $4::smallint[], $5::bigint[], $6::bigint[], \
                     $7::text[], $8::bytea[], $15::bigint[]) AS u(id, s, r, p, c, t, props, b, x)) \
                 INSERT INTO message_queue \
                   (message_id, queue_id, priority, sender_id, receiver_id, alone, deliver_at, \
                    expires_at, body_bytes) \
                 SELECT * FROM unnest($9::bigint[], $10::bigint[], $11::smallint[], \
                   $12::bigint[], $13::bigint[], $14::bool[], $16::bigint[], $17::bigint[], \
                   $18::integer[])",
            )
            .await?;
        tx.execute(
            &stmt,
            &[
                &ids,
                &cols.sender,
                &cols.receiver,
                &cols.priority,
                &cols.context,
                &cols.created_at,
                &cols.properties,
                &cols.body,
                &m,
                &q,
                &p,
                &s,
                &r,
                &a,
                &cols.expires_at,
                &d,
                &x,
                &b,
            ],
        )
        .await?;
        Ok(())
    }
}

/// Checks one message against the names resolved for the batch.
fn check(
    m: &NewMessage,
    queue_ids: &HashMap<String, i64>,
    topics: &HashMap<String, Vec<Subscriber>>,
    receiver_ids: &HashMap<String, i64>,
) -> Result<(), StoreError> {
    check_alone(m)?;
    if let Some(t) = &m.topic {
        if !topics.contains_key(t.as_str()) {
            return Err(StoreError::TopicNotFound(t.to_string()));
        }
    }
    let mut seen: Vec<&str> = Vec::with_capacity(m.queues.len());
    for q in &m.queues {
        if !queue_ids.contains_key(q) {
            return Err(StoreError::QueueNotFound(q.clone()));
        }
        if seen.contains(&q.as_str()) {
            return Err(StoreError::InvalidArgument(format!(
                "queue '{q}' is named twice"
            )));
        }
        seen.push(q);
    }
    if let Some(r) = &m.receiver {
        if !receiver_ids.contains_key(r) {
            return Err(StoreError::ClientNotFound(r.clone()));
        }
    }
    names::check("sender", &m.sender)
}
