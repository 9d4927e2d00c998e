//! Direct delivery: a non-persistent message published while a subscription's queue is empty
//! goes straight to the subscription's one push consumer, encoded as a `Deliver` frame in the
//! same step that would have queued it, instead of being queued and taken out again by the
//! consumer's push task.
//!
//! The broker offers a consumer with [`Store::attach_direct`](crate::Store::attach_direct) when
//! it can take messages that way: auto ack, no selector of its own. An engine that has no use
//! for it (the PostgreSQL engine) ignores the offer, and everything goes through the queue as
//! before. The embedded engine hands a message over only when all of these hold, and queues it
//! otherwise:
//! - it is a publish, non-persistent, visible at once and addressed to nobody;
//! - it is not part of a transaction;
//! - the subscription's queue has no ready message (so nothing it holds is overtaken);
//! - exactly one consumer is attached to the subscription (competing consumers of a shared
//!   subscription take turns through the queue);
//! - the consumer accepts it ([`DirectConsumer::try_reserve`]): it has credit and is not in the
//!   middle of taking a batch from the queue.

use bytes::Bytes;
use ferry_protocol::SubscriptionId;

/// A push consumer that can take deliveries straight from a publish.
///
/// Called under the engine's state lock: every method must be quick and must not block.
pub trait DirectConsumer: Send + Sync {
    /// The subscription id its `Deliver` frames carry.
    fn subscription(&self) -> SubscriptionId;

    /// Spends one unit of credit for a delivery about to be encoded, and says whether it could.
    /// Refused while the consumer has no credit, while its connection is gone, and between
    /// [`DirectConsumer::begin_take`] and [`DirectConsumer::end_take`].
    fn try_reserve(&self) -> bool;

    /// The consumer's push task is taking a batch from its queue: returns the credit the batch
    /// may use, and refuses direct deliveries until [`DirectConsumer::end_take`], because the
    /// batch must reach the client first and the engine cannot see it on its way. Called by
    /// the engine under the lock that picks the batch.
    fn begin_take(&self) -> u32;

    /// The batch is on its way (or was empty): spends `n` credit, at most what
    /// [`DirectConsumer::begin_take`] returned, and lets direct deliveries in again.
    fn end_take(&self, n: u32);

    /// Hands over encoded `Deliver` frames for `count` deliveries reserved with
    /// [`DirectConsumer::try_reserve`], in order, ahead of anything the consumer sends later.
    fn deliver(&self, frames: Bytes, count: u32);
}
