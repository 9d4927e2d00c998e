//! The embedded engine's side of direct delivery (see [`crate::direct`]): the consumers
//! attached per subscription queue, and the batches of deliveries made to them during one hold
//! of the state lock, handed over before the lock is released.

use std::fmt;
use std::sync::Arc;

use ferry_protocol::{DeliveryView, Order, Properties};

use super::{IdMap, QueueKey, State, Stored};
use crate::api::NewMessage;
use crate::direct::{DirectBatch, DirectConsumer};
use ferry_protocol::packed::PackedBodies;
use ferry_protocol::MessageId;

/// Most ready messages a publish hands over ahead of itself (see
/// [`State::drain_to_direct`]): bounds the work of one publish under the lock, as a push
/// task's batch does.
const MAX_DRAIN: u64 = 4096;

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
    pub(super) fn only(&self, qk: QueueKey) -> Option<&Arc<dyn DirectConsumer>> {
        match self.by_queue.get(&qk).map(Vec::as_slice) {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// The batch being filled for `consumer`, opened at its first delivery.
    fn batch_for(
        &mut self,
        consumer: &Arc<dyn DirectConsumer>,
    ) -> Option<&mut Box<dyn DirectBatch>> {
        if let Some(i) = self
            .pending
            .iter()
            .position(|p| Arc::ptr_eq(&p.consumer, consumer))
        {
            return self.pending.get_mut(i).map(|p| &mut p.batch);
        }
        let batch = consumer.open_batch(self.expected.max(1));
        self.pending.push(Pending {
            consumer: consumer.clone(),
            batch,
        });
        self.pending.last_mut().map(|p| &mut p.batch)
    }

    /// Hands `msg`, published to queue `name`, to `consumer`, which reserved room for it.
    fn push(
        &mut self,
        consumer: &Arc<dyn DirectConsumer>,
        name: &str,
        id: MessageId,
        m: &NewMessage,
    ) {
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
        self.push_view(consumer, &view);
    }

    /// Hands `consumer`, which reserved room for them, one delivery per body of `bodies`:
    /// `template`'s fields with ids from `first_id` on (see [`DirectBatch::push_run`]).
    pub(super) fn push_run(
        &mut self,
        consumer: &Arc<dyn DirectConsumer>,
        template: &DeliveryView<'_>,
        first_id: MessageId,
        bodies: &PackedBodies,
    ) {
        if let Some(batch) = self.batch_for(consumer) {
            batch.push_run(template, first_id, bodies);
        }
    }

    /// Hands `view` to `consumer`, which reserved room for it.
    pub(super) fn push_view(
        &mut self,
        consumer: &Arc<dyn DirectConsumer>,
        view: &DeliveryView<'_>,
    ) {
        if let Some(batch) = self.batch_for(consumer) {
            batch.push(view);
        }
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
    /// consumer when [`crate::direct`]'s conditions hold, after what is ready on the queue
    /// (see [`State::drain_to_direct`]); returns whether it did.
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
        let Some(consumer) = self.direct.only(qk).cloned() else {
            return false;
        };
        let Some(q) = self.queues.get(&qk) else {
            return false;
        };
        if q.ready_count == 0 {
            if !consumer.try_reserve(1) {
                return false;
            }
        } else if !self.drain_to_direct(qk, &consumer, msg.priority) {
            return false;
        }
        // The queue's name borrowed, not copied: this runs once per message published.
        if let Some(q) = self.queues.get(&qk) {
            self.direct.push(&consumer, &q.name, id, m);
        }
        true
    }

    /// Hands the messages ready on subscription queue `qk` to its direct `consumer`, in
    /// order, ahead of a publish of priority `priority` that then goes directly too, and
    /// reserves room for all of them; false (and nothing done) unless every one could go
    /// directly had it been published now, they are at most [`MAX_DRAIN`], all of priority
    /// `priority` (so that no order the consumer asked for is changed) and the consumer
    /// has room for all of them and the publish.
    ///
    /// This is how direct delivery resumes after a backlog: a publisher faster than its
    /// subscriber's reads keeps a few messages queued (those published while the push task
    /// takes a batch), and without this every later publish would queue behind them.
    fn drain_to_direct(
        &mut self,
        qk: QueueKey,
        consumer: &Arc<dyn DirectConsumer>,
        priority: u8,
    ) -> bool {
        let Some(q) = self.queues.get(&qk) else {
            return false;
        };
        if q.ready_count > MAX_DRAIN || q.expiring > 0 {
            return false;
        }
        let mut ids = Vec::with_capacity(q.ready_count as usize);
        let backlog = q.ready_count as usize;
        q.ready.walk(
            None,
            Order::Time,
            None,
            backlog,
            usize::MAX,
            &mut ids,
            |_| true,
        );
        // Addressed messages are not walked without their client: then some are left.
        if ids.len() != backlog {
            return false;
        }
        let direct_like = |id: &MessageId| {
            self.messages.get(*id).is_some_and(|e| {
                let msg = &e.msg;
                !msg.persistent()
                    && msg.deliver_at == 0
                    && msg.receiver_key().is_none()
                    && msg.priority == priority
                    && !msg.properties_logged()
            }) && self.unlogged.contains_key(id)
        };
        if !ids.iter().all(direct_like) {
            return false;
        }
        let Ok(room) = u32::try_from(backlog + 1) else {
            return false;
        };
        if !consumer.try_reserve(room) {
            return false;
        }
        let name = q.name.clone();
        let no_properties = Properties::new();
        for &id in &ids {
            let Some(e) = self.messages.get(id) else {
                continue;
            };
            let msg = e.msg;
            let count = e
                .slots
                .iter()
                .find(|s| s.queue == qk)
                .map_or(0, |s| s.count);
            let (sender, _) = self.names(&msg);
            let properties = if msg.has_properties() {
                self.properties.get(&id).unwrap_or(&no_properties)
            } else {
                &no_properties
            };
            let Some(body) = self.unlogged.get(&id) else {
                continue;
            };
            let view = DeliveryView {
                delivery_id: 0,
                id,
                queue: &name,
                sender: &sender,
                receiver: None,
                priority: msg.priority,
                context: msg.context,
                created_at: msg.created_at,
                delivery_count: count,
                properties,
                body,
                expires_at: msg.expires_at,
            };
            if let Some(batch) = self.direct.batch_for(consumer) {
                batch.push(&view);
            }
        }
        // Taken as an auto-ack take of a non-persistent message is: nothing to write.
        for id in ids {
            if let Some(msg) = self.messages.get(id).map(|e| e.msg) {
                self.unready_stored(id, &msg, qk);
                self.drop_slot(id, qk);
            }
        }
        true
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
