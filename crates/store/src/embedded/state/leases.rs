//! Client-ack leases: which delivery holds which message on which queue, for which session,
//! until when. Indexed by delivery id, by deadline (expiry) and by session (disconnect).
//!
//! Leases live only in memory: after a restart every session is gone, and the messages they
//! held come back ready, flagged redelivered by the `DeliveryStarted` records in the log.

use std::collections::{BTreeSet, HashSet};
use std::hash::BuildHasherDefault;

use ferry_protocol::{DeliveryId, MessageId};

use super::{IdHasher, IdMap, QueueKey};
use crate::api::SessionId;

/// One client-ack delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The leased message.
    pub message: MessageId,
    /// The queue it was taken from.
    pub queue: QueueKey,
    /// The session that may settle it.
    pub session: SessionId,
    /// When it returns to the queue, ms since the Unix epoch.
    pub deadline: u64,
}

/// The deadline of a lease that never expires (a held auto-ack take, see
/// [`crate::ReceiveSpec::hold`]): left out of the deadline index, which only expiry reads.
pub const NO_DEADLINE: u64 = u64::MAX;

/// Every live lease, with its indexes.
#[derive(Debug, Default)]
pub struct Leases {
    by_id: IdMap<DeliveryId, Lease>,
    by_deadline: BTreeSet<(u64, DeliveryId)>,
    by_session: IdMap<SessionId, HashSet<DeliveryId, BuildHasherDefault<IdHasher>>>,
    /// Delivery ids are unique per store run; 0 means "nothing to settle".
    next_id: DeliveryId,
}

impl Leases {
    /// Records a new lease and returns its delivery id.
    pub fn insert(&mut self, lease: Lease) -> DeliveryId {
        self.next_id += 1;
        let id = self.next_id;
        self.by_id.insert(id, lease);
        if lease.deadline != NO_DEADLINE {
            self.by_deadline.insert((lease.deadline, id));
        }
        self.by_session.entry(lease.session).or_default().insert(id);
        id
    }

    /// The lease `id` if `session` holds it.
    pub fn get_held(&self, session: SessionId, id: DeliveryId) -> Option<Lease> {
        self.by_id
            .get(&id)
            .copied()
            .filter(|l| l.session == session)
    }

    /// Removes lease `id`.
    pub fn remove(&mut self, id: DeliveryId) -> Option<Lease> {
        let lease = self.by_id.remove(&id)?;
        if lease.deadline != NO_DEADLINE {
            self.by_deadline.remove(&(lease.deadline, id));
        }
        // An emptied set is kept for the session's next leases (a push subscription takes and
        // settles whole batches: dropping and growing it again each time cost more than the
        // rest); it goes when the session is released.
        if let Some(set) = self.by_session.get_mut(&lease.session) {
            set.remove(&id);
        }
        Some(lease)
    }

    /// Forgets `session`'s index entry (its leases were all removed: it was released).
    pub fn forget_session(&mut self, session: SessionId) {
        if self
            .by_session
            .get(&session)
            .is_some_and(|set| set.is_empty())
        {
            self.by_session.remove(&session);
        }
    }

    /// Delivery ids held by `session`.
    pub fn of_session(&self, session: SessionId) -> Vec<DeliveryId> {
        let mut ids: Vec<DeliveryId> = self
            .by_session
            .get(&session)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        // Return them in delivery order so the queue sees them back in a predictable order.
        ids.sort_unstable();
        ids
    }

    /// Delivery ids whose deadline is at or before `now_ms`.
    pub fn expired(&self, now_ms: u64) -> Vec<DeliveryId> {
        self.by_deadline
            .range(..=(now_ms, DeliveryId::MAX))
            .map(|(_, id)| *id)
            .collect()
    }

    /// Delivery ids on `queue` (forced delete; a scan, as deletes are rare).
    pub fn on_queue(&self, queue: QueueKey) -> Vec<DeliveryId> {
        let mut ids: Vec<DeliveryId> = self
            .by_id
            .iter()
            .filter(|(_, l)| l.queue == queue)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<u64> {
        self.by_deadline.first().map(|(d, _)| *d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_inserts_and_removals() {
        let mut l = Leases::default();
        let a = l.insert(Lease {
            message: 1,
            queue: 1,
            session: 10,
            deadline: 500,
        });
        let b = l.insert(Lease {
            message: 2,
            queue: 2,
            session: 10,
            deadline: 100,
        });
        let c = l.insert(Lease {
            message: 3,
            queue: 1,
            session: 11,
            deadline: 300,
        });
        assert_eq!(l.next_deadline(), Some(100));
        assert_eq!(l.expired(300), vec![b, c]);
        assert_eq!(l.of_session(10), vec![a, b]);
        assert_eq!(l.on_queue(1), vec![a, c]);
        assert!(l.get_held(11, a).is_none());
        assert_eq!(l.remove(b).map(|x| x.message), Some(2));
        assert!(l.remove(b).is_none());
        assert_eq!(l.next_deadline(), Some(300));
        l.remove(a);
        assert!(l.of_session(10).is_empty());
        l.forget_session(10);
        assert!(!l.by_session.contains_key(&10));
    }

    #[test]
    fn leases_without_a_deadline_never_expire() {
        let mut l = Leases::default();
        let held = l.insert(Lease {
            message: 1,
            queue: 1,
            session: 10,
            deadline: NO_DEADLINE,
        });
        assert_eq!(l.next_deadline(), None);
        assert!(l.expired(u64::MAX).is_empty());
        assert_eq!(l.of_session(10), vec![held]);
        assert!(l.remove(held).is_some());
        assert!(l.by_deadline.is_empty());
    }
}
