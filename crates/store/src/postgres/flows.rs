//! How the node's flows get counted and reach the `queue_counters` table (see [`super::tally`]).

use std::collections::HashMap;

use super::inner::Inner;
use super::tally::{merge, Tally};
use super::tx::TxResult;

impl Inner {
    /// Adds a committed transaction's `tally` to this node's figures (see [`super::tally::Flows::count`]).
    pub(super) fn count(&self, tally: Tally) {
        self.flows.count(tally);
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
