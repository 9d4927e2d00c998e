//! The broker's side of direct delivery (see [`ferry_store::direct`]): a push subscription that
//! can take non-persistent publishes straight from the store offers itself as a
//! [`DirectConsumer`] while its task runs.

use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::SubscriptionId;
use ferry_store::{DirectConsumer, Store};

use crate::credit::Credit;
use crate::outbound::Outbound;
use crate::stats::Stats;

/// A push subscription as a direct consumer: frames go to its connection's writer, each
/// delivery spends a unit of its credit.
pub struct DirectPush {
    /// The subscription.
    pub subscription: SubscriptionId,
    /// Its credit.
    pub credit: Arc<Credit>,
    /// Its connection's frames.
    pub out: Outbound,
    /// Counts the deliveries.
    pub stats: Arc<Stats>,
}

impl DirectConsumer for DirectPush {
    fn subscription(&self) -> SubscriptionId {
        self.subscription
    }

    fn try_reserve(&self) -> bool {
        // A closing connection takes nothing, nor one whose client is behind on reading: the
        // message stays queued for the subscription.
        !self.out.is_closed() && self.out.has_room() && self.credit.try_spend_one()
    }

    fn begin_take(&self) -> u32 {
        self.credit.begin_take()
    }

    fn end_take(&self, n: u32) {
        self.credit.end_take(n);
    }

    fn deliver(&self, frames: Bytes, count: u32) {
        Stats::add(&self.stats.deliveries, u64::from(count));
        // Direct deliveries are final here (non-persistent, never queued): the writer is gone
        // only with the connection, and they are lost with it.
        let _ = self.out.send(frames);
    }
}

/// A consumer attached to the store for as long as this lives.
pub struct Attached {
    store: Arc<dyn Store>,
    consumer: Arc<dyn DirectConsumer>,
}

impl Attached {
    /// Offers `consumer` for subscription queue `queue`; `None` when the store declines.
    pub fn offer(
        store: &Arc<dyn Store>,
        queue: &str,
        consumer: Arc<dyn DirectConsumer>,
    ) -> Option<Attached> {
        store
            .attach_direct(queue, consumer.clone())
            .then(|| Attached {
                store: store.clone(),
                consumer,
            })
    }
}

impl Attached {
    /// The attached consumer, to pass to [`Store::receive_with`] as its taker.
    pub fn consumer(&self) -> &dyn DirectConsumer {
        &*self.consumer
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.store.detach_direct(&self.consumer);
    }
}
