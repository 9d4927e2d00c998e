//! A STOMP subscription's MESSAGE frames, written by the broker itself: the gateway gives each
//! broker subscription a [`StompEncoder`] ([`ferry_broker::push`]), so a delivery goes from the
//! store's data straight into a MESSAGE frame on the session's outbound queue, once.
//!
//! `ack:auto` rides on a broker subscription in auto-ack mode, `client` and
//! `client-individual` on one in client-ack mode, whose deliveries the encoder records in the
//! connection's [`Acks`] for the ACK and NACK frames to come. The broker pushes at most the
//! subscription's prefetch ahead, and only while the session's outbound queue is within its
//! byte budget: a client that reads slowly holds up its own subscriptions.

use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use ferry_broker::push::DeliveryEncoder;
use ferry_protocol::{DeliveryView, ErrorReply, SubscriptionId};
use tokio_util::sync::CancellationToken;

use super::acks::Acks;
use super::mapping;
use crate::codec::Version;

/// A STOMP acknowledgement mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ack:auto`.
    Auto,
    /// `ack:client` (cumulative).
    Client,
    /// `ack:client-individual`.
    Individual,
}

/// Writes one STOMP subscription's MESSAGE frames.
pub struct StompEncoder {
    /// The connection's number for the subscription (its acks are kept apart by it).
    pub slot: u64,
    /// `MESSAGE`, `subscription` and `destination`, escaped once; without `destination` for a
    /// pattern subscription, whose messages each name their own topic.
    head: Bytes,
    /// The subscribed pattern, for a pattern subscription.
    pattern: Option<String>,
    mode: Mode,
    version: Version,
    acks: Arc<Mutex<Acks>>,
    /// Cancelled when the broker ends the subscription (its queue deleted): the connection
    /// then closes with an ERROR frame, as STOMP has no other way to say so.
    ended: CancellationToken,
    /// Why it ended.
    reason: Mutex<Option<ErrorReply>>,
}

impl StompEncoder {
    /// The encoder of subscription `id` (the client's) on `destination` (as subscribed;
    /// `pattern`: a topic pattern, whose MESSAGE frames name the topic each message was
    /// published to).
    pub fn new(
        slot: u64,
        id: &str,
        destination: &str,
        pattern: bool,
        mode: Mode,
        version: Version,
        acks: Arc<Mutex<Acks>>,
    ) -> StompEncoder {
        let (head, pattern) = if pattern {
            let head = mapping::subscription_head(id, version).freeze();
            (head, Some(destination.to_owned()))
        } else {
            (mapping::message_head(id, destination, version), None)
        };
        StompEncoder {
            slot,
            head,
            pattern,
            mode,
            version,
            acks,
            ended: CancellationToken::new(),
            reason: Mutex::new(None),
        }
    }

    /// Cancelled when the broker ends the subscription.
    pub fn ended(&self) -> &CancellationToken {
        &self.ended
    }

    /// Why the broker ended the subscription, once it did.
    pub fn reason(&self) -> Option<ErrorReply> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Appends the MESSAGE of `d`, recording its ack id in client modes.
    pub fn put(&self, out: &mut BytesMut, d: &DeliveryView<'_>) {
        let ack = match self.mode {
            Mode::Auto => None,
            mode => {
                let key = ack_key(d, self.version);
                self.acks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .register(key, self.slot, d.delivery_id, mode == Mode::Client);
                Some(key)
            }
        };
        match &self.pattern {
            None => mapping::put_message(out, &self.head, d, ack, self.version),
            Some(pattern) => {
                out.reserve(mapping::message_len(&self.head, d) + pattern.len() + 16);
                out.extend_from_slice(&self.head);
                mapping::put_topic_destination(out, d, pattern, self.version);
                mapping::put_message(out, &[], d, ack, self.version);
            }
        }
    }
}

impl DeliveryEncoder for StompEncoder {
    fn encoded_len(&self, d: &DeliveryView<'_>) -> usize {
        let destination = self.pattern.as_ref().map_or(0, |p| p.len() + 16);
        mapping::message_len(&self.head, d) + destination
    }

    fn encode(&self, out: &mut BytesMut, _subscription: SubscriptionId, d: &DeliveryView<'_>) {
        self.put(out, d);
    }

    fn ended(&self, _out: &mut BytesMut, _subscription: SubscriptionId, error: &ErrorReply) {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(error.clone());
        self.ended.cancel();
    }
}

/// The id ACK and NACK frames name this delivery by: the `ack` header's value in 1.2 (the
/// broker's delivery id), the `message-id` in 1.0 and 1.1.
fn ack_key(d: &DeliveryView<'_>, version: Version) -> u64 {
    match version {
        Version::V1_2 => d.delivery_id,
        _ => d.id,
    }
}
