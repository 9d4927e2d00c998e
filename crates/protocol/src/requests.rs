//! Every request a client sends, with its encoder and decoder.

use bytes::{BufMut, BytesMut};

use crate::frame::{begin_frame, end_frame, FrameKind, RawFrame};
use crate::publish_batch::{put_publish_batch, read_publish_batch, PublishBatch};
use crate::types::{
    AckMode, DeliveryId, Order, OutgoingMessage, PropertyValue, QueueOptions, ReceiveMode, Source,
    SubscriptionId, SubscriptionOptions,
};
use crate::wire::{
    fitting, put_bool, put_bytes, put_opt_string, put_properties, put_string, put_strings,
    put_u64s, Reader, WireError,
};

/// Opens a session. Must be the first request on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// The protocol version the client speaks.
    pub version: u16,
    /// The client name (`[A-Za-z0-9._-]`, 1 to 200 characters).
    pub client: String,
    /// The authentication mechanism: empty for none (anonymous), `SCRAM-SHA-256`, or
    /// `EXTERNAL` (the identity of the TLS client certificate).
    pub mechanism: String,
    /// The mechanism's first message (SCRAM's client-first message); empty for none.
    pub credentials: String,
    /// The keep-alive interval the client asks for, in ms: it sends a request (a ping when it
    /// has nothing else to send) at least this often, and the broker may close a session
    /// silent for 1.5 intervals. 0: the broker's choice. The broker grants at most its own
    /// maximum and answers the interval granted in [`crate::responses::Connected`].
    pub keepalive_ms: u32,
    /// Session flags ([`CONNECT_EPHEMERAL`]); the other bits must be 0.
    pub flags: u32,
}

/// [`Connect::flags`] bit 0, *ephemeral name*: the client made its name up for this session
/// alone, so the broker need not keep the name registered once the session ends, unless it
/// holds something (messages addressed to it, durable subscriptions).
pub const CONNECT_EPHEMERAL: u32 = 1;

/// Every [`Connect::flags`] bit this protocol version defines.
pub const CONNECT_FLAGS: u32 = CONNECT_EPHEMERAL;

/// Asks for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receive {
    /// A queue, or a sender across all queues.
    pub source: Source,
    /// Priority or time order.
    pub order: Order,
    /// Take or peek.
    pub mode: ReceiveMode,
    /// Auto or client ack (ignored for peeks).
    pub ack: AckMode,
    /// How long to wait for a message when none is ready, in ms; 0 answers at once.
    pub wait_ms: u32,
    /// A JMS message selector (`docs/selectors.md`): only messages it is TRUE for are received.
    /// Empty: every message.
    pub selector: String,
}

impl Receive {
    /// The same receive, restricted to the messages `selector` is TRUE for (empty: all).
    ///
    /// ```
    /// use ferry_protocol::requests::Receive;
    /// use ferry_protocol::types::{AckMode, Order, ReceiveMode, Source};
    ///
    /// let r = Receive {
    ///     source: Source::Queue("orders".into()),
    ///     order: Order::Priority,
    ///     mode: ReceiveMode::Take,
    ///     ack: AckMode::Client,
    ///     wait_ms: 0,
    ///     selector: String::new(),
    /// }
    /// .with_selector("region = 'eu'");
    /// assert_eq!(r.selector, "region = 'eu'");
    /// ```
    #[must_use]
    pub fn with_selector(mut self, selector: impl Into<String>) -> Self {
        self.selector = selector.into();
        self
    }
}

/// Starts a push subscription on a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// The queue.
    pub queue: String,
    /// Priority or time order.
    pub order: Order,
    /// Auto or client ack.
    pub ack: AckMode,
    /// Most deliveries pushed and not yet settled (client ack) or credited back (auto ack).
    pub prefetch: u32,
    /// A JMS message selector (`docs/selectors.md`): only messages it is TRUE for are pushed.
    /// Empty: every message.
    pub selector: String,
}

impl Subscribe {
    /// The same subscription, restricted to the messages `selector` is TRUE for (empty: all).
    #[must_use]
    pub fn with_selector(mut self, selector: impl Into<String>) -> Self {
        self.selector = selector.into();
        self
    }
}

/// Subscribes to a topic with push delivery: creates the subscription, or attaches to the
/// durable one of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeTopic {
    /// The topic.
    pub topic: String,
    /// The durable subscription's name; empty for a non-durable one (the broker names it).
    pub name: String,
    /// Durability, sharing, selector and queue settings of the subscription.
    pub options: SubscriptionOptions,
    /// Priority or time order.
    pub order: Order,
    /// Auto or client ack.
    pub ack: AckMode,
    /// Most deliveries pushed and not yet settled (client ack) or credited back (auto ack);
    /// 0 creates or checks the subscription without consuming (the reply's subscription id is
    /// then 0).
    pub prefetch: u32,
}

impl SubscribeTopic {
    /// A non-durable, unshared subscription to `topic` without selector: priority order,
    /// client ack, prefetch 100, default queue settings. Refine it with the other methods.
    ///
    /// ```
    /// use ferry_protocol::requests::SubscribeTopic;
    /// use ferry_protocol::types::{AckMode, Order, QueueOptions};
    ///
    /// let s = SubscribeTopic::new("prices")
    ///     .durable("audit")
    ///     .shared()
    ///     .with_selector("region = 'eu'")
    ///     .ack(AckMode::Auto)
    ///     .order(Order::Time)
    ///     .prefetch(10)
    ///     .options(QueueOptions { max_deliveries: 5, ..QueueOptions::default() });
    /// assert_eq!(s.topic, "prices");
    /// assert_eq!(s.name, "audit");
    /// assert!(s.options.durable && s.options.shared);
    /// assert_eq!(s.options.selector, "region = 'eu'");
    /// assert_eq!(s.options.queue.max_deliveries, 5);
    /// assert_eq!((s.ack, s.order, s.prefetch), (AckMode::Auto, Order::Time, 10));
    ///
    /// let plain = SubscribeTopic::new("prices");
    /// assert!(!plain.options.durable && plain.name.is_empty());
    /// assert_eq!((plain.ack, plain.order, plain.prefetch), (AckMode::Client, Order::Priority, 100));
    /// ```
    pub fn new(topic: impl Into<String>) -> Self {
        SubscribeTopic {
            topic: topic.into(),
            name: String::new(),
            options: SubscriptionOptions::default(),
            order: Order::Priority,
            ack: AckMode::Client,
            prefetch: DEFAULT_TOPIC_PREFETCH,
        }
    }

    /// The same subscription, durable under `name`: kept (with its backlog) while nobody
    /// consumes it, until unsubscribed.
    #[must_use]
    pub fn durable(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self.options.durable = true;
        self
    }

    /// The same subscription, shared: several sessions may consume it at once as competing
    /// consumers. With [`SubscribeTopic::durable`] it is a shared durable subscription; alone it
    /// needs a name, see [`SubscribeTopic::shared_as`].
    #[must_use]
    pub fn shared(mut self) -> Self {
        self.options.shared = true;
        self
    }

    /// A shared non-durable subscription named `name` (JMS 2.0's shared consumer): any number
    /// of sessions, on any node, consume it at once as competing consumers. It is made by its
    /// first consumer and removed, with what it still holds, when its last consumer ends.
    #[must_use]
    pub fn shared_as(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self.options.durable = false;
        self.options.shared = true;
        self
    }

    /// The same subscription, keeping only the messages `selector` is TRUE for (empty: all).
    #[must_use]
    pub fn with_selector(mut self, selector: impl Into<String>) -> Self {
        self.options.selector = selector.into();
        self
    }

    /// The same subscription with another ack mode.
    #[must_use]
    pub fn ack(mut self, ack: AckMode) -> Self {
        self.ack = ack;
        self
    }

    /// The same subscription with another delivery order.
    #[must_use]
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// The same subscription with another prefetch (0: create or check only, consume nothing).
    #[must_use]
    pub fn prefetch(mut self, prefetch: u32) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// The same subscription with these queue settings (maximum deliveries, dead-letter and
    /// expiry queues) for its queue. Kept from the first subscribe when it already exists.
    #[must_use]
    pub fn options(mut self, queue: QueueOptions) -> Self {
        self.options.queue = queue;
        self
    }
}

/// The prefetch [`SubscribeTopic::new`] starts with.
pub const DEFAULT_TOPIC_PREFETCH: u32 = 100;

/// A request, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Open a session.
    Connect(Connect),
    /// End the session; unsettled deliveries return to their queues.
    Disconnect,
    /// Liveness check, answered with `Pong`.
    Ping,
    /// The client's answer to an `AuthChallenge` during connect (SCRAM's client-final message).
    AuthResponse {
        /// The mechanism's message.
        data: String,
    },
    /// Create a queue.
    CreateQueue {
        /// Its name.
        name: String,
        /// Its settings.
        options: QueueOptions,
    },
    /// Delete a queue.
    DeleteQueue {
        /// Its name.
        name: String,
        /// Delete even when it holds messages (they are dropped).
        force: bool,
    },
    /// List every queue with its depth.
    ListQueues,
    /// Send one message to one or more queues, atomically.
    Send(OutgoingMessage),
    /// Send many messages; each succeeds or fails on its own.
    SendBatch(Vec<OutgoingMessage>),
    /// Publish many bodies to one topic, everything else shared (version 6); each body
    /// succeeds or fails on its own.
    PublishBatch(PublishBatch),
    /// Receive one message.
    Receive(Receive),
    /// Settle client-ack deliveries.
    Ack {
        /// Delivery ids.
        ids: Vec<DeliveryId>,
    },
    /// Return (or drop) client-ack deliveries.
    Nack {
        /// Delivery ids.
        ids: Vec<DeliveryId>,
        /// `true`: back to the queue, flagged redelivered; `false`: dropped.
        requeue: bool,
    },
    /// Names of the queues holding messages addressed to this client.
    WaitingQueues,
    /// Start a push subscription.
    Subscribe(Subscribe),
    /// Grant an auto-ack subscription more credit (client-ack subscriptions are credited by
    /// settling their deliveries).
    Credit {
        /// The subscription.
        subscription: SubscriptionId,
        /// How many more deliveries may be pushed.
        credit: u32,
    },
    /// End a subscription; its unsettled deliveries stay leased to the session.
    Cancel {
        /// The subscription.
        subscription: SubscriptionId,
    },
    /// Create a topic.
    CreateTopic {
        /// Its name.
        name: String,
    },
    /// Delete a topic and its subscriptions.
    DeleteTopic {
        /// Its name.
        name: String,
        /// Delete even when subscriptions hold messages (they are dropped).
        force: bool,
    },
    /// List every topic with its subscriptions.
    ListTopics,
    /// Subscribe to a topic.
    SubscribeTopic(SubscribeTopic),
    /// Remove a durable subscription and its backlog.
    Unsubscribe {
        /// The topic.
        topic: String,
        /// The subscription's name.
        name: String,
    },
    /// Begin a transaction: until commit or rollback, sends and publishes are held back and
    /// acks (and auto-ack takes) are settled only at commit.
    TxnBegin,
    /// Commit the transaction: all of its sends, publishes and acks take effect, atomically.
    TxnCommit,
    /// Roll the transaction back: its sends are dropped and the deliveries it acked return to
    /// their queues.
    TxnRollback,
}

fn put_order(out: &mut BytesMut, o: Order) {
    out.put_u8(match o {
        Order::Priority => 0,
        Order::Time => 1,
    });
}

fn put_ack(out: &mut BytesMut, a: AckMode) {
    out.put_u8(match a {
        AckMode::Auto => 0,
        AckMode::Client => 1,
    });
}

fn read_order(r: &mut Reader<'_>) -> Result<Order, WireError> {
    match r.u8()? {
        0 => Ok(Order::Priority),
        1 => Ok(Order::Time),
        v => Err(WireError::InvalidValue {
            field: "order",
            value: u64::from(v),
        }),
    }
}

fn read_ack(r: &mut Reader<'_>) -> Result<AckMode, WireError> {
    match r.u8()? {
        0 => Ok(AckMode::Auto),
        1 => Ok(AckMode::Client),
        v => Err(WireError::InvalidValue {
            field: "ack mode",
            value: u64::from(v),
        }),
    }
}

fn put_queue_options(out: &mut BytesMut, o: &QueueOptions) {
    out.put_u32_le(o.max_deliveries);
    put_opt_string(out, o.dead_letter_queue.as_deref());
    put_opt_string(out, o.expiry_queue.as_deref());
}

fn read_queue_options(r: &mut Reader<'_>) -> Result<QueueOptions, WireError> {
    Ok(QueueOptions {
        max_deliveries: r.u32()?,
        dead_letter_queue: r.opt_string("dead-letter queue")?,
        expiry_queue: r.opt_string("expiry queue")?,
    })
}

/// Writes an outgoing message (send payload, and each item of a batch).
pub fn put_outgoing(out: &mut BytesMut, m: &OutgoingMessage) {
    put_strings(out, &m.queues);
    put_opt_string(out, m.receiver.as_deref());
    // Neighbouring fixed-size fields go out as one slice each (one capacity check per run):
    // this runs once per message sent.
    let mut head = [0u8; 9];
    head[0] = m.priority;
    head[1..].copy_from_slice(&m.context.to_le_bytes());
    out.put_slice(&head);
    put_properties(out, &m.properties);
    put_bytes(out, &m.body);
    let mut tail = [0u8; 17];
    tail[..8].copy_from_slice(&m.ttl_ms.to_le_bytes());
    tail[8..16].copy_from_slice(&m.delay_ms.to_le_bytes());
    tail[16] = if m.persistent { 0 } else { FLAG_NON_PERSISTENT };
    out.put_slice(&tail);
    put_string(out, m.topic.as_deref().unwrap_or(""));
}

/// Outgoing message flag: kept in memory only.
const FLAG_NON_PERSISTENT: u8 = 0x01;

/// The number of bytes [`put_outgoing`] writes for `m`, without writing them: lets a sender
/// split a batch into frames that fit the broker's frame limit.
pub fn outgoing_encoded_len(m: &OutgoingMessage) -> usize {
    let string = |s: &str| 2 + fitting(s).len();
    let queues: usize = m.queues.iter().map(|q| string(q)).sum();
    let receiver = 1 + m.receiver.as_deref().map_or(0, string);
    let properties: usize = m
        .properties
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
        .sum();
    let topic = string(m.topic.as_deref().unwrap_or(""));
    2 + queues + receiver + 1 + 8 + 2 + properties + 4 + m.body.len() + 8 + 8 + 1 + topic
}

/// Reads an outgoing message.
pub fn read_outgoing(r: &mut Reader<'_>) -> Result<OutgoingMessage, WireError> {
    read_outgoing_after(r, None)
}

/// [`read_outgoing`] for the message after `prev` in a batch, whose names it likely repeats.
fn read_outgoing_after(
    r: &mut Reader<'_>,
    prev: Option<&OutgoingMessage>,
) -> Result<OutgoingMessage, WireError> {
    // Runs of fixed-size fields are taken whole, as `put_outgoing` writes them.
    let queues = r.strings("queue name")?;
    let receiver = r.opt_string("receiver")?;
    let mut head = r.fixed::<9>()?;
    let (priority, context) = (head.u8(), head.u64());
    let properties = r.properties()?;
    let body = r.bytes()?;
    let mut tail = r.fixed::<17>()?;
    Ok(OutgoingMessage {
        queues,
        receiver,
        priority,
        context,
        properties,
        body,
        ttl_ms: tail.u64(),
        delay_ms: tail.u64(),
        persistent: match tail.u8() {
            0 => true,
            FLAG_NON_PERSISTENT => false,
            v => {
                return Err(WireError::InvalidValue {
                    field: "message flags",
                    value: u64::from(v),
                })
            }
        },
        topic: Some(r.name_like("topic name", prev.and_then(|p| p.topic.as_ref()))?)
            .filter(|t| !t.is_empty()),
    })
}

/// Smallest encoding of an outgoing message: counts and fixed fields only.
const MIN_OUTGOING_BYTES: usize = 2 + 1 + 1 + 8 + 2 + 4 + 8 + 8 + 1 + 2;

/// Decodes a connect payload.
///
/// The version is the first field of the first frame in every protocol version, now and later,
/// so that a broker can always answer a client it cannot understand with `UnsupportedVersion`
/// instead of closing the connection on a frame it cannot parse. So when the version is not one
/// this build speaks ([`crate::speaks_version`]: versions 4 to 7 share this layout), the rest
/// of the payload is decoded only if it happens to have this layout; otherwise the name and credentials come back empty and the caller, which
/// must check the version first, refuses the session.
fn decode_connect(r: &mut Reader<'_>) -> Result<Request, WireError> {
    let version = r.u16()?;
    let rest = (|| {
        let client = r.string("client name")?;
        let mechanism = r.string("mechanism")?;
        let credentials = r.string("credentials")?;
        let keepalive_ms = r.u32()?;
        let flags = r.u32()?;
        r.finish()?;
        Ok::<_, WireError>(Connect {
            version,
            client,
            mechanism,
            credentials,
            keepalive_ms,
            flags,
        })
    })();
    match rest {
        Ok(c) => Ok(Request::Connect(c)),
        Err(_) if !crate::version::speaks_version(version) => Ok(Request::Connect(Connect {
            version,
            client: String::new(),
            mechanism: String::new(),
            credentials: String::new(),
            keepalive_ms: 0,
            flags: 0,
        })),
        Err(e) => Err(e),
    }
}

impl Request {
    /// The frame kind of this request.
    pub fn kind(&self) -> FrameKind {
        match self {
            Request::Connect(_) => FrameKind::Connect,
            Request::Disconnect => FrameKind::Disconnect,
            Request::Ping => FrameKind::Ping,
            Request::AuthResponse { .. } => FrameKind::AuthResponse,
            Request::CreateQueue { .. } => FrameKind::CreateQueue,
            Request::DeleteQueue { .. } => FrameKind::DeleteQueue,
            Request::ListQueues => FrameKind::ListQueues,
            Request::Send(_) => FrameKind::Send,
            Request::SendBatch(_) => FrameKind::SendBatch,
            Request::PublishBatch(_) => FrameKind::PublishBatch,
            Request::Receive(_) => FrameKind::Receive,
            Request::Ack { .. } => FrameKind::Ack,
            Request::Nack { .. } => FrameKind::Nack,
            Request::WaitingQueues => FrameKind::WaitingQueues,
            Request::Subscribe(_) => FrameKind::Subscribe,
            Request::Credit { .. } => FrameKind::Credit,
            Request::Cancel { .. } => FrameKind::Cancel,
            Request::CreateTopic { .. } => FrameKind::CreateTopic,
            Request::DeleteTopic { .. } => FrameKind::DeleteTopic,
            Request::ListTopics => FrameKind::ListTopics,
            Request::SubscribeTopic(_) => FrameKind::SubscribeTopic,
            Request::Unsubscribe { .. } => FrameKind::Unsubscribe,
            Request::TxnBegin => FrameKind::TxnBegin,
            Request::TxnCommit => FrameKind::TxnCommit,
            Request::TxnRollback => FrameKind::TxnRollback,
        }
    }

    /// Appends this request as one frame with `request_id` to `out`.
    pub fn encode(&self, request_id: u32, out: &mut BytesMut) {
        let start = begin_frame(out, self.kind(), request_id);
        match self {
            Request::Connect(c) => {
                out.put_u16_le(c.version);
                put_string(out, &c.client);
                put_string(out, &c.mechanism);
                put_string(out, &c.credentials);
                out.put_u32_le(c.keepalive_ms);
                out.put_u32_le(c.flags);
            }
            Request::Disconnect
            | Request::Ping
            | Request::ListQueues
            | Request::WaitingQueues
            | Request::ListTopics
            | Request::TxnBegin
            | Request::TxnCommit
            | Request::TxnRollback => {}
            Request::AuthResponse { data } => put_string(out, data),
            Request::CreateQueue { name, options } => {
                put_string(out, name);
                put_queue_options(out, options);
            }
            Request::DeleteQueue { name, force } => {
                put_string(out, name);
                put_bool(out, *force);
            }
            Request::Send(m) => put_outgoing(out, m),
            Request::SendBatch(items) => {
                out.put_u32_le(items.len() as u32);
                for m in items {
                    put_outgoing(out, m);
                }
            }
            Request::PublishBatch(b) => put_publish_batch(out, b),
            Request::Receive(r) => {
                match &r.source {
                    Source::Queue(q) => {
                        out.put_u8(0);
                        put_string(out, q);
                    }
                    Source::Sender(s) => {
                        out.put_u8(1);
                        put_string(out, s);
                    }
                }
                put_order(out, r.order);
                out.put_u8(match r.mode {
                    ReceiveMode::Take => 0,
                    ReceiveMode::Peek => 1,
                });
                put_ack(out, r.ack);
                out.put_u32_le(r.wait_ms);
                put_string(out, &r.selector);
            }
            Request::Ack { ids } => put_u64s(out, ids),
            Request::Nack { ids, requeue } => {
                put_u64s(out, ids);
                put_bool(out, *requeue);
            }
            Request::Subscribe(s) => {
                put_string(out, &s.queue);
                put_order(out, s.order);
                put_ack(out, s.ack);
                out.put_u32_le(s.prefetch);
                put_string(out, &s.selector);
            }
            Request::Credit {
                subscription,
                credit,
            } => {
                out.put_u64_le(*subscription);
                out.put_u32_le(*credit);
            }
            Request::Cancel { subscription } => out.put_u64_le(*subscription),
            Request::CreateTopic { name } => put_string(out, name),
            Request::DeleteTopic { name, force } => {
                put_string(out, name);
                put_bool(out, *force);
            }
            Request::SubscribeTopic(s) => {
                put_string(out, &s.topic);
                put_string(out, &s.name);
                put_bool(out, s.options.durable);
                put_bool(out, s.options.shared);
                put_string(out, &s.options.selector);
                put_queue_options(out, &s.options.queue);
                put_order(out, s.order);
                put_ack(out, s.ack);
                out.put_u32_le(s.prefetch);
            }
            Request::Unsubscribe { topic, name } => {
                put_string(out, topic);
                put_string(out, name);
            }
        }
        end_frame(out, start);
    }

    /// Decodes a request frame. Unknown kinds (and response kinds) give
    /// [`WireError::UnknownKind`]; every other error means the frame is malformed.
    ///
    /// A `Connect` of a version this build does not speak decodes from its version field
    /// alone when the rest does not parse, so the broker can refuse it with `UnsupportedVersion`:
    /// check the version before using the other fields.
    pub fn decode(frame: &RawFrame) -> Result<Request, WireError> {
        let kind = FrameKind::from_u16(frame.kind).ok_or(WireError::UnknownKind(frame.kind))?;
        let mut r = Reader::new(&frame.payload);
        let req = match kind {
            FrameKind::Connect => return decode_connect(&mut r),
            FrameKind::Disconnect => Request::Disconnect,
            FrameKind::Ping => Request::Ping,
            FrameKind::AuthResponse => Request::AuthResponse {
                data: r.string("authentication response")?,
            },
            FrameKind::CreateQueue => Request::CreateQueue {
                name: r.string("queue name")?,
                options: read_queue_options(&mut r)?,
            },
            FrameKind::DeleteQueue => Request::DeleteQueue {
                name: r.string("queue name")?,
                force: r.bool("force")?,
            },
            FrameKind::ListQueues => Request::ListQueues,
            FrameKind::Send => Request::Send(read_outgoing(&mut r)?),
            FrameKind::SendBatch => {
                let n = r.count32("batch", MIN_OUTGOING_BYTES)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = read_outgoing_after(&mut r, items.last())?;
                    items.push(m);
                }
                Request::SendBatch(items)
            }
            FrameKind::PublishBatch => Request::PublishBatch(read_publish_batch(&mut r)?),
            FrameKind::Receive => {
                let source = match r.u8()? {
                    0 => Source::Queue(r.string("queue name")?),
                    1 => Source::Sender(r.string("sender name")?),
                    v => {
                        return Err(WireError::InvalidValue {
                            field: "source",
                            value: u64::from(v),
                        })
                    }
                };
                let order = read_order(&mut r)?;
                let mode = match r.u8()? {
                    0 => ReceiveMode::Take,
                    1 => ReceiveMode::Peek,
                    v => {
                        return Err(WireError::InvalidValue {
                            field: "receive mode",
                            value: u64::from(v),
                        })
                    }
                };
                Request::Receive(Receive {
                    source,
                    order,
                    mode,
                    ack: read_ack(&mut r)?,
                    wait_ms: r.u32()?,
                    selector: r.string("selector")?,
                })
            }
            FrameKind::Ack => Request::Ack {
                ids: r.u64s("delivery ids")?,
            },
            FrameKind::Nack => Request::Nack {
                ids: r.u64s("delivery ids")?,
                requeue: r.bool("requeue")?,
            },
            FrameKind::WaitingQueues => Request::WaitingQueues,
            FrameKind::Subscribe => Request::Subscribe(Subscribe {
                queue: r.string("queue name")?,
                order: read_order(&mut r)?,
                ack: read_ack(&mut r)?,
                prefetch: r.u32()?,
                selector: r.string("selector")?,
            }),
            FrameKind::Credit => Request::Credit {
                subscription: r.u64()?,
                credit: r.u32()?,
            },
            FrameKind::Cancel => Request::Cancel {
                subscription: r.u64()?,
            },
            FrameKind::CreateTopic => Request::CreateTopic {
                name: r.string("topic name")?,
            },
            FrameKind::DeleteTopic => Request::DeleteTopic {
                name: r.string("topic name")?,
                force: r.bool("force")?,
            },
            FrameKind::ListTopics => Request::ListTopics,
            FrameKind::SubscribeTopic => Request::SubscribeTopic(SubscribeTopic {
                topic: r.string("topic name")?,
                name: r.string("subscription name")?,
                options: SubscriptionOptions {
                    durable: r.bool("durable")?,
                    shared: r.bool("shared")?,
                    selector: r.string("selector")?,
                    queue: read_queue_options(&mut r)?,
                },
                order: read_order(&mut r)?,
                ack: read_ack(&mut r)?,
                prefetch: r.u32()?,
            }),
            FrameKind::Unsubscribe => Request::Unsubscribe {
                topic: r.string("topic name")?,
                name: r.string("subscription name")?,
            },
            FrameKind::TxnBegin => Request::TxnBegin,
            FrameKind::TxnCommit => Request::TxnCommit,
            FrameKind::TxnRollback => Request::TxnRollback,
            other => return Err(WireError::UnknownKind(other as u16)),
        };
        r.finish()?;
        Ok(req)
    }
}
