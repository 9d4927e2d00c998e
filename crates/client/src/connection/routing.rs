//! Frames from the broker to where they go: replies to their calls, pushed deliveries to
//! their subscriptions (a read's deliveries in one batch per subscription), a subscription's
//! end to its reader, an error not tied to a request to the connection's end.

use ferry_protocol::{DeliveryId, RawFrame, Request, Response, SubscriptionId, WireError};
use tokio::sync::mpsc;

use super::{CloseReason, Shared};
use crate::error::ClientError;
use crate::pushes::PushBatches;

/// What the reader hands a subscription.
pub(crate) enum SubEvent {
    /// Pushed deliveries, in the order the broker pushed them (never empty).
    Batch(crate::batch::DeliveryBatch),
    /// The subscription ended: closed by the broker, or the connection is gone.
    Closed(ClientError),
}

impl Shared {
    /// Stops routing deliveries to a subscription.
    pub(crate) fn forget_subscription(&self, id: SubscriptionId) {
        self.lock().subscriptions.remove(&id);
    }

    /// Hands deliveries nobody will consume back to the broker, so that they need not wait for
    /// their lease to expire.
    pub(super) fn give_back(&self, ids: Vec<DeliveryId>) {
        if !ids.is_empty() {
            self.send_and_forget(
                &Request::Nack { ids, requeue: true },
                "returning deliveries",
            );
        }
    }

    /// Hands each subscription its batch of deliveries: one lock for all of them, one channel
    /// send per subscription. Deliveries for a subscription whose reply may still be coming are
    /// kept for it; client-ack ones for no subscription go back to the broker.
    pub(super) fn route_pushes(&self, batches: &mut PushBatches) {
        let mut unwanted: Vec<DeliveryId> = Vec::new();
        {
            let mut st = self.lock();
            let st = &mut *st;
            for (subscription, batch) in batches.drain() {
                // Sending under the lock: an unbounded send never waits, and it spares a clone
                // of the sender.
                let rejected = match st.subscriptions.get(&subscription) {
                    Some(s) => match s.send(SubEvent::Batch(batch)) {
                        Ok(()) => continue,
                        Err(mpsc::error::SendError(event)) => event,
                    },
                    None if st.subscribing() => {
                        st.early
                            .entry(subscription)
                            .or_default()
                            .push(SubEvent::Batch(batch));
                        continue;
                    }
                    None => SubEvent::Batch(batch),
                };
                tracing::debug!("deliveries for unknown subscription {subscription}");
                if let SubEvent::Batch(ds) = rejected {
                    unwanted.extend(ds.delivery_ids().filter(|&id| id != 0));
                }
            }
        }
        self.give_back(unwanted);
    }

    /// Routes one frame from the broker. An error ends the connection with that reason.
    pub(super) fn dispatch(&self, frame: RawFrame) -> Result<(), CloseReason> {
        let resp = match Response::decode(&frame) {
            Ok(r) => r,
            Err(WireError::UnknownKind(kind)) => {
                // A newer broker's frame kind: fail the call it answers, skip it if a push.
                tracing::debug!(
                    "unknown frame kind {kind:#06x} (request id {})",
                    frame.request_id
                );
                if frame.request_id != 0 {
                    self.fail_call(frame.request_id, WireError::UnknownKind(kind));
                }
                return Ok(());
            }
            Err(e) => return Err(CloseReason::Protocol(e)),
        };
        if frame.request_id != 0 {
            self.complete_response(frame.request_id, resp);
            return Ok(());
        }
        // Deliveries never get here: the reader batches them (see `route_pushes`).
        match resp {
            Response::SubscriptionClosed {
                subscription,
                error,
            } => {
                let event = SubEvent::Closed(ClientError::Server(error));
                let sub = {
                    let mut st = self.lock();
                    match st.subscriptions.remove(&subscription) {
                        Some(s) => Some(s),
                        None if st.subscribing() => {
                            st.early.entry(subscription).or_default().push(event);
                            return Ok(());
                        }
                        None => return Ok(()),
                    }
                };
                if let Some(s) = sub {
                    let _ = s.send(event);
                }
            }
            // An error not tied to a request: the broker is closing the connection and says why.
            Response::Error(e) => return Err(CloseReason::Server(e)),
            other => tracing::debug!("ignoring unexpected push {:?}", other.kind()),
        }
        Ok(())
    }
}
