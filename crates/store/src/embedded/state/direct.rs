//! The embedded engine's side of direct delivery (see [`crate::direct`]): the consumers
//! attached per subscription queue, and the batches of deliveries made to them during one hold
//! of the state lock, handed over before the lock is released.

use std::fmt;
use std::sync::Arc;

use ferry_protocol::DeliveryView;

use super::{IdMap, QueueKey, State, Stored};
use crate::api::NewMessage;
use crate::direct::{DirectBatch, DirectConsumer};
use ferry_protocol::MessageId;

/// Deliveries made to one consumer, not handed over yet.
struct Pending {
    consumer: Arc<dyn DirectConsumer>,
    batch: Box<dyn DirectBatch>,
}

/// Consumers taking direct deliveries, by subscription queue.
#[derive(Default)]
pub struct DirectTaps {
    by_queue: IdMap<QueueKey, Vec<Arc<dyn DirectConsumer>>>,
    pending: Vec<Pending>,
    /// Publishes expected before the next flush (a batch's size): a consumer's buffer is sized
    /// for them up front instead of growing by copies.
    expected: usize,
}

impl fmt::Debug for DirectTaps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectTaps")
            .field("queues", &self.by_queue.len())
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl DirectTaps {
    /// The one consumer of `qk`, if it has exactly one.
    fn only(&self, qk: QueueKey) -> Option<&Arc<dyn DirectConsumer>> {
        match self.by_queue.get(&qk).map(Vec::as_slice) {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// Hands `msg`, published to queue `name` (`qk`), to the queue's one consumer if it
    /// accepts it; returns whether it did (the message then does not go on the queue).
    fn offer(&mut self, qk: QueueKey, name: &str, id: MessageId, m: &NewMessage) -> bool {
        let Some(consumer) = self.only(qk) else {
            return false;
        };
        if !consumer.try_reserve() {
            return false;
        }
        let i = match self
            .pending
            .iter()
            .position(|p| Arc::ptr_eq(&p.consumer, consumer))
        {
            Some(i) => i,
            None => {
                let batch = consumer.open_batch(self.expected.max(1));
                self.pending.push(Pending {
                    consumer: consumer.clone(),
                    batch,
                });
                self.pending.len() - 1
            }
        };
        let Some(p) = self.pending.get_mut(i) else {
            return false;
        };
        let view = DeliveryView {
            delivery_id: 0,
            id,
            queue: name,
            sender: &m.sender,
            receiver: None,
            priority: m.priority,
            context: m.context,
            created_at: m.created_at,
            delivery_count: 0,
            properties: &m.properties,
            body: &m.body,
            expires_at: m.expires_at_ms,
        };
        p.batch.push(&view);
        true
    }
}

impl State {
    /// Attaches `consumer` to subscription queue `queue`; false if there is no such queue.
    pub fn attach_direct(&mut self, queue: &str, consumer: Arc<dyn DirectConsumer>) -> bool {
        let Some(&qk) = self.queue_keys.get(queue) else {
            return false;
        };
        if !super::is_subscription(qk) {
            return false;
        }
        self.direct.by_queue.entry(qk).or_default().push(consumer);
        true
    }

    /// Detaches `consumer` from whichever queue it is attached to.
    pub fn detach_direct(&mut self, consumer: &Arc<dyn DirectConsumer>) {
        self.direct.by_queue.retain(|_, list| {
            list.retain(|c| !Arc::ptr_eq(c, consumer));
            !list.is_empty()
        });
    }

    /// Forgets the consumers of deleted queue `qk` (their push tasks end on their own when they
    /// find the queue gone).
    pub(super) fn forget_direct(&mut self, qk: QueueKey) {
        self.direct.by_queue.remove(&qk);
    }

    /// Hands `msg`, being published to subscription queue `qk`, straight to the queue's
    /// consumer when [`crate::direct`]'s conditions hold; returns whether it did.
    pub(super) fn deliver_direct(
        &mut self,
        id: MessageId,
        msg: &Stored,
        m: &NewMessage,
        qk: QueueKey,
    ) -> bool {
        if self.direct.by_queue.is_empty()
            || msg.persistent()
            || msg.deliver_at != 0
            || msg.receiver_key().is_some()
            || self.group.is_some()
        {
            return false;
        }
        match self.queues.get(&qk) {
            Some(q) if q.ready_count == 0 => self.direct.offer(qk, &q.name, id, m),
            _ => false,
        }
    }

    /// Says that about `n` publishes come before the next [`State::flush_direct`].
    pub fn expect_publishes(&mut self, n: usize) {
        self.direct.expected = n;
    }

    /// Hands every consumer the deliveries made to it since the last call. Called before the
    /// state lock is released by every call that may publish, so that the order of deliveries
    /// is the order of the publishes.
    pub fn flush_direct(&mut self) {
        self.direct.expected = 0;
        for p in self.direct.pending.drain(..) {
            p.batch.hand_over();
        }
    }
}
