//! [`Admin`] for the PostgreSQL engine: figures by one aggregate query, browsing by keyset
//! pagination over the ready indexes (a page deep in a large queue is an index seek, not a
//! scan), purges, moves and deletes as single transactions. The state is the database's, so
//! every node shows the whole cluster (clients name the node that holds them).

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use deadpool_postgres::Transaction;
use ferry_protocol::{Message, MessageId, Order, QueueOptions, Source};
use tokio_postgres::Row;

use super::inner::Inner;
use super::props;
use super::tally::Tally;
use super::tx::{drop_orphans, retrying, TxResult};
use crate::admin::{
    forms_cycle, origin_of, Admin, BrowseCursor, BrowsePage, BrowseSpec, BrowsedMessage,
    ClientRecord, EngineStats, MoveReport, MoveTarget, QueueDetails, BROWSE_BUDGET,
    MAX_BROWSE_PAGE,
};
use crate::error::StoreError;
use crate::select::MessageSource;

/// Rows fetched per step of a browse (a selector may pass over many).
const BROWSE_STEP: i64 = 500;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The columns every browse selects, in this order, from `mq` (the page's keys, see
/// [`keys`]) and the rows it joins (as a receive, one primary-key probe per message).
const COLUMNS: &str = "mq.message_id, q.name, s.name, r.name, m.priority, m.context, \
     m.created_at, m.properties::text, m.body, mq.delivery_count, m.expires_at, mq.queue_id";

/// The joins that go with [`COLUMNS`].
const JOINS: &str = "CROSS JOIN LATERAL (SELECT * FROM messages m0 \
     WHERE m0.id = mq.message_id LIMIT 1) m \
     JOIN queues q ON q.id = mq.queue_id \
     JOIN clients s ON s.id = m.sender_id \
     LEFT JOIN clients r ON r.id = m.receiver_id";

/// The statement of one browse step: the keys of up to `n` ready, timely rows after a
/// position, in order, then their messages. Parameters: $1 the queue or sender id, $2 the
/// current time, then the position: priority (priority order only), message id, queue id (by
/// sender only); the limit last.
fn step_statement(source: &Source, order: Order) -> String {
    let by_sender = matches!(source, Source::Sender(_));
    let (col, tie) = if by_sender {
        ("sender_id", ", queue_id")
    } else {
        ("queue_id", "")
    };
    let ready = format!(
        "SELECT message_id, queue_id, priority, delivery_count FROM message_queue mq \
         WHERE {col} = $1 AND lease_delivery_id IS NULL AND {}",
        super::receive::timely("$2")
    );
    match order {
        Order::Time => {
            let (after, limit) = if by_sender {
                ("(message_id, queue_id) > ($3, $4)", "$5")
            } else {
                ("message_id > $3", "$4")
            };
            format!(
                "SELECT {COLUMNS} FROM ({ready} AND {after} \
                   ORDER BY message_id{tie} LIMIT {limit}) mq {JOINS} \
                 ORDER BY mq.message_id{}",
                if by_sender { ", mq.queue_id" } else { "" }
            )
        }
        Order::Priority => {
            let (after, limit) = if by_sender {
                ("(message_id, queue_id) > ($4, $5)", "$6")
            } else {
                ("message_id > $4", "$5")
            };
            format!(
                "SELECT {COLUMNS} FROM (SELECT * FROM ( \
                   ({ready} AND priority = $3 AND {after} \
                     ORDER BY message_id{tie} LIMIT {limit}) \
                   UNION ALL \
                   ({ready} AND priority < $3 \
                     ORDER BY priority DESC, message_id{tie} LIMIT {limit})) u \
                   ORDER BY priority DESC, message_id{tie} LIMIT {limit}) mq {JOINS} \
                 ORDER BY mq.priority DESC, mq.message_id{}",
                if by_sender { ", mq.queue_id" } else { "" }
            )
        }
    }
}

fn browsed(row: &Row) -> TxResult<(BrowsedMessage, i64)> {
    let id: i64 = row.try_get(0)?;
    let priority: i16 = row.try_get(4)?;
    let context: i64 = row.try_get(5)?;
    let created_at: i64 = row.try_get(6)?;
    let properties: String = row.try_get(7)?;
    let body: Vec<u8> = row.try_get(8)?;
    let count: i32 = row.try_get(9)?;
    let expires_at: i64 = row.try_get(10)?;
    let qid: i64 = row.try_get(11)?;
    let queue: String = row.try_get(1)?;
    let sender: String = row.try_get(2)?;
    Ok((
        BrowsedMessage {
            message: Message {
                id: id as u64,
                queue: queue.into(),
                sender: sender.into(),
                receiver: row.try_get(3)?,
                priority: u8::try_from(priority).unwrap_or(0),
                context: context as u64,
                properties: props::decode(&properties)?,
                body: Bytes::from(body),
                created_at: created_at as u64,
                delivery_count: u32::try_from(count).unwrap_or(0),
                expires_at: expires_at as u64,
            },
        },
        qid,
    ))
}

impl Inner {
    async fn queue_id<C: deadpool_postgres::GenericClient>(
        &self,
        c: &C,
        name: &str,
    ) -> TxResult<i64> {
        let stmt = c
            .prepare_cached("SELECT id FROM queues WHERE name = $1")
            .await?;
        match c.query_opt(&stmt, &[&name]).await? {
            Some(row) => Ok(row.try_get(0)?),
            None => Err(StoreError::QueueNotFound(name.to_owned()).into()),
        }
    }

    async fn try_set_queue_options(&self, name: &str, options: &QueueOptions) -> TxResult<()> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let lock = tx
            .prepare_cached("SELECT id FROM queues WHERE name = $1 FOR UPDATE")
            .await?;
        let Some(row) = tx.query_opt(&lock, &[&name]).await? else {
            return Err(StoreError::QueueNotFound(name.to_owned()).into());
        };
        let qid: i64 = row.try_get(0)?;
        let user = tx
            .prepare_cached(
                "SELECT id FROM queues WHERE name = $1 AND topic_id IS NULL FOR KEY SHARE",
            )
            .await?;
        let mut ids = Vec::new();
        for (what, other) in [
            ("dead-letter", &options.dead_letter_queue),
            ("expiry", &options.expiry_queue),
        ] {
            ids.push(match other {
                None => None,
                Some(d) if d == name => {
                    return Err(StoreError::InvalidArgument(format!(
                        "queue '{name}' cannot be its own {what} queue"
                    ))
                    .into())
                }
                Some(d) => match tx.query_opt(&user, &[d]).await? {
                    Some(row) => Some(row.try_get::<_, i64>(0)?),
                    None => return Err(StoreError::QueueNotFound(d.clone()).into()),
                },
            });
        }
        let all = tx
            .prepare_cached(
                "SELECT q.name, d.name, e.name FROM queues q \
                 LEFT JOIN queues d ON d.id = q.dead_letter_queue_id \
                 LEFT JOIN queues e ON e.id = q.expiry_queue_id \
                 WHERE q.dead_letter_queue_id IS NOT NULL OR q.expiry_queue_id IS NOT NULL",
            )
            .await?;
        let mut targets: Vec<(String, Vec<String>)> = Vec::new();
        for row in tx.query(&all, &[]).await? {
            let q: String = row.try_get(0)?;
            let t: Vec<String> = [row.try_get::<_, Option<String>>(1)?, row.try_get(2)?]
                .into_iter()
                .flatten()
                .collect();
            targets.push((q, t));
        }
        let lookup = |q: &str| {
            targets
                .iter()
                .find(|(n, _)| n == q)
                .map(|(_, t)| t.clone())
                .unwrap_or_default()
        };
        if let Some(q) = forms_cycle(name, options, lookup) {
            return Err(StoreError::InvalidArgument(format!(
                "queue '{q}' leads back to '{name}' through dead-letter or expiry queues; \
                 a cycle is refused"
            ))
            .into());
        }
        let max = i32::try_from(options.max_deliveries).unwrap_or(i32::MAX);
        let update = tx
            .prepare_cached(
                "UPDATE queues SET max_deliveries = $2, dead_letter_queue_id = $3, \
                 expiry_queue_id = $4 WHERE id = $1",
            )
            .await?;
        let (dlq, exp) = (
            ids.first().copied().flatten(),
            ids.get(1).copied().flatten(),
        );
        tx.execute(&update, &[&qid, &max, &dlq, &exp]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn try_purge_queue(&self, name: &str) -> TxResult<u64> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let qid = self.queue_id(&tx, name).await?;
        let stmt = tx
            .prepare_cached(
                "DELETE FROM message_queue WHERE queue_id = $1 AND lease_delivery_id IS NULL \
                 RETURNING message_id",
            )
            .await?;
        let mut ids: Vec<i64> = Vec::new();
        for row in tx.query(&stmt, &[&qid]).await? {
            ids.push(row.try_get(0)?);
        }
        ids.sort_unstable();
        drop_orphans(&tx, &ids).await?;
        tx.commit().await?;
        let mut tally = Tally::default();
        tally.left(qid, ids.len() as u64);
        self.count(tally);
        Ok(ids.len() as u64)
    }

    async fn try_delete_message(&self, name: &str, id: MessageId) -> TxResult<()> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let qid = self.queue_id(&tx, name).await?;
        let stmt = tx
            .prepare_cached(
                "DELETE FROM message_queue WHERE queue_id = $1 AND message_id = $2 \
                 AND lease_delivery_id IS NULL RETURNING message_id",
            )
            .await?;
        let mid = id as i64;
        if tx.query(&stmt, &[&qid, &mid]).await?.is_empty() {
            return Err(StoreError::MessageNotFound {
                queue: name.to_owned(),
                id,
            }
            .into());
        }
        drop_orphans(&tx, &[mid]).await?;
        tx.commit().await?;
        let mut tally = Tally::default();
        tally.left(qid, 1);
        self.count(tally);
        Ok(())
    }

    /// One step of a browse: up to `n` ready rows after `(priority, id, queue id)`.
    #[allow(clippy::too_many_arguments)]
    async fn browse_step(
        &self,
        tx: &Transaction<'_>,
        source: &Source,
        key: i64,
        order: Order,
        now: i64,
        after: (i16, i64, i64),
        n: i64,
    ) -> TxResult<Vec<Row>> {
        let (p, id, qid) = after;
        let stmt = tx.prepare_cached(&step_statement(source, order)).await?;
        let by_sender = matches!(source, Source::Sender(_));
        let rows = match (order, by_sender) {
            (Order::Time, false) => tx.query(&stmt, &[&key, &now, &id, &n]).await?,
            (Order::Time, true) => tx.query(&stmt, &[&key, &now, &id, &qid, &n]).await?,
            (Order::Priority, false) => tx.query(&stmt, &[&key, &now, &p, &id, &n]).await?,
            (Order::Priority, true) => tx.query(&stmt, &[&key, &now, &p, &id, &qid, &n]).await?,
        };
        Ok(rows)
    }

    async fn try_browse(&self, spec: &BrowseSpec) -> TxResult<BrowsePage> {
        let limit = spec.limit.clamp(1, MAX_BROWSE_PAGE);
        let now = i64::try_from(spec.now_ms).unwrap_or(i64::MAX);
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let key = match &spec.source {
            Source::Queue(q) => self.queue_id(&tx, q).await?,
            Source::Sender(s) => {
                let stmt = tx
                    .prepare_cached("SELECT id FROM clients WHERE name = $1")
                    .await?;
                match tx.query_opt(&stmt, &[s]).await? {
                    Some(row) => row.try_get(0)?,
                    None => return Err(StoreError::ClientNotFound(s.clone()).into()),
                }
            }
        };
        let mut after: (i16, i64, i64) = match &spec.after {
            None => (11, 0, 0),
            Some(c) => {
                let qid = match &c.queue {
                    Some(q) => self.queue_id(&tx, q).await.unwrap_or(0),
                    None => 0,
                };
                (i16::from(c.priority), c.id as i64, qid)
            }
        };
        if spec.order == Order::Time && spec.after.is_none() {
            after = (0, 0, 0);
        }
        let mut page = BrowsePage::default();
        let mut examined = 0;
        let mut end = false;
        let mut last: Option<(u8, i64, String)> = None;
        'steps: while page.messages.len() < limit && examined < BROWSE_BUDGET {
            let n = if spec.selector.is_some() {
                BROWSE_STEP
            } else {
                (limit - page.messages.len()) as i64
            };
            let rows = self
                .browse_step(&tx, &spec.source, key, spec.order, now, after, n)
                .await?;
            let got = rows.len() as i64;
            for row in &rows {
                let (b, qid) = browsed(row)?;
                examined += 1;
                let m = &b.message;
                after = (
                    if spec.order == Order::Time {
                        0
                    } else {
                        i16::from(m.priority)
                    },
                    m.id as i64,
                    qid,
                );
                last = Some((after.0 as u8, m.id as i64, m.queue.to_string()));
                let keep = spec
                    .selector
                    .as_ref()
                    .is_none_or(|s| s.matches(&MessageSource(m)));
                if keep {
                    page.messages.push(b);
                    if page.messages.len() >= limit {
                        break 'steps;
                    }
                }
            }
            if got < n {
                end = true;
                break;
            }
        }
        tx.commit().await?;
        if !end {
            page.next = last.map(|(priority, id, queue)| BrowseCursor {
                priority,
                id: id as u64,
                queue: matches!(spec.source, Source::Sender(_)).then_some(queue),
            });
        }
        Ok(page)
    }

    async fn try_move_messages(
        &self,
        from: &str,
        target: &MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> TxResult<MoveReport> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let from_id = self.queue_id(&tx, from).await?;
        if let MoveTarget::Queue(t) = target {
            self.queue_id(&tx, t).await?;
        }
        let candidates: Vec<i64> = match ids {
            Some(ids) => ids.iter().map(|i| *i as i64).collect(),
            None => {
                let stmt = tx
                    .prepare_cached(
                        "SELECT message_id FROM message_queue WHERE queue_id = $1 \
                         AND lease_delivery_id IS NULL ORDER BY message_id LIMIT $2",
                    )
                    .await?;
                let n = limit as i64;
                let mut v = Vec::new();
                for row in tx.query(&stmt, &[&from_id, &n]).await? {
                    v.push(row.try_get(0)?);
                }
                v
            }
        };
        let props_of = tx
            .prepare_cached("SELECT properties::text FROM messages WHERE id = $1")
            .await?;
        let queue_of = tx
            .prepare_cached(
                "SELECT id, topic_id IS NOT NULL FROM queues WHERE name = $1 FOR KEY SHARE",
            )
            .await?;
        let on_target = tx
            .prepare_cached("SELECT 1 FROM message_queue WHERE queue_id = $1 AND message_id = $2")
            .await?;
        let remove = tx
            .prepare_cached(
                "DELETE FROM message_queue WHERE queue_id = $1 AND message_id = $2 \
                 AND lease_delivery_id IS NULL RETURNING message_id",
            )
            .await?;
        let relocate = tx
            .prepare_cached(
                "UPDATE message_queue SET queue_id = $3, delivery_count = 0, \
                   sender_id = CASE WHEN $4 THEN NULL \
                     ELSE (SELECT sender_id FROM messages WHERE id = $2) END \
                 WHERE queue_id = $1 AND message_id = $2 AND lease_delivery_id IS NULL \
                 RETURNING message_id",
            )
            .await?;
        let mut report = MoveReport::default();
        let mut touched: Vec<String> = Vec::new();
        let mut tally = Tally::default();
        for id in candidates {
            let to = match target {
                MoveTarget::Queue(t) => t.clone(),
                MoveTarget::Origin => {
                    let Some(row) = tx.query_opt(&props_of, &[&id]).await? else {
                        report.skipped.push((id as u64, "no such message".into()));
                        continue;
                    };
                    let props = props::decode(&row.try_get::<_, String>(0)?)?;
                    let probe = Message {
                        id: id as u64,
                        queue: String::new().into(),
                        sender: String::new().into(),
                        receiver: None,
                        priority: 0,
                        context: 0,
                        properties: props,
                        body: Bytes::new(),
                        created_at: 0,
                        delivery_count: 0,
                        expires_at: 0,
                    };
                    match origin_of(&probe) {
                        Some(o) => o.to_owned(),
                        None => {
                            report.skipped.push((
                                id as u64,
                                "it has no ferry_original_queue property (not a dead letter)"
                                    .into(),
                            ));
                            continue;
                        }
                    }
                }
            };
            if to == from {
                report
                    .skipped
                    .push((id as u64, "it is on its target queue already".into()));
                continue;
            }
            let Some(row) = tx.query_opt(&queue_of, &[&to]).await? else {
                report.skipped.push((
                    id as u64,
                    format!("its original queue '{to}' does not exist"),
                ));
                continue;
            };
            let to_id: i64 = row.try_get(0)?;
            let subscription: bool = row.try_get(1)?;
            let moved = if tx.query_opt(&on_target, &[&to_id, &id]).await?.is_some() {
                !tx.query(&remove, &[&from_id, &id]).await?.is_empty()
            } else {
                let relocated = !tx
                    .query(&relocate, &[&from_id, &id, &to_id, &subscription])
                    .await?
                    .is_empty();
                if relocated {
                    tally.entered(to_id, 1);
                }
                relocated
            };
            if moved {
                tally.left(from_id, 1);
            }
            if moved {
                if !touched.contains(&to) {
                    touched.push(to.clone());
                }
                report.moved.push((id as u64, to));
            } else {
                report
                    .skipped
                    .push((id as u64, format!("not ready on queue '{from}'")));
            }
        }
        super::notify::notify(&tx, &self.node, &touched).await?;
        tx.commit().await?;
        self.count(tally);
        Ok(report)
    }

    /// See [`Admin::forget_client`]: the row, locked, goes if nothing refers to it.
    async fn try_forget_client(&self, name: &str) -> TxResult<()> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let lock = tx
            .prepare_cached("SELECT id, node IS NOT NULL FROM clients WHERE name = $1 FOR UPDATE")
            .await?;
        let Some(row) = tx.query_opt(&lock, &[&name]).await? else {
            return Err(StoreError::ClientNotFound(name.to_owned()).into());
        };
        let (id, online): (i64, bool) = (row.try_get(0)?, row.try_get(1)?);
        if online {
            return Err(StoreError::AlreadyOnline(name.to_owned()).into());
        }
        // The messages' sender and receiver columns are not indexed: one scan, allowed for
        // this transaction only.
        tx.batch_execute("SET LOCAL enable_seqscan = on").await?;
        let uses = tx
            .prepare_cached(
                "SELECT (SELECT count(*) FROM messages WHERE sender_id = $1 OR receiver_id = $1), \
                   EXISTS (SELECT 1 FROM subscriptions WHERE owner = $2 AND durable)",
            )
            .await?;
        let row = tx.query_one(&uses, &[&id, &name]).await?;
        let (held, owns): (i64, bool) = (row.try_get(0)?, row.try_get(1)?);
        if held > 0 {
            return Err(StoreError::InvalidArgument(format!(
                "client '{name}' still has {held} stored messages sent by it or addressed to it; \
                 forget it once they are gone"
            ))
            .into());
        }
        if owns {
            return Err(StoreError::InvalidArgument(format!(
                "client '{name}' owns a durable subscription; unsubscribe it first"
            ))
            .into());
        }
        let delete = tx
            .prepare_cached("DELETE FROM clients WHERE id = $1")
            .await?;
        tx.execute(&delete, &[&id]).await?;
        tx.commit().await?;
        Ok(())
    }
}

#[async_trait]
impl Admin for Inner {
    async fn queue_details(&self) -> Result<Vec<QueueDetails>, StoreError> {
        let now = now_ms();
        retrying(|| async {
            let flows = self.flow_totals().await?;
            let conn = self.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "SELECT q.name, q.max_deliveries, d.name, e.name, coalesce(s.ready, 0), \
                       coalesce(s.delayed, 0), coalesce(s.in_flight, 0), m.created_at, \
                       coalesce(s.ready_bytes, 0), q.id \
                     FROM queues q \
                     LEFT JOIN queues d ON d.id = q.dead_letter_queue_id \
                     LEFT JOIN queues e ON e.id = q.expiry_queue_id \
                     LEFT JOIN (SELECT queue_id, \
                         count(*) FILTER (WHERE lease_delivery_id IS NULL AND deliver_at <= $1) \
                           AS ready, \
                         count(*) FILTER (WHERE lease_delivery_id IS NULL AND deliver_at > $1) \
                           AS delayed, \
                         count(*) FILTER (WHERE lease_delivery_id IS NOT NULL) AS in_flight, \
                         sum(body_bytes) FILTER (WHERE lease_delivery_id IS NULL \
                           AND deliver_at <= $1)::bigint AS ready_bytes, \
                         min(message_id) FILTER (WHERE lease_delivery_id IS NULL \
                           AND deliver_at <= $1) AS oldest \
                       FROM message_queue GROUP BY queue_id) s ON s.queue_id = q.id \
                     LEFT JOIN messages m ON m.id = s.oldest",
                )
                .await?;
            let mut out = Vec::new();
            for row in conn.query(&stmt, &[&now]).await? {
                let max: i32 = row.try_get(1)?;
                let (ready, delayed, in_flight): (i64, i64, i64) =
                    (row.try_get(4)?, row.try_get(5)?, row.try_get(6)?);
                let oldest: Option<i64> = row.try_get(7)?;
                let bytes: i64 = row.try_get(8)?;
                let (entered, left) = flows
                    .get(&row.try_get::<_, i64>(9)?)
                    .copied()
                    .unwrap_or_default();
                out.push(QueueDetails {
                    name: row.try_get(0)?,
                    ready: ready as u64,
                    delayed: delayed as u64,
                    in_flight: in_flight as u64,
                    ready_bytes: Some(bytes.max(0) as u64),
                    oldest_created_at: oldest.map(|t| t as u64),
                    options: QueueOptions {
                        max_deliveries: u32::try_from(max).unwrap_or(0),
                        dead_letter_queue: row.try_get(2)?,
                        expiry_queue: row.try_get(3)?,
                    },
                    entered_total: Some(entered),
                    left_total: Some(left),
                });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
    }

    async fn set_queue_options(
        &self,
        name: &str,
        options: &QueueOptions,
    ) -> Result<(), StoreError> {
        retrying(|| self.try_set_queue_options(name, options)).await
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        retrying(|| self.try_purge_queue(name)).await
    }

    async fn browse(&self, spec: &BrowseSpec) -> Result<BrowsePage, StoreError> {
        retrying(|| self.try_browse(spec)).await
    }

    async fn delete_message(&self, queue: &str, id: MessageId) -> Result<(), StoreError> {
        retrying(|| self.try_delete_message(queue, id)).await
    }

    async fn move_messages(
        &self,
        from: &str,
        target: &MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<MoveReport, StoreError> {
        retrying(|| self.try_move_messages(from, target, ids, limit)).await
    }

    async fn list_clients(&self) -> Result<Vec<ClientRecord>, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let stmt = conn
                .prepare_cached("SELECT name, node FROM clients ORDER BY name")
                .await?;
            let mut out = Vec::new();
            for row in conn.query(&stmt, &[]).await? {
                out.push(ClientRecord {
                    name: row.try_get(0)?,
                    node: row.try_get(1)?,
                });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
    }

    async fn forget_client(&self, name: &str) -> Result<(), StoreError> {
        retrying(|| self.try_forget_client(name)).await?;
        self.clients.forget(name);
        Ok(())
    }

    fn engine_stats(&self) -> EngineStats {
        EngineStats {
            engine: "postgres",
            counters: self.flows.counters(),
            ..EngineStats::default()
        }
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            conn.simple_query("SELECT 1").await?;
            Ok(())
        })
        .await
    }
}
