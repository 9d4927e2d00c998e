//! Every reply and pushed delivery the broker sends, with its encoder and decoder.

use bytes::{BufMut, BytesMut};

use crate::codes::ErrorCode;
use crate::deliver_batch::{put_deliver_batch, read_deliver_batch};
use crate::deliver_run::{put_deliver_run, read_deliver_run};
use crate::frame::{begin_frame, end_frame, FrameKind, RawFrame, HEADER_LEN};
use crate::limits::Limits;
pub use crate::types::DeliveryView;
use crate::types::{
    Delivery, Message, MessageId, QueueInfo, SubscriptionId, SubscriptionInfo, TopicInfo,
};
use crate::wire::{
    put_bool, put_bytes, put_opt_string, put_properties, put_string, put_strings, Reader, WireError,
};

/// A failure: the code and a human-readable message naming the thing at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReply {
    /// The stable code.
    pub code: ErrorCode,
    /// For people: `queue 'orders' does not exist`.
    pub message: String,
}

impl ErrorReply {
    /// An error reply.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorReply {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ErrorReply {}

/// The reply to a successful connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// The protocol version the broker speaks.
    pub version: u16,
    /// The client name the session runs under.
    pub client: String,
    /// The broker's limits.
    pub limits: Limits,
    /// The keep-alive interval granted, in ms: the client sends a request (a ping when it has
    /// nothing else to send) at least this often; the broker closes a session silent for 1.5
    /// intervals.
    pub keepalive_ms: u32,
    /// The mechanism's last message (SCRAM's server-final message, which proves the server
    /// knows the user's keys); empty without authentication.
    pub auth: String,
}

/// A reply or push, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// Connect succeeded.
    Connected(Connected),
    /// Success without data.
    Ok,
    /// Failure.
    Error(ErrorReply),
    /// Answer to ping.
    Pong,
    /// A challenge of the authentication exchange during connect (SCRAM's server-first
    /// message); the client answers with `AuthResponse`.
    AuthChallenge {
        /// The mechanism's message.
        data: String,
    },
    /// Queue listing.
    Queues(Vec<QueueInfo>),
    /// A send was stored under this id.
    Sent {
        /// The message id.
        id: MessageId,
    },
    /// One result per batch item, in order.
    BatchSent(Vec<Result<MessageId, ErrorReply>>),
    /// Reply to a `PublishBatch` (version 7) whose every body was published, with
    /// consecutive ids: the `BatchSent` of `count` results `Ok(first_id)`, `Ok(first_id + 1)`,
    /// ... in 12 bytes.
    PublishedRun {
        /// The first body's message id.
        first_id: MessageId,
        /// Bodies published (at least 1).
        count: u32,
    },
    /// A receive's result: a delivery or none.
    Received(Option<Delivery>),
    /// Queues holding messages addressed to this client.
    WaitingQueues(Vec<String>),
    /// A subscription started.
    Subscribed {
        /// Its id, carried by each pushed delivery.
        subscription: SubscriptionId,
    },
    /// Push: a delivery on a subscription.
    Deliver {
        /// The subscription.
        subscription: SubscriptionId,
        /// The delivery.
        delivery: Delivery,
    },
    /// Push (version 5): deliveries on a subscription that share their queue, sender and
    /// properties, in order (see [`crate::deliver_batch`]).
    DeliverBatch {
        /// The subscription.
        subscription: SubscriptionId,
        /// The deliveries (at least one).
        deliveries: Vec<Delivery>,
    },
    /// Push (version 7): deliveries on an auto-ack subscription alike but for their
    /// consecutive message ids and their bodies (see [`crate::deliver_run`]).
    DeliverRun {
        /// The subscription.
        subscription: SubscriptionId,
        /// The deliveries (at least one, [`crate::deliver_run::is_run`]).
        deliveries: Vec<Delivery>,
    },
    /// Push: the broker ended a subscription (e.g. its queue was deleted).
    SubscriptionClosed {
        /// The subscription.
        subscription: SubscriptionId,
        /// Why.
        error: ErrorReply,
    },
    /// Topic listing.
    Topics(Vec<TopicInfo>),
    /// A topic subscription started (or was created or checked, with prefetch 0).
    TopicSubscribed {
        /// Its id, carried by each pushed delivery; 0 when nothing is consumed (prefetch 0).
        subscription: SubscriptionId,
        /// The queue holding the subscription's messages (`topic:name`): deliveries carry it,
        /// and receives may name it to pull from the subscription.
        queue: String,
    },
    /// A transaction committed: the ids of its sends and publishes, in the order they were made.
    Committed {
        /// Message ids.
        ids: Vec<MessageId>,
    },
}

fn put_error(out: &mut BytesMut, e: &ErrorReply) {
    out.put_u16_le(e.code.as_u16());
    put_string(out, &e.message);
}

fn read_error(r: &mut Reader<'_>) -> Result<ErrorReply, WireError> {
    let n = r.u16()?;
    // A code this build does not know (from a newer broker) is still an error: keep its text.
    let code = ErrorCode::from_u16(n).unwrap_or(ErrorCode::Internal);
    Ok(ErrorReply {
        code,
        message: r.string("error message")?,
    })
}

fn put_limits(out: &mut BytesMut, l: &Limits) {
    out.put_u32_le(l.max_frame_bytes);
    out.put_u32_le(l.max_body_bytes);
    out.put_u16_le(l.max_name_len);
    out.put_u32_le(l.max_connections);
    out.put_u32_le(l.max_queues);
    out.put_u32_le(l.max_in_flight_per_session);
    out.put_u32_le(l.max_prefetch);
    out.put_u32_le(l.max_batch);
    out.put_u16_le(l.max_queues_per_send);
    out.put_u16_le(l.max_properties);
    out.put_u32_le(l.lease_ms);
}

fn read_limits(r: &mut Reader<'_>) -> Result<Limits, WireError> {
    Ok(Limits {
        max_frame_bytes: r.u32()?,
        max_body_bytes: r.u32()?,
        max_name_len: r.u16()?,
        max_connections: r.u32()?,
        max_queues: r.u32()?,
        max_in_flight_per_session: r.u32()?,
        max_prefetch: r.u32()?,
        max_batch: r.u32()?,
        max_queues_per_send: r.u16()?,
        max_properties: r.u16()?,
        lease_ms: r.u32()?,
    })
}

/// Writes a delivery: delivery id, then the message.
pub fn put_delivery(out: &mut BytesMut, d: &Delivery) {
    put_delivery_view(out, &d.view());
}

/// Writes a borrowed delivery; the same bytes as [`put_delivery`] of the owned one.
pub fn put_delivery_view(out: &mut BytesMut, d: &DeliveryView<'_>) {
    let mut ids = [0u8; 16];
    ids[..8].copy_from_slice(&d.delivery_id.to_le_bytes());
    ids[8..].copy_from_slice(&d.id.to_le_bytes());
    out.put_slice(&ids);
    put_delivery_rest(out, d);
}

/// A delivery after its two ids. Neighbouring fixed-size fields go out as one slice each:
/// every put checks the buffer's room, and this runs once per message delivered. A delivery
/// usually has no receiver and no properties, and then the receiver's tag, the fixed fields,
/// the property count and the body's length are one run.
fn put_delivery_rest(out: &mut BytesMut, d: &DeliveryView<'_>) {
    put_string(out, d.queue);
    put_string(out, d.sender);
    let mut fixed = [0u8; 21];
    fixed[0] = d.priority;
    fixed[1..9].copy_from_slice(&d.context.to_le_bytes());
    fixed[9..17].copy_from_slice(&d.created_at.to_le_bytes());
    fixed[17..].copy_from_slice(&d.delivery_count.to_le_bytes());
    if d.receiver.is_none() && d.properties.is_empty() {
        // receiver tag 0, the fixed fields, property count 0, body length
        let mut run = [0u8; 1 + 21 + 2 + 4];
        run[1..22].copy_from_slice(&fixed);
        run[24..].copy_from_slice(&(d.body.len() as u32).to_le_bytes());
        out.put_slice(&run);
        out.put_slice(d.body);
    } else {
        put_opt_string(out, d.receiver);
        out.put_slice(&fixed);
        put_properties(out, d.properties);
        put_bytes(out, d.body);
    }
    out.put_u64_le(d.expires_at);
}

/// Appends a `Deliver` push frame (request id 0) of `d` on `subscription`: the same bytes as
/// encoding `Response::Deliver` with the owned delivery.
pub fn encode_deliver(out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>) {
    // The frame header (its length patched below), the subscription and the two ids: one run.
    let start = out.len();
    let mut head = [0u8; HEADER_LEN + 8 + 16];
    head[4..6].copy_from_slice(&(FrameKind::Deliver as u16).to_le_bytes());
    // request id 0: bytes 6..10 stay zero
    head[10..18].copy_from_slice(&subscription.to_le_bytes());
    head[18..26].copy_from_slice(&d.delivery_id.to_le_bytes());
    head[26..].copy_from_slice(&d.id.to_le_bytes());
    out.put_slice(&head);
    put_delivery_rest(out, d);
    end_frame(out, start);
}

/// Reads a delivery.
pub fn read_delivery(r: &mut Reader<'_>) -> Result<Delivery, WireError> {
    read_delivery_after(r, None)
}

/// [`read_delivery`] for the delivery after `prev` on the same subscription, whose queue and
/// sender names it likely repeats.
pub fn read_delivery_after(
    r: &mut Reader<'_>,
    prev: Option<&Message>,
) -> Result<Delivery, WireError> {
    // Runs of fixed-size fields are taken whole, as `put_delivery_view` writes them.
    let mut ids = r.fixed::<16>()?;
    let (delivery_id, id) = (ids.u64(), ids.u64());
    let queue = r.name_like("queue name", prev.map(|p| &p.queue))?;
    let sender = r.name_like("sender", prev.map(|p| &p.sender))?;
    let receiver = r.opt_string("receiver")?;
    let mut fixed = r.fixed::<21>()?;
    Ok(Delivery {
        delivery_id,
        message: Message {
            id,
            queue,
            sender,
            receiver,
            priority: fixed.u8(),
            context: fixed.u64(),
            created_at: fixed.u64(),
            delivery_count: fixed.u32(),
            properties: r.properties()?,
            body: r.bytes()?,
            expires_at: r.u64()?,
        },
    })
}

impl Response {
    /// The frame kind of this response.
    pub fn kind(&self) -> FrameKind {
        match self {
            Response::Connected(_) => FrameKind::Connected,
            Response::Ok => FrameKind::Ok,
            Response::Error(_) => FrameKind::Error,
            Response::Pong => FrameKind::Pong,
            Response::AuthChallenge { .. } => FrameKind::AuthChallenge,
            Response::Queues(_) => FrameKind::Queues,
            Response::Sent { .. } => FrameKind::Sent,
            Response::BatchSent(_) => FrameKind::BatchSent,
            Response::PublishedRun { .. } => FrameKind::PublishedRun,
            Response::Received(_) => FrameKind::Received,
            Response::WaitingQueues(_) => FrameKind::WaitingQueuesList,
            Response::Subscribed { .. } => FrameKind::Subscribed,
            Response::Deliver { .. } => FrameKind::Deliver,
            Response::DeliverBatch { .. } => FrameKind::DeliverBatch,
            Response::DeliverRun { .. } => FrameKind::DeliverRun,
            Response::SubscriptionClosed { .. } => FrameKind::SubscriptionClosed,
            Response::Topics(_) => FrameKind::Topics,
            Response::TopicSubscribed { .. } => FrameKind::TopicSubscribed,
            Response::Committed { .. } => FrameKind::Committed,
        }
    }

    /// An error response.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
        Response::Error(ErrorReply::new(code, message))
    }

    /// Appends this response as one frame with `request_id` (0 for pushes) to `out`.
    pub fn encode(&self, request_id: u32, out: &mut BytesMut) {
        let start = begin_frame(out, self.kind(), request_id);
        match self {
            Response::Connected(c) => {
                out.put_u16_le(c.version);
                put_string(out, &c.client);
                put_limits(out, &c.limits);
                out.put_u32_le(c.keepalive_ms);
                put_string(out, &c.auth);
            }
            Response::AuthChallenge { data } => put_string(out, data),
            Response::Ok | Response::Pong => {}
            Response::Error(e) => put_error(out, e),
            Response::Queues(qs) => {
                out.put_u32_le(qs.len() as u32);
                for q in qs {
                    put_string(out, &q.name);
                    out.put_u64_le(q.ready);
                    out.put_u64_le(q.in_flight);
                }
            }
            Response::Sent { id } => out.put_u64_le(*id),
            Response::PublishedRun { first_id, count } => {
                out.put_u64_le(*first_id);
                out.put_u32_le(*count);
            }
            Response::BatchSent(results) => {
                out.put_u32_le(results.len() as u32);
                for res in results {
                    match res {
                        Ok(id) => {
                            out.put_u8(0);
                            out.put_u64_le(*id);
                        }
                        Err(e) => {
                            out.put_u8(1);
                            put_error(out, e);
                        }
                    }
                }
            }
            Response::Received(d) => match d {
                Some(d) => {
                    put_bool(out, true);
                    put_delivery(out, d);
                }
                None => put_bool(out, false),
            },
            Response::WaitingQueues(names) => put_strings(out, names),
            Response::Subscribed { subscription } => out.put_u64_le(*subscription),
            Response::Deliver {
                subscription,
                delivery,
            } => {
                out.put_u64_le(*subscription);
                put_delivery(out, delivery);
            }
            Response::DeliverBatch {
                subscription,
                deliveries,
            } => put_deliver_batch(out, *subscription, deliveries),
            Response::DeliverRun {
                subscription,
                deliveries,
            } => put_deliver_run(out, *subscription, deliveries),
            Response::SubscriptionClosed {
                subscription,
                error,
            } => {
                out.put_u64_le(*subscription);
                put_error(out, error);
            }
            Response::Topics(topics) => {
                out.put_u32_le(topics.len() as u32);
                for t in topics {
                    put_string(out, &t.name);
                    out.put_u32_le(t.subscriptions.len() as u32);
                    for s in &t.subscriptions {
                        put_string(out, &s.name);
                        put_bool(out, s.durable);
                        put_bool(out, s.shared);
                        put_string(out, &s.selector);
                        out.put_u64_le(s.ready);
                        out.put_u64_le(s.in_flight);
                    }
                }
            }
            Response::TopicSubscribed {
                subscription,
                queue,
            } => {
                out.put_u64_le(*subscription);
                put_string(out, queue);
            }
            Response::Committed { ids } => crate::wire::put_u64s(out, ids),
        }
        end_frame(out, start);
    }

    /// Decodes a response frame.
    pub fn decode(frame: &RawFrame) -> Result<Response, WireError> {
        let kind = FrameKind::from_u16(frame.kind).ok_or(WireError::UnknownKind(frame.kind))?;
        let mut r = Reader::new(&frame.payload);
        let resp = match kind {
            FrameKind::Connected => Response::Connected(Connected {
                version: r.u16()?,
                client: r.string("client name")?,
                limits: read_limits(&mut r)?,
                keepalive_ms: r.u32()?,
                auth: r.string("authentication")?,
            }),
            FrameKind::AuthChallenge => Response::AuthChallenge {
                data: r.string("authentication challenge")?,
            },
            FrameKind::Ok => Response::Ok,
            FrameKind::Error => Response::Error(read_error(&mut r)?),
            FrameKind::Pong => Response::Pong,
            FrameKind::Queues => {
                let n = r.count32("queues", 2 + 8 + 8)?;
                let mut qs = Vec::with_capacity(n);
                for _ in 0..n {
                    qs.push(QueueInfo {
                        name: r.string("queue name")?,
                        ready: r.u64()?,
                        in_flight: r.u64()?,
                    });
                }
                Response::Queues(qs)
            }
            FrameKind::Sent => Response::Sent { id: r.u64()? },
            FrameKind::PublishedRun => {
                let first_id = r.u64()?;
                let count = r.u32()?;
                if count == 0 || first_id.checked_add(u64::from(count) - 1).is_none() {
                    return Err(WireError::InvalidValue {
                        field: "published run",
                        value: u64::from(count),
                    });
                }
                Response::PublishedRun { first_id, count }
            }
            FrameKind::BatchSent => {
                let n = r.count32("batch results", 1 + 2 + 2)?;
                let mut results = Vec::with_capacity(n);
                for _ in 0..n {
                    results.push(match r.u8()? {
                        0 => Ok(r.u64()?),
                        1 => Err(read_error(&mut r)?),
                        v => {
                            return Err(WireError::InvalidValue {
                                field: "batch result",
                                value: u64::from(v),
                            })
                        }
                    });
                }
                Response::BatchSent(results)
            }
            FrameKind::Received => {
                if r.bool("present")? {
                    Response::Received(Some(read_delivery(&mut r)?))
                } else {
                    Response::Received(None)
                }
            }
            FrameKind::WaitingQueuesList => Response::WaitingQueues(r.strings("queue name")?),
            FrameKind::Subscribed => Response::Subscribed {
                subscription: r.u64()?,
            },
            FrameKind::Deliver => Response::Deliver {
                subscription: r.u64()?,
                delivery: read_delivery(&mut r)?,
            },
            FrameKind::DeliverBatch => {
                let (subscription, deliveries) = read_deliver_batch(&mut r)?;
                Response::DeliverBatch {
                    subscription,
                    deliveries,
                }
            }
            FrameKind::DeliverRun => {
                let (subscription, deliveries) = read_deliver_run(&mut r)?;
                Response::DeliverRun {
                    subscription,
                    deliveries,
                }
            }
            FrameKind::SubscriptionClosed => Response::SubscriptionClosed {
                subscription: r.u64()?,
                error: read_error(&mut r)?,
            },
            FrameKind::Topics => {
                let n = r.count32("topics", 2 + 4)?;
                let mut topics = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.string("topic name")?;
                    let m = r.count32("subscriptions", 2 + 1 + 1 + 2 + 8 + 8)?;
                    let mut subscriptions = Vec::with_capacity(m);
                    for _ in 0..m {
                        subscriptions.push(SubscriptionInfo {
                            name: r.string("subscription name")?,
                            durable: r.bool("durable")?,
                            shared: r.bool("shared")?,
                            selector: r.string("selector")?,
                            ready: r.u64()?,
                            in_flight: r.u64()?,
                        });
                    }
                    topics.push(TopicInfo {
                        name,
                        subscriptions,
                    });
                }
                Response::Topics(topics)
            }
            FrameKind::TopicSubscribed => Response::TopicSubscribed {
                subscription: r.u64()?,
                queue: r.string("queue name")?,
            },
            FrameKind::Committed => Response::Committed {
                ids: r.u64s("message ids")?,
            },
            other => return Err(WireError::UnknownKind(other as u16)),
        };
        r.finish()?;
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::types::PropertyValue;

    #[test]
    fn encode_deliver_writes_the_bytes_of_response_deliver() {
        for receiver in [None, Some("bob".to_string())] {
            let delivery = Delivery {
                delivery_id: 42,
                message: Message {
                    id: 7,
                    queue: "prices:audit".into(),
                    sender: "alice".into(),
                    receiver: receiver.clone(),
                    priority: 4,
                    context: 9,
                    properties: vec![
                        ("region".into(), PropertyValue::Str("eu".into())),
                        ("qty".into(), PropertyValue::Int(-3)),
                        ("ok".into(), PropertyValue::Bool(true)),
                        ("px".into(), PropertyValue::Float(1.5)),
                    ]
                    .into(),
                    body: Bytes::from_static(b"hello"),
                    created_at: 1_700_000_000_000,
                    delivery_count: 2,
                    expires_at: 5,
                },
            };
            let mut owned = BytesMut::new();
            Response::Deliver {
                subscription: 3,
                delivery: delivery.clone(),
            }
            .encode(0, &mut owned);
            let mut borrowed = BytesMut::from(&b"prefix"[..]);
            encode_deliver(&mut borrowed, 3, &delivery.view());
            assert_eq!(&borrowed[6..], &owned[..]);
        }
    }
}
