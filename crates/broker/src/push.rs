//! How a session's pushes are written: the bytes a push subscription (or a direct delivery)
//! makes of each delivery it hands out. Native connections write `Deliver` frames
//! ([`Native`]); a protocol gateway over in-process sessions ([`crate::local`]) gives each of
//! its subscriptions an encoder of its own protocol's frames, so deliveries go from the store
//! to the gateway's socket in one encoding, with the store's, credit's and writer's paths
//! unchanged. The broker knows no protocol but its own: the encoder is the gateway's.

use bytes::BytesMut;
use ferry_protocol::{
    deliver_encoded_len, encode_deliver, DeliveryView, ErrorReply, Response, SubscriptionId,
};

/// Encodes one subscription's pushes. Called on the subscription's task and, for direct
/// deliveries, on the publisher's: it must be cheap and must not block.
pub trait DeliveryEncoder: Send + Sync + 'static {
    /// About how many bytes [`DeliveryEncoder::encode`] writes for `d` (to size buffers).
    fn encoded_len(&self, d: &DeliveryView<'_>) -> usize;
    /// Appends the frame(s) that deliver `d` through subscription `subscription`. `d`'s
    /// delivery id is 0 when the client settles nothing (auto ack).
    fn encode(&self, out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>);
    /// Appends what tells the client that the subscription ended because of `error` (its
    /// queue was deleted, the store refused).
    fn ended(&self, out: &mut BytesMut, subscription: SubscriptionId, error: &ErrorReply);
}

/// The native protocol's `Deliver` and `SubscriptionClosed` frames.
pub struct Native;

impl DeliveryEncoder for Native {
    fn encoded_len(&self, d: &DeliveryView<'_>) -> usize {
        deliver_encoded_len(d)
    }

    fn encode(&self, out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>) {
        encode_deliver(out, subscription, d);
    }

    fn ended(&self, out: &mut BytesMut, subscription: SubscriptionId, error: &ErrorReply) {
        Response::SubscriptionClosed {
            subscription,
            error: error.clone(),
        }
        .encode(0, out);
    }
}
