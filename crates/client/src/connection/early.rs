//! Pushes that overtake their subscription's reply: a delivery pushed right behind
//! `Subscribed` may be read in the same batch as it, before the reply is handled. While a
//! subscribe waits for its reply, pushes for an unknown subscription are kept for it; once none
//! waits, they belong to nobody and their client-ack deliveries go back to the broker.

use ferry_protocol::{DeliveryId, SubscriptionId};
use tokio::sync::mpsc;

use super::calls::Pending;
use super::routing::SubEvent;
use super::{Shared, State};

impl State {
    /// Whether a subscribe waits for its reply.
    pub(super) fn subscribing(&self) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, Pending::Subscribe(..)))
    }
}

impl Shared {
    /// Starts routing pushes to a new subscription, first those that overtook its reply.
    pub(super) fn register_subscription(
        &self,
        id: SubscriptionId,
        events: mpsc::UnboundedSender<SubEvent>,
    ) {
        let early = {
            let mut st = self.lock();
            let early = st.early.remove(&id).unwrap_or_default();
            if !early.iter().any(|e| matches!(e, SubEvent::Closed(_))) {
                st.subscriptions.insert(id, events.clone());
            }
            early
        };
        for e in early {
            let _ = events.send(e);
        }
    }

    /// Once no subscribe waits for its reply, early pushes can belong to no subscription: hand
    /// their client-ack deliveries back.
    pub(super) fn drop_stale_early(&self) {
        let stale = {
            let mut st = self.lock();
            if st.subscribing() || st.early.is_empty() {
                return;
            }
            std::mem::take(&mut st.early)
        };
        let ids: Vec<DeliveryId> = stale
            .into_values()
            .flatten()
            .flat_map(|e| match e {
                SubEvent::Batch(ds) => ds.delivery_ids().collect::<Vec<DeliveryId>>(),
                SubEvent::Closed(_) => Vec::new(),
            })
            .filter(|&id| id != 0)
            .collect();
        self.give_back(ids);
    }
}
