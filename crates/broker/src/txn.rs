//! A session's open transaction: what it sent and acked, held back until commit.
//!
//! Sends and publishes are validated when they are made (so a bad message is refused at once)
//! but reach the store only at commit, in one [`ferry_store::Transactions::commit`] call that applies
//! them with the held acks atomically. Acked deliveries stay leased to the session until then,
//! so a rollback (or a disconnect, or a crash) returns them to their queues.

use ferry_protocol::{DeliveryId, Name};
use ferry_store::NewMessage;

/// The work of one open transaction.
#[derive(Debug, Default)]
pub struct Txn {
    /// Sends and publishes, in order.
    pub msgs: Vec<NewMessage>,
    /// Deliveries to ack at commit (no duplicates).
    pub acks: Vec<DeliveryId>,
}

impl Txn {
    /// Messages plus acks held: what the transaction limit counts.
    pub fn size(&self) -> usize {
        self.msgs.len() + self.acks.len()
    }

    /// Holds `ids` for acking at commit, once each.
    pub fn ack(&mut self, ids: &[DeliveryId]) {
        for id in ids {
            if !self.acks.contains(id) {
                self.acks.push(*id);
            }
        }
    }

    /// The queues the messages were sent to and the topics they were published to, without
    /// duplicates (whom to wake after the commit).
    pub fn destinations(&self) -> (Vec<String>, Vec<Name>) {
        let mut queues: Vec<String> = Vec::new();
        let mut topics: Vec<Name> = Vec::new();
        for m in &self.msgs {
            for q in &m.queues {
                if !queues.contains(q) {
                    queues.push(q.clone());
                }
            }
            if let Some(t) = &m.topic {
                if !topics.contains(t) {
                    topics.push(t.clone());
                }
            }
        }
        (queues, topics)
    }
}
