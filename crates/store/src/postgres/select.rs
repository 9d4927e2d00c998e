//! Receives with a selector: the selector is evaluated in Rust, not translated to SQL.
//!
//! The ready rows of the source are read in the receive's order, a page at a time and without
//! locking, with the fields a selector reads (header fields and properties, not bodies). Those
//! the selector selects are then locked with `FOR UPDATE SKIP LOCKED`, which re-checks that they
//! are still ready: a row another receiver took (or is taking) meanwhile is skipped and the walk
//! goes on. The locked rows are read in full and deleted (auto ack) or leased (client ack) in
//! the same transaction; a peek locks nothing. Rows the selector passes over are not touched,
//! so they stay in place for other receivers.
//!
//! A receive whose selector selects nothing reads every ready row of its source once; the cost
//! grows with the backlog the selector passes over.

use bytes::Bytes;
use ferry_protocol::{AckMode, Delivery, Message, Order, Properties, ReceiveMode, Source};
use ferry_selector::{Header, Selector, SelectorSource, Value};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::errors::bad_data;
use super::inner::Inner;
use super::props;
use super::receive::{as_i64, lease_until, timely};
use super::tally::Tally;
use super::tx::{drop_orphans, retrying, TxResult};
use crate::api::ReceiveSpec;
use crate::error::StoreError;
use crate::select;

/// Ready rows read per page while looking for matches.
const PAGE: i64 = 256;

/// A ready row as the selector sees it, with its place in the receive's order.
struct Candidate {
    message_id: i64,
    queue_id: i64,
    priority: i16,
    sender: String,
    receiver: Option<String>,
    context: u64,
    created_at: u64,
    properties: Properties,
    /// Bytes of its body (for [`ReceiveSpec::max_bytes`]).
    body_bytes: u64,
}

impl SelectorSource for Candidate {
    fn header(&self, h: Header) -> Value<'_> {
        select::header(
            h,
            u8::try_from(self.priority).unwrap_or(0),
            &self.sender,
            self.receiver.as_deref(),
            self.context,
            self.created_at,
        )
    }

    fn property(&self, name: &str) -> Value<'_> {
        select::property(&self.properties, name)
    }
}

impl Inner {
    /// A receive whose `spec` has a selector (see the module documentation).
    pub async fn receive_selected(
        &self,
        spec: &ReceiveSpec,
        max: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let Some(selector) = spec.selector.as_deref() else {
            return Err(StoreError::Internal(
                "a selected receive without a selector".into(),
            ));
        };
        retrying(|| self.try_receive_selected(spec, selector, max.max(1))).await
    }

    async fn try_receive_selected(
        &self,
        spec: &ReceiveSpec,
        selector: &Selector,
        max: usize,
    ) -> TxResult<Vec<Delivery>> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let mut tally = Tally::default();
        let (column, source_id) = match &spec.source {
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
        let (after, order) = match spec.order {
            Order::Priority => (
                "(mq.priority < $3 OR (mq.priority = $3 AND (mq.message_id, mq.queue_id) > ($4, $5)))",
                "mq.priority DESC, mq.message_id, mq.queue_id",
            ),
            Order::Time => (
                "(mq.message_id, mq.queue_id) > ($4, $5) AND $3::smallint IS NOT NULL",
                "mq.message_id, mq.queue_id",
            ),
        };
        let page = tx
            .prepare_cached(&format!(
                "SELECT mq.message_id, mq.queue_id, mq.priority, s.name, rc.name, m.context, \
                   m.created_at, m.properties::text, mq.body_bytes \
                 FROM message_queue mq \
                 JOIN messages m ON m.id = mq.message_id \
                 JOIN clients s ON s.id = m.sender_id \
                 LEFT JOIN clients rc ON rc.id = m.receiver_id \
                 WHERE {column} = $1 AND mq.lease_delivery_id IS NULL AND {timely} \
                   AND (mq.receiver_id IS NULL OR mq.receiver_id = $2) AND {after} \
                 ORDER BY {order} LIMIT $6",
                timely = timely("$7")
            ))
            .await?;
        let lock = tx
            .prepare_cached(
                "SELECT mq.message_id, mq.queue_id FROM message_queue mq \
                 JOIN unnest($1::bigint[], $2::bigint[]) AS p(m, q) \
                   ON mq.message_id = p.m AND mq.queue_id = p.q \
                 WHERE mq.lease_delivery_id IS NULL \
                 FOR UPDATE OF mq SKIP LOCKED",
            )
            .await?;
        let take = spec.mode == ReceiveMode::Take;
        let now = as_i64(spec.now_ms);
        // The walk: (priority, message id, queue id) of the last row read.
        let mut last: (i16, i64, i64) = (i16::MAX, i64::MIN, i64::MIN);
        let mut picked: Vec<(i64, i64)> = Vec::new();
        // Bodies picked so far; `full` once the next would not fit `spec.max_bytes`.
        let mut picked_bytes = 0u64;
        let mut full = false;
        while picked.len() < max && !full {
            let params: [&(dyn ToSql + Sync); 7] = [
                &source_id, &client_id, &last.0, &last.1, &last.2, &PAGE, &now,
            ];
            let rows = tx.query(&page, &params).await?;
            let more = rows.len() as i64 == PAGE;
            let mut matching: Vec<(i64, i64)> = Vec::new();
            let mut sizes: Vec<u64> = Vec::new();
            for row in &rows {
                let c = candidate(row)?;
                last = (c.priority, c.message_id, c.queue_id);
                if selector.matches(&c) {
                    matching.push((c.message_id, c.queue_id));
                    sizes.push(c.body_bytes);
                }
            }
            let size_of = |k: &(i64, i64)| {
                matching
                    .iter()
                    .position(|m| m == k)
                    .and_then(|i| sizes.get(i))
                    .copied()
                    .unwrap_or(0)
            };
            let mut rest = matching.as_slice();
            while picked.len() < max && !full && !rest.is_empty() {
                let (chunk, tail) = rest.split_at((max - picked.len()).min(rest.len()));
                rest = tail;
                let mut keep = |k: &(i64, i64)| {
                    full = full || !spec.fits(picked.len(), picked_bytes, size_of(k));
                    if !full {
                        picked.push(*k);
                        picked_bytes += size_of(k);
                    }
                };
                if !take {
                    chunk.iter().for_each(&mut keep);
                    continue;
                }
                let (ms, qs): (Vec<i64>, Vec<i64>) = chunk.iter().copied().unzip();
                let locked: Vec<(i64, i64)> = tx
                    .query(&lock, &[&ms, &qs])
                    .await?
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect::<TxResult<_>>()?;
                // Keep the receive's order, not the order the locks came back in. Rows locked
                // past the byte limit are neither read nor changed: they stay ready.
                chunk
                    .iter()
                    .filter(|k| locked.contains(k))
                    .for_each(&mut keep);
            }
            if !more {
                break;
            }
        }
        if picked.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let (ms, qs): (Vec<i64>, Vec<i64>) = picked.iter().copied().unzip();
        let read = tx
            .prepare_cached(
                "SELECT mq.message_id, mq.queue_id, q.name, s.name, rc.name, mq.priority, \
                   m.context, m.created_at, m.properties::text, m.body, mq.delivery_count, \
                   mq.alone, m.expires_at \
                 FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS p(m, q, n) \
                 JOIN message_queue mq ON mq.message_id = p.m AND mq.queue_id = p.q \
                 JOIN queues q ON q.id = p.q \
                 JOIN messages m ON m.id = p.m \
                 JOIN clients s ON s.id = m.sender_id \
                 LEFT JOIN clients rc ON rc.id = m.receiver_id \
                 WHERE mq.lease_delivery_id IS NULL \
                 ORDER BY p.n",
            )
            .await?;
        // A peek holds no locks: a row may have gone since it was read; takes hold theirs.
        let rows = tx.query(&read, &[&ms, &qs]).await?;
        let mut deliveries = rows.iter().map(delivery).collect::<TxResult<Vec<_>>>()?;
        let read_keys: Vec<(i64, i64)> = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<TxResult<_>>()?;
        let (ms, qs): (Vec<i64>, Vec<i64>) = read_keys.iter().copied().unzip();
        match (spec.mode, spec.ack) {
            (ReceiveMode::Peek, _) => {}
            (ReceiveMode::Take, AckMode::Auto) if !spec.hold => {
                let stmt = tx
                    .prepare_cached(
                        "DELETE FROM message_queue mq \
                         USING unnest($1::bigint[], $2::bigint[]) AS p(m, q) \
                         WHERE mq.message_id = p.m AND mq.queue_id = p.q",
                    )
                    .await?;
                tx.execute(&stmt, &[&ms, &qs]).await?;
                for q in &qs {
                    tally.left(*q, 1);
                }
                let (mut alone, mut shared) = (Vec::new(), Vec::new());
                for row in &rows {
                    let id: i64 = row.try_get(0)?;
                    if row.try_get::<_, bool>(11)? {
                        alone.push(id);
                    } else {
                        shared.push(id);
                    }
                }
                let stmt = tx
                    .prepare_cached("DELETE FROM messages WHERE id = ANY($1)")
                    .await?;
                tx.execute(&stmt, &[&alone]).await?;
                shared.sort_unstable();
                shared.dedup();
                drop_orphans(&tx, &shared).await?;
            }
            (ReceiveMode::Take, _) => {
                // A held auto-ack take keeps its delivery count (see ReceiveSpec::hold).
                let stmt = tx
                    .prepare_cached(
                        "UPDATE message_queue mq SET \
                           delivery_count = mq.delivery_count + $6::integer, \
                           lease_node = $3, lease_session = $4, lease_until = $5, \
                           lease_delivery_id = nextval('delivery_ids') \
                         FROM unnest($1::bigint[], $2::bigint[]) AS p(m, q) \
                         WHERE mq.message_id = p.m AND mq.queue_id = p.q \
                         RETURNING mq.message_id, mq.queue_id, mq.lease_delivery_id",
                    )
                    .await?;
                let session = as_i64(spec.session);
                let until = lease_until(spec);
                let counted: i32 = if spec.hold { 0 } else { 1 };
                for row in tx
                    .query(&stmt, &[&ms, &qs, &self.node, &session, &until, &counted])
                    .await?
                {
                    let (m, q, d): (i64, i64, i64) =
                        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                    let slot = read_keys
                        .iter()
                        .position(|&k| k == (m, q))
                        .and_then(|i| deliveries.get_mut(i))
                        .ok_or_else(|| bad_data("lease of a row not picked"))?;
                    slot.delivery_id = u64::try_from(d).map_err(|_| bad_data("delivery id"))?;
                }
            }
        }
        tx.commit().await?;
        self.count(tally);
        Ok(deliveries)
    }
}

fn candidate(row: &Row) -> TxResult<Candidate> {
    let context: i64 = row.try_get(5)?;
    let created_at: i64 = row.try_get(6)?;
    let properties: String = row.try_get(7)?;
    let body_bytes: i32 = row.try_get(8)?;
    Ok(Candidate {
        message_id: row.try_get(0)?,
        queue_id: row.try_get(1)?,
        priority: row.try_get(2)?,
        sender: row.try_get(3)?,
        receiver: row.try_get(4)?,
        context: context as u64,
        created_at: created_at as u64,
        properties: props::decode(&properties)?,
        body_bytes: u64::try_from(body_bytes).unwrap_or(0),
    })
}

fn delivery(row: &Row) -> TxResult<Delivery> {
    let id: i64 = row.try_get(0)?;
    let priority: i16 = row.try_get(5)?;
    let context: i64 = row.try_get(6)?;
    let created_at: i64 = row.try_get(7)?;
    let properties: String = row.try_get(8)?;
    let body: Vec<u8> = row.try_get(9)?;
    let count: i32 = row.try_get(10)?;
    let expires_at: i64 = row.try_get(12)?;
    Ok(Delivery {
        delivery_id: 0,
        message: Message {
            id: u64::try_from(id).map_err(|_| bad_data("message id"))?,
            queue: row.try_get::<_, String>(2)?.into(),
            sender: row.try_get::<_, String>(3)?.into(),
            receiver: row.try_get(4)?,
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
