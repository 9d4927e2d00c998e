//! The exact encoded size of every frame, computed from the values without encoding them.
//!
//! Wherever a buffer is sized ahead of encoding (a push batch of deliveries, a send batch cut to
//! the frame limit), the size comes from here, so it can never drift from the encoder: the
//! tests encode a sample of every frame kind and compare.

use crate::deliver_run::RUN_FIXED;
use crate::frame::HEADER_LEN;
use crate::publish_batch::PublishBatch;
use crate::requests::{outgoing_encoded_len, Request};
use crate::responses::{DeliveryView, ErrorReply, Response};
use crate::types::{Properties, PropertyValue, QueueOptions, Source};
use crate::wire::fitting;

/// Bytes of a string field (`put_string`): its u16 length and as much of it as fits.
fn string(s: &str) -> usize {
    2 + fitting(s).len()
}

/// Bytes of an optional string field (`put_opt_string`).
fn opt_string(s: Option<&str>) -> usize {
    1 + s.map_or(0, string)
}

/// Bytes of a list of strings (`put_strings`).
fn strings(v: &[String]) -> usize {
    2 + v.iter().map(|s| string(s)).sum::<usize>()
}

/// Bytes of a list of u64 (`put_u64s`).
fn u64s(v: &[u64]) -> usize {
    4 + 8 * v.len()
}

/// Bytes of a property list (`put_properties`).
pub fn properties_len(props: &Properties) -> usize {
    2 + props
        .iter()
        .map(|(name, value)| {
            string(name)
                + 1
                + match value {
                    PropertyValue::Bool(_) => 1,
                    PropertyValue::Int(_) | PropertyValue::Float(_) => 8,
                    PropertyValue::Str(s) => string(s),
                }
        })
        .sum::<usize>()
}

/// Bytes of queue options (`put_queue_options`).
fn queue_options(o: &QueueOptions) -> usize {
    4 + opt_string(o.dead_letter_queue.as_deref()) + opt_string(o.expiry_queue.as_deref())
}

/// Bytes of an error reply (`put_error`).
fn error(e: &ErrorReply) -> usize {
    2 + string(&e.message)
}

/// Bytes of the limits in a connect reply (`put_limits`): ten u32 or u16 fields.
const LIMITS_LEN: usize = 4 + 4 + 2 + 4 + 4 + 4 + 4 + 4 + 2 + 2 + 4;

/// Bytes of a delivery inside a frame (`put_delivery_view`): two ids, queue, sender, receiver,
/// the fixed fields, properties, body and expiry.
pub fn delivery_len(d: &DeliveryView<'_>) -> usize {
    16 + string(d.queue)
        + string(d.sender)
        + opt_string(d.receiver)
        + 21
        + properties_len(d.properties)
        + 4
        + d.body.len()
        + 8
}

/// Bytes of one delivery inside a `DeliverBatch` ([`crate::deliver_batch`]): what a
/// delivery takes besides the names and properties its batch carries once.
pub fn batch_entry_len(d: &DeliveryView<'_>) -> usize {
    16 + opt_string(d.receiver) + 21 + 4 + d.body.len() + 8
}

/// Bytes of a `DeliverRun` payload ([`crate::deliver_run`]) besides its bodies, for a run of
/// deliveries like `d` (each body then takes 4 + its length).
pub fn run_head_len(d: &DeliveryView<'_>) -> usize {
    8 + string(d.queue)
        + string(d.sender)
        + properties_len(d.properties)
        + opt_string(d.receiver)
        + RUN_FIXED
}

/// Bytes of the `Deliver` push frame of `d` ([`crate::encode_deliver`]), header included.
pub fn deliver_encoded_len(d: &DeliveryView<'_>) -> usize {
    HEADER_LEN + 8 + delivery_len(d)
}

/// Bytes of a `PublishBatch` besides its topic, properties and bodies: the fixed fields (18)
/// and the body count.
const PUBLISH_BATCH_FIXED: usize = 18 + 4;

impl PublishBatch {
    /// Encoded bytes of the payload without the bodies (each body then takes 4 + its length).
    pub fn head_len(&self) -> usize {
        string(&self.topic) + PUBLISH_BATCH_FIXED + properties_len(&self.properties)
    }

    /// Encoded bytes of the whole payload.
    pub fn encoded_len(&self) -> usize {
        self.head_len() + self.bodies.packed().len()
    }
}

impl Request {
    /// The bytes [`Request::encode`] appends for this request, header included.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Request::Connect(c) => {
                    2 + string(&c.client) + string(&c.mechanism) + string(&c.credentials) + 4 + 4
                }
                Request::AuthResponse { data } => string(data),
                Request::Disconnect
                | Request::Ping
                | Request::ListQueues
                | Request::WaitingQueues
                | Request::ListTopics
                | Request::TxnBegin
                | Request::TxnCommit
                | Request::TxnRollback => 0,
                Request::CreateQueue { name, options } => string(name) + queue_options(options),
                Request::DeleteQueue { name, .. } | Request::DeleteTopic { name, .. } => {
                    string(name) + 1
                }
                Request::Send(m) => outgoing_encoded_len(m),
                Request::SendBatch(items) => {
                    4 + items.iter().map(outgoing_encoded_len).sum::<usize>()
                }
                Request::PublishBatch(b) => b.encoded_len(),
                Request::Receive(r) => {
                    let source = match &r.source {
                        Source::Queue(name) | Source::Sender(name) => 1 + string(name),
                    };
                    source + 1 + 1 + 1 + 4 + string(&r.selector)
                }
                Request::Ack { ids } => u64s(ids),
                Request::Nack { ids, .. } => u64s(ids) + 1,
                Request::Subscribe(s) => string(&s.queue) + 1 + 1 + 4 + string(&s.selector),
                Request::Credit { .. } => 8 + 4,
                Request::Cancel { .. } => 8,
                Request::CreateTopic { name } => string(name),
                Request::SubscribeTopic(s) => {
                    string(&s.topic)
                        + string(&s.name)
                        + 1
                        + 1
                        + string(&s.options.selector)
                        + queue_options(&s.options.queue)
                        + 1
                        + 1
                        + 4
                }
                Request::Unsubscribe { topic, name } => string(topic) + string(name),
            }
    }
}

impl Response {
    /// The bytes [`Response::encode`] appends for this response, header included.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Response::Connected(c) => 2 + string(&c.client) + LIMITS_LEN + 4 + string(&c.auth),
                Response::AuthChallenge { data } => string(data),
                Response::Ok | Response::Pong => 0,
                Response::Error(e) => error(e),
                Response::Queues(qs) => {
                    4 + qs.iter().map(|q| string(&q.name) + 8 + 8).sum::<usize>()
                }
                Response::Sent { .. } | Response::Subscribed { .. } => 8,
                Response::PublishedRun { .. } => 8 + 4,
                Response::BatchSent(results) => {
                    4 + results
                        .iter()
                        .map(|r| 1 + r.as_ref().map_or_else(error, |_| 8))
                        .sum::<usize>()
                }
                Response::Received(d) => 1 + d.as_ref().map_or(0, |d| delivery_len(&d.view())),
                Response::WaitingQueues(names) => strings(names),
                Response::Deliver { delivery, .. } => 8 + delivery_len(&delivery.view()),
                Response::DeliverBatch { deliveries, .. } => {
                    let first = deliveries.first().map(|d| &d.message);
                    8 + string(first.map_or("", |m| &m.queue))
                        + string(first.map_or("", |m| &m.sender))
                        + first.map_or(2, |m| properties_len(&m.properties))
                        + 4
                        + deliveries
                            .iter()
                            .map(|d| batch_entry_len(&d.view()))
                            .sum::<usize>()
                }
                Response::DeliverRun { deliveries, .. } => {
                    deliveries
                        .first()
                        .map_or(8 + 4 + 4 + 2 + 1 + RUN_FIXED, |d| run_head_len(&d.view()))
                        + deliveries
                            .iter()
                            .map(|d| 4 + d.message.body.len())
                            .sum::<usize>()
                }
                Response::SubscriptionClosed { error: e, .. } => 8 + error(e),
                Response::Topics(topics) => {
                    4 + topics
                        .iter()
                        .map(|t| {
                            string(&t.name)
                                + 4
                                + t.subscriptions
                                    .iter()
                                    .map(|s| string(&s.name) + 1 + 1 + string(&s.selector) + 8 + 8)
                                    .sum::<usize>()
                        })
                        .sum::<usize>()
                }
                Response::TopicSubscribed { queue, .. } => 8 + string(queue),
                Response::Committed { ids } => u64s(ids),
            }
    }
}
