//! What transactions did to queues, for operators: messages that entered and left each queue
//! (rates) and the dead letters, expiries and drops (metrics).
//!
//! A transaction collects its figures in a [`Tally`]; the caller adds it to the node's
//! [`Flows`] once the transaction commits, so a retried transaction counts once. The node
//! adds its queue flows to the `queue_counters` table (one row per queue and node, so nodes
//! never wait on each other's rows) when the broker's heartbeat asks; every node's figures
//! sum the table's rows and its own flows not written yet, so every node shows the whole
//! cluster's. The dead-letter counters stay per node, as the broker's other counters.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::store::Inner;
use super::tx::TxResult;
use crate::admin::MessageCounters;

/// One transaction's figures.
#[derive(Debug, Default)]
pub struct Tally {
    /// Dead letters, expiries and drops.
    pub counters: MessageCounters,
    /// Messages placed on each queue, by queue id.
    entered: HashMap<i64, u64>,
    /// Messages removed from each queue for good, by queue id.
    left: HashMap<i64, u64>,
}

impl Tally {
    /// `n` messages entered queue `queue`.
    pub fn entered(&mut self, queue: i64, n: u64) {
        if n > 0 {
            *self.entered.entry(queue).or_default() += n;
        }
    }

    /// `n` messages left queue `queue` for good.
    pub fn left(&mut self, queue: i64, n: u64) {
        if n > 0 {
            *self.left.entry(queue).or_default() += n;
        }
    }

    fn is_empty(&self) -> bool {
        self.entered.is_empty()
            && self.left.is_empty()
            && self.counters == MessageCounters::default()
    }
}

/// A node's figures (see the module docs).
#[derive(Debug, Default)]
pub struct Flows {
    /// Per queue id: entered and left, not in the table yet. Transactions add to it without
    /// waiting on the database.
    unwritten: Mutex<HashMap<i64, (u64, u64)>>,
    /// Held while flows are written, and while totals are read, so that a read sees a write
    /// either done or not begun, never half way (its flows in neither place, or in both).
    writing: tokio::sync::Mutex<()>,
    counters: Mutex<MessageCounters>,
}

impl Flows {
    /// This node's dead-letter counters.
    pub fn counters(&self) -> MessageCounters {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unwritten(&self) -> MutexGuard<'_, HashMap<i64, (u64, u64)>> {
        self.unwritten.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Adds `from`'s flows to `to`.
fn merge(to: &mut HashMap<i64, (u64, u64)>, from: &HashMap<i64, (u64, u64)>) {
    for (q, (e, l)) in from {
        let t = to.entry(*q).or_default();
        t.0 += e;
        t.1 += l;
    }
}

impl Inner {
    /// Adds a committed transaction's `tally` to this node's figures; drops of messages whose
    /// target queue is gone are logged (the first ten, then at powers of two: a deleted
    /// dead-letter queue can make a storm of them).
    pub(super) fn count(&self, tally: Tally) {
        if tally.is_empty() {
            return;
        }
        let (before, after) = {
            let mut c = self
                .flows
                .counters
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let before = c.dropped_target_missing;
            c.add(&tally.counters);
            (before, c.dropped_target_missing)
        };
        if after > before && (after <= 10 || (before + 1..=after).any(u64::is_power_of_two)) {
            tracing::warn!(
                dropped = after - before,
                dropped_so_far = after,
                "messages dropped: their dead-letter or expiry queue no longer exists"
            );
        }
        if tally.entered.is_empty() && tally.left.is_empty() {
            return;
        }
        let mut unwritten = self.flows.unwritten();
        for (q, n) in tally.entered {
            unwritten.entry(q).or_default().0 += n;
        }
        for (q, n) in tally.left {
            unwritten.entry(q).or_default().1 += n;
        }
    }

    /// Adds the flows not written yet to `queue_counters` (the heartbeat calls it); on failure
    /// they stay for the next time.
    pub(super) async fn write_flows(&self) -> TxResult<()> {
        let _writing = self.flows.writing.lock().await;
        let flows = std::mem::take(&mut *self.flows.unwritten());
        if flows.is_empty() {
            return Ok(());
        }
        let written = self.insert_flows(&flows).await;
        if written.is_err() {
            merge(&mut self.flows.unwritten(), &flows);
        }
        written
    }

    async fn insert_flows(&self, flows: &HashMap<i64, (u64, u64)>) -> TxResult<()> {
        let mut ids = Vec::with_capacity(flows.len());
        let mut entered = Vec::with_capacity(flows.len());
        let mut left = Vec::with_capacity(flows.len());
        for (q, (e, l)) in flows {
            ids.push(*q);
            entered.push(i64::try_from(*e).unwrap_or(i64::MAX));
            left.push(i64::try_from(*l).unwrap_or(i64::MAX));
        }
        let conn = self.conn().await?;
        let stmt = conn
            .prepare_cached(
                "INSERT INTO queue_counters (queue_id, node, entered, left_total) \
                 SELECT q, $4, e, l FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) \
                   AS u(q, e, l) WHERE EXISTS (SELECT 1 FROM queues WHERE id = u.q) \
                 ON CONFLICT (queue_id, node) DO UPDATE SET \
                   entered = queue_counters.entered + excluded.entered, \
                   left_total = queue_counters.left_total + excluded.left_total",
            )
            .await?;
        conn.execute(&stmt, &[&ids, &entered, &left, &self.node])
            .await?;
        Ok(())
    }

    /// Entered and left totals per queue id: the table's, plus this node's not written yet.
    pub(super) async fn flow_totals(&self) -> TxResult<HashMap<i64, (u64, u64)>> {
        let _writing = self.flows.writing.lock().await;
        let conn = self.conn().await?;
        let stmt = conn
            .prepare_cached(
                "SELECT queue_id, sum(entered)::bigint, sum(left_total)::bigint \
                 FROM queue_counters GROUP BY queue_id",
            )
            .await?;
        let mut out: HashMap<i64, (u64, u64)> = HashMap::new();
        for row in conn.query(&stmt, &[]).await? {
            let (q, e, l): (i64, i64, i64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            out.insert(q, (e.max(0) as u64, l.max(0) as u64));
        }
        merge(&mut out, &self.flows.unwritten());
        Ok(out)
    }
}
