//! Receiving: peek, auto-ack and client-ack takes, by queue or by sender, in either order.
//!
//! A receive is one statement: it picks the ready rows (locking them with `FOR UPDATE SKIP
//! LOCKED` for takes, so concurrent receivers on any node never wait for each other nor get
//! the same row), leases (client ack) or deletes (auto ack) them, and reads the messages, all
//! in one round trip. Client-ack takes and peeks run on their own (autocommit); an auto-ack
//! take runs in a transaction with the removal of the messages it emptied. Only an empty
//! answer costs a second query, to tell "no message" from "no such queue". The picked rows
//! are locked by the statement itself, so it finds them again by `ctid` (a TID scan, whatever
//! the table's statistics say).

use std::collections::HashMap;

use bytes::Bytes;
use deadpool_postgres::GenericClient;
use ferry_protocol::{AckMode, Delivery, Message, Order, ReceiveMode, Source};
use tokio_postgres::Row;

use super::errors::bad_data;
use super::inner::Inner;
use super::props;
use super::tally::Tally;
use super::tx::{drop_orphans, retrying, TxResult};
use crate::api::ReceiveSpec;
use crate::error::StoreError;

/// The columns every receive statement returns, from `r` (the picked, leased or deleted rows:
/// message_id, queue_id, count, delivery, alone) joined with the message. Queue and client
/// names come from the in-process caches ([`Inner::deliveries`]), not from joins.
pub const COLUMNS: &str = "r.message_id, r.queue_id, m.sender_id, m.receiver_id, m.priority, \
    m.context, m.created_at, m.properties::text, m.body, r.count, r.delivery, r.alone, \
    m.expires_at";

/// Index of `alone` in [`COLUMNS`].
pub const ALONE: usize = 11;

/// Index of `expires_at` in [`COLUMNS`], the last; a statement may add columns after it.
pub const EXPIRES_AT: usize = 12;

/// The condition on `mq` that leaves out rows not due yet (delayed delivery) and expired rows;
/// `now` is the parameter holding the receive's current time.
pub fn timely(now: &str) -> String {
    format!("mq.deliver_at <= {now} AND (mq.expires_at = 0 OR mq.expires_at > {now})")
}

/// The join that goes with [`COLUMNS`]: one primary-key probe per row (`LATERAL ... LIMIT 1`
/// cannot be turned into a hash or merge join, whose choice would rest on the row estimates of
/// a queue table, which are always wrong).
pub const JOINS: &str = "CROSS JOIN LATERAL (SELECT * FROM messages m0 \
    WHERE m0.id = r.message_id LIMIT 1) m";

/// The receive statement for one kind of receive. Parameters: $1 the queue name or sender id,
/// $2 the receiving client's id (or NULL), $3 the limit; client-ack takes add $4 node, $5
/// session, $6 lease deadline; the current time is the next parameter ($4, or $7), and a byte
/// limit ([`ReceiveSpec::max_bytes`]) the last ($5, or $8).
fn statement(spec: &ReceiveSpec) -> String {
    let source = source_condition(&spec.source);
    let (order, outer_order) = orders(spec.order);
    let timely = timely(if leases(spec) { "$7" } else { "$4" });
    let max_bytes = if leases(spec) { "$8" } else { "$5" };
    let pick = |lock: &str| {
        let rows = format!(
            "SELECT mq.ctid, mq.queue_id, mq.message_id, mq.priority, mq.delivery_count, \
               mq.alone, mq.body_bytes \
             FROM message_queue mq \
             WHERE {source} AND mq.lease_delivery_id IS NULL AND {timely} \
               AND (mq.receiver_id IS NULL OR mq.receiver_id = $2) \
             ORDER BY {order} LIMIT $3 {lock}"
        );
        if spec.max_bytes.is_none() {
            return rows;
        }
        // The picked rows' prefix whose bodies fit the byte limit, or the first row alone. The
        // rows after it are locked by the statement (a locking clause and a window cannot share
        // a level) but neither leased nor removed: they stay ready, in place.
        let window = order.replace("mq.", "");
        format!(
            "SELECT w.ctid, w.queue_id, w.message_id, w.priority, w.delivery_count, w.alone \
             FROM (SELECT l.*, \
                 sum(l.body_bytes) OVER (ORDER BY {window} ROWS UNBOUNDED PRECEDING) AS upto, \
                 row_number() OVER (ORDER BY {window}) AS n \
               FROM ({rows}) l) w \
             WHERE w.n = 1 OR w.upto <= {max_bytes}"
        )
    };
    match (spec.mode, spec.ack) {
        // Held: leased to the session without a new delivery count (see ReceiveSpec::hold).
        (ReceiveMode::Take, AckMode::Auto) if spec.hold => format!(
            "WITH p AS ({}), \
             r AS (UPDATE message_queue mq SET \
                 lease_node = $4, lease_session = $5, lease_until = $6, \
                 lease_delivery_id = nextval('delivery_ids') \
               WHERE mq.ctid = ANY(ARRAY(SELECT p.ctid FROM p)) \
               RETURNING mq.queue_id, mq.message_id, mq.priority, \
                 mq.delivery_count AS count, mq.lease_delivery_id AS delivery, mq.alone) \
             SELECT {COLUMNS} FROM r {JOINS} ORDER BY {outer_order}",
            pick("FOR UPDATE OF mq SKIP LOCKED")
        ),
        (ReceiveMode::Peek, _) => format!(
            "WITH r AS (SELECT p.queue_id, p.message_id, p.priority, p.delivery_count AS count, \
               0::bigint AS delivery, p.alone FROM ({}) p) \
             SELECT {COLUMNS} FROM r {JOINS} ORDER BY {outer_order}",
            pick("")
        ),
        (ReceiveMode::Take, AckMode::Auto) => format!(
            "WITH p AS ({}), \
             r AS (DELETE FROM message_queue mq \
               WHERE mq.ctid = ANY(ARRAY(SELECT p.ctid FROM p)) \
               RETURNING mq.queue_id, mq.message_id, mq.priority, mq.delivery_count AS count, \
                 0::bigint AS delivery, mq.alone), \
             gone AS (DELETE FROM messages g \
               WHERE g.id = ANY(ARRAY(SELECT r.message_id FROM r WHERE r.alone))) \
             SELECT {COLUMNS} FROM r {JOINS} ORDER BY {outer_order}",
            pick("FOR UPDATE OF mq SKIP LOCKED")
        ),
        (ReceiveMode::Take, AckMode::Client) => format!(
            "WITH p AS ({}), \
             r AS (UPDATE message_queue mq SET delivery_count = mq.delivery_count + 1, \
                 lease_node = $4, lease_session = $5, lease_until = $6, \
                 lease_delivery_id = nextval('delivery_ids') \
               WHERE mq.ctid = ANY(ARRAY(SELECT p.ctid FROM p)) \
               RETURNING mq.queue_id, mq.message_id, mq.priority, \
                 mq.delivery_count - 1 AS count, mq.lease_delivery_id AS delivery, mq.alone) \
             SELECT {COLUMNS} FROM r {JOINS} ORDER BY {outer_order}",
            pick("FOR UPDATE OF mq SKIP LOCKED")
        ),
    }
}

/// Whether `spec` leases what it takes: a client-ack take, or a held auto-ack take.
pub fn leases(spec: &ReceiveSpec) -> bool {
    spec.mode == ReceiveMode::Take && (spec.ack == AckMode::Client || spec.hold)
}

/// The lease deadline of `spec`'s takes: a held take has none (the largest bigint).
pub fn lease_until(spec: &ReceiveSpec) -> i64 {
    if spec.ack == AckMode::Auto {
        i64::MAX
    } else {
        as_i64(spec.lease_until_ms)
    }
}

/// The condition on `mq` that selects the source; $1 is the queue name or the sender id.
pub fn source_condition(source: &Source) -> &'static str {
    match source {
        Source::Queue(_) => "mq.queue_id = (SELECT id FROM queues WHERE name = $1)",
        Source::Sender(_) => "mq.sender_id = $1",
    }
}

/// ORDER BY lists for `order`, on `mq` and on the result `r`.
pub fn orders(order: Order) -> (&'static str, &'static str) {
    match order {
        Order::Priority => (
            "mq.priority DESC, mq.message_id, mq.queue_id",
            "r.priority DESC, r.message_id, r.queue_id",
        ),
        Order::Time => ("mq.message_id, mq.queue_id", "r.message_id, r.queue_id"),
    }
}

impl Inner {
    /// See [`crate::Queues::receive`].
    pub async fn receive(
        &self,
        spec: &ReceiveSpec,
        max: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        retrying(|| self.try_receive(spec, max)).await
    }

    async fn try_receive(&self, spec: &ReceiveSpec, max: usize) -> TxResult<Vec<Delivery>> {
        let mut conn = self.conn().await?;
        let sender_id = match &spec.source {
            Source::Queue(_) => None,
            Source::Sender(name) => {
                let found = self.clients.lookup(&conn, &[name.as_str()]).await?;
                let Some(&id) = found.get(name.as_str()) else {
                    return Err(StoreError::ClientNotFound(name.clone()).into());
                };
                Some(id)
            }
        };
        let client_id = self
            .clients
            .lookup(&conn, &[spec.client.as_str()])
            .await?
            .get(spec.client.as_str())
            .copied();
        let limit = i64::try_from(max.max(1)).unwrap_or(i64::MAX);
        let sql = statement(spec);
        let rows = match (spec.mode, spec.ack) {
            (ReceiveMode::Take, AckMode::Auto) if !spec.hold => {
                let tx = conn.transaction().await?;
                let rows = self
                    .run(&tx, &sql, spec, sender_id, client_id, limit)
                    .await?;
                let mut shared: Vec<i64> = Vec::new();
                for row in &rows {
                    if !row.try_get::<_, bool>(ALONE)? {
                        shared.push(row.try_get(0)?);
                    }
                }
                shared.sort_unstable();
                shared.dedup();
                drop_orphans(&tx, &shared).await?;
                tx.commit().await?;
                let mut tally = Tally::default();
                for row in &rows {
                    tally.left(row.try_get(1)?, 1);
                }
                self.count(tally);
                rows
            }
            _ => {
                self.run(&conn, &sql, spec, sender_id, client_id, limit)
                    .await?
            }
        };
        if rows.is_empty() {
            if let Source::Queue(name) = &spec.source {
                let stmt = conn
                    .prepare_cached("SELECT 1 FROM queues WHERE name = $1")
                    .await?;
                if conn.query_opt(&stmt, &[name]).await?.is_none() {
                    return Err(StoreError::QueueNotFound(name.clone()).into());
                }
            }
        }
        self.deliveries(&conn, &rows).await
    }

    /// Turns rows of [`COLUMNS`] into deliveries, with the names from the caches (or, the
    /// first time, from the database).
    pub async fn deliveries<C: GenericClient>(
        &self,
        client: &C,
        rows: &[Row],
    ) -> TxResult<Vec<Delivery>> {
        let mut queue_ids: Vec<i64> = Vec::new();
        let mut client_ids: Vec<i64> = Vec::new();
        for row in rows {
            queue_ids.push(row.try_get(1)?);
            client_ids.push(row.try_get(2)?);
            if let Some(r) = row.try_get::<_, Option<i64>>(3)? {
                client_ids.push(r);
            }
        }
        queue_ids.sort_unstable();
        queue_ids.dedup();
        client_ids.sort_unstable();
        client_ids.dedup();
        let queues = self.queue_names.names(client, &queue_ids).await?;
        let clients = self.clients.names(client, &client_ids).await?;
        rows.iter()
            .map(|row| delivery(row, &queues, &clients))
            .collect()
    }

    /// Runs the receive statement `sql` on `client`.
    async fn run<C: GenericClient>(
        &self,
        client: &C,
        sql: &str,
        spec: &ReceiveSpec,
        sender_id: Option<i64>,
        client_id: Option<i64>,
        limit: i64,
    ) -> TxResult<Vec<Row>> {
        let stmt = client.prepare_cached(sql).await?;
        let rows = match (&spec.source, sender_id) {
            (Source::Sender(_), Some(sender)) => {
                self.query(client, &stmt, spec, &sender, client_id, limit)
                    .await?
            }
            (Source::Queue(name), _) => {
                self.query(client, &stmt, spec, name, client_id, limit)
                    .await?
            }
            (Source::Sender(name), None) => {
                return Err(StoreError::ClientNotFound(name.clone()).into())
            }
        };
        Ok(rows)
    }

    async fn query<C: GenericClient>(
        &self,
        client: &C,
        stmt: &tokio_postgres::Statement,
        spec: &ReceiveSpec,
        source: &(dyn tokio_postgres::types::ToSql + Sync),
        client_id: Option<i64>,
        limit: i64,
    ) -> TxResult<Vec<Row>> {
        let now = as_i64(spec.now_ms);
        let session = as_i64(spec.session);
        let until = lease_until(spec);
        let max_bytes = spec.max_bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            vec![source, &client_id, &limit];
        if leases(spec) {
            params.extend::<[&(dyn tokio_postgres::types::ToSql + Sync); 3]>([
                &self.node, &session, &until,
            ]);
        }
        params.push(&now);
        if let Some(max_bytes) = &max_bytes {
            params.push(max_bytes);
        }
        Ok(client.query(stmt, &params).await?)
    }
}

/// Reinterprets an unsigned id or time as PostgreSQL's signed bigint (and back with `as u64`).
pub fn as_i64(v: u64) -> i64 {
    v as i64
}

/// A time in ms as a bigint, saturating: a time past `i64::MAX` ms (a hostile time to live,
/// say) means "never" and must not wrap into the past.
pub fn time_as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn delivery(
    row: &Row,
    queues: &HashMap<i64, String>,
    clients: &HashMap<i64, String>,
) -> TxResult<Delivery> {
    let id: i64 = row.try_get(0)?;
    let queue_id: i64 = row.try_get(1)?;
    let sender_id: i64 = row.try_get(2)?;
    let receiver_id: Option<i64> = row.try_get(3)?;
    let priority: i16 = row.try_get(4)?;
    let context: i64 = row.try_get(5)?;
    let created_at: i64 = row.try_get(6)?;
    let properties: String = row.try_get(7)?;
    let body: Vec<u8> = row.try_get(8)?;
    let count: i32 = row.try_get(9)?;
    let delivery_id: i64 = row.try_get(10)?;
    let expires_at: i64 = row.try_get(EXPIRES_AT)?;
    let name = |names: &HashMap<i64, String>, id: i64, what: &str| {
        names.get(&id).cloned().ok_or_else(|| bad_data(what))
    };
    Ok(Delivery {
        delivery_id: u64::try_from(delivery_id).map_err(|_| bad_data("delivery id"))?,
        message: Message {
            id: u64::try_from(id).map_err(|_| bad_data("message id"))?,
            queue: name(queues, queue_id, "queue of a message")?.into(),
            sender: name(clients, sender_id, "sender of a message")?.into(),
            receiver: match receiver_id {
                Some(r) => Some(name(clients, r, "receiver of a message")?),
                None => None,
            },
            priority: u8::try_from(priority).map_err(|_| bad_data("priority"))?,
            context: context as u64,
            properties: props::decode(&properties)?,
            body: Bytes::from(body),
            created_at: created_at as u64,
            delivery_count: u32::try_from(count).map_err(|_| bad_data("delivery count"))?,
            expires_at: expires_at as u64,
        },
    })
}
