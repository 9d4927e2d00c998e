//! The client-acknowledged deliveries of one STOMP connection, by the id its ACK and NACK
//! frames name: the MESSAGE's `ack` header in STOMP 1.2, its `message-id` in 1.0 and 1.1.
//!
//! In `ack:client` mode an ACK or NACK settles the message it names and every earlier
//! unsettled one of the same subscription (cumulative); in `ack:client-individual` mode only
//! the one it names. Its size is bounded by the broker: a session holds at most
//! `max_in_flight_per_session` unsettled deliveries.

use std::collections::{HashMap, VecDeque};

use ferry_protocol::DeliveryId;

#[derive(Debug)]
struct Entry {
    subscription: u64,
    delivery: DeliveryId,
    cumulative: bool,
}

/// The connection's unsettled client-ack deliveries.
#[derive(Debug, Default)]
pub struct Acks {
    entries: HashMap<u64, Entry>,
    /// The ids of each cumulative subscription, in delivery order.
    order: HashMap<u64, VecDeque<u64>>,
}

impl Acks {
    /// Records a delivery handed out through `subscription` under `key`.
    pub fn register(
        &mut self,
        key: u64,
        subscription: u64,
        delivery: DeliveryId,
        cumulative: bool,
    ) {
        if cumulative {
            self.order.entry(subscription).or_default().push_back(key);
        }
        self.entries.insert(
            key,
            Entry {
                subscription,
                delivery,
                cumulative,
            },
        );
    }

    /// Forgets and returns the deliveries an ACK or NACK of `key` settles; `None` when `key`
    /// names no unsettled delivery.
    pub fn take(&mut self, key: u64) -> Option<Vec<DeliveryId>> {
        let entry = self.entries.remove(&key)?;
        if !entry.cumulative {
            return Some(vec![entry.delivery]);
        }
        let mut ids = Vec::new();
        if let Some(queue) = self.order.get_mut(&entry.subscription) {
            while let Some(k) = queue.pop_front() {
                if k == key {
                    break;
                }
                if let Some(e) = self.entries.remove(&k) {
                    ids.push(e.delivery);
                }
            }
        }
        ids.push(entry.delivery);
        Some(ids)
    }

    /// Forgets what subscription `subscription` delivered (it ended: the session keeps the
    /// deliveries, and the connection's end hands them back).
    pub fn forget(&mut self, subscription: u64) -> usize {
        self.order.remove(&subscription);
        let before = self.entries.len();
        self.entries.retain(|_, e| e.subscription != subscription);
        before - self.entries.len()
    }

    /// Unsettled deliveries of subscription `subscription`.
    pub fn outstanding(&self, subscription: u64) -> usize {
        self.entries
            .values()
            .filter(|e| e.subscription == subscription)
            .count()
    }

    /// Unsettled deliveries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is unsettled.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cumulative_ack_settles_the_earlier_ones_of_its_subscription_only() {
        let mut a = Acks::default();
        a.register(1, 1, 10, true);
        a.register(2, 2, 20, true);
        a.register(3, 1, 30, true);
        a.register(4, 1, 40, true);
        assert_eq!(a.take(3), Some(vec![10, 30]));
        assert_eq!(a.take(1), None, "settled already");
        assert_eq!(a.take(4), Some(vec![40]));
        assert_eq!(a.take(2), Some(vec![20]));
        assert!(a.is_empty());
    }

    #[test]
    fn an_individual_ack_settles_one() {
        let mut a = Acks::default();
        a.register(1, 1, 10, false);
        a.register(2, 1, 20, false);
        assert_eq!(a.take(2), Some(vec![20]));
        assert_eq!(a.len(), 1);
        assert_eq!(a.take(9), None);
    }
}
