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
    pub(super) writing: tokio::sync::Mutex<()>,
    counters: Mutex<MessageCounters>,
}

impl Flows {
    /// This node's dead-letter counters.
    pub fn counters(&self) -> MessageCounters {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a committed transaction's `tally` to this node's figures; drops of messages whose
    /// target queue is gone are logged (the first ten, then at powers of two: a deleted
    /// dead-letter queue can make a storm of them).
    pub(super) fn count(&self, tally: Tally) {
        if tally.is_empty() {
            return;
        }
        let (before, after) = {
            let mut c = self.counters.lock().unwrap_or_else(|p| p.into_inner());
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
        let mut unwritten = self.unwritten();
        for (q, n) in tally.entered {
            unwritten.entry(q).or_default().0 += n;
        }
        for (q, n) in tally.left {
            unwritten.entry(q).or_default().1 += n;
        }
    }

    /// The flows not written to the table yet.
    pub(super) fn unwritten(&self) -> MutexGuard<'_, HashMap<i64, (u64, u64)>> {
        self.unwritten.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Adds `from`'s flows to `to`.
pub(super) fn merge(to: &mut HashMap<i64, (u64, u64)>, from: &HashMap<i64, (u64, u64)>) {
    for (q, (e, l)) in from {
        let t = to.entry(*q).or_default();
        t.0 += e;
        t.1 += l;
    }
}
