//! Direct delivery: a non-persistent message published while a subscription's queue is empty
//! goes straight to the subscription's one push consumer, handed over as a delivery in the same
//! step that would have queued it, instead of being queued and taken out again by the
//! consumer's push task. The store hands over data ([`DeliveryView`]s); the consumer (the
//! broker's push subscription, a protocol gateway's) encodes them in its own wire format.
//!
//! The broker offers a consumer with [`Topics::attach_direct`](crate::Topics::attach_direct) when
//! it can take messages that way: auto ack, no selector of its own. An engine that has no use
//! for it (the PostgreSQL engine) ignores the offer, and everything goes through the queue as
//! before. The embedded engine hands a message over only when all of these hold, and queues it
//! otherwise:
//! - it is a publish, non-persistent, visible at once and addressed to nobody;
//! - it is not part of a transaction;
//! - the subscription's queue has no ready message (so nothing it holds is overtaken), or the
//!   ready ones can be handed over first, in order, in the same step: at most a few thousand,
//!   each one a message that could have gone directly itself (non-persistent, visible,
//!   addressed to nobody, no time to live on the queue), all of the publish's priority, and
//!   the consumer has room for them and the publish. So direct delivery resumes as soon as a
//!   backlog is within the consumer's credit, instead of every publish queueing behind it;
//! - exactly one consumer is attached to the subscription (competing consumers of a shared
//!   subscription take turns through the queue);
//! - the consumer accepts it ([`DirectConsumer::try_reserve`]): it has room for it and is not
//!   in the middle of taking a batch from the queue.

use ferry_protocol::packed::PackedBodies;
use ferry_protocol::{DeliveryView, MessageId};

/// A push consumer that can take deliveries straight from a publish.
///
/// Called under the engine's state lock: every method must be quick and must not block.
pub trait DirectConsumer: Send + Sync {
    /// Claims room for `n` deliveries about to be handed over (all or none), and says
    /// whether it could. Refused while the consumer has no room (too little credit), while it
    /// is gone, and between [`DirectConsumer::begin_take`] and [`DirectConsumer::end_take`].
    fn try_reserve(&self, n: u32) -> bool;

    /// Gives back room for `n` deliveries reserved with [`DirectConsumer::try_reserve`] that
    /// will not be handed over after all (another consumer of the same publish had none).
    fn unreserve(&self, n: u32);

    /// The consumer's push task is taking a batch from its queue: returns how many messages
    /// the batch may take, and refuses direct deliveries until [`DirectConsumer::end_take`],
    /// because the batch must reach the consumer first and the engine cannot see it on its
    /// way. Called by the engine under the lock that picks the batch.
    fn begin_take(&self) -> u32;

    /// The batch is on its way (or was empty): `n` messages went, at most what
    /// [`DirectConsumer::begin_take`] returned; direct deliveries are let in again.
    fn end_take(&self, n: u32);

    /// Opens a batch for the deliveries handed over during one hold of the engine's lock;
    /// `expected` is how many publishes the hold expects (at least 1), for sizing buffers.
    fn open_batch(&self, expected: usize) -> Box<dyn DirectBatch>;
}

/// The deliveries handed to one [`DirectConsumer`] during one hold of the engine's lock.
pub trait DirectBatch: Send {
    /// Adds a delivery reserved with [`DirectConsumer::try_reserve`] (delivery id 0: direct
    /// deliveries are never held for an ack).
    fn push(&mut self, delivery: &DeliveryView<'_>);

    /// Adds one delivery per body of `bodies`, all reserved: `template`'s fields, with ids
    /// from `first_id` on and each body in turn (a run of publishes alike but for their
    /// bodies). By default each is a [`DirectBatch::push`]; a batch may write the run in one go.
    fn push_run(
        &mut self,
        template: &DeliveryView<'_>,
        first_id: MessageId,
        bodies: &PackedBodies,
    ) {
        for d in template.run(first_id, bodies.iter()) {
            self.push(&d);
        }
    }

    /// Hands the deliveries over, in order, ahead of anything the consumer receives later.
    /// Called before the engine's lock is released.
    fn hand_over(self: Box<Self>);
}
