//! Shared by the protocol tests: sample values of every request and response variant, proptest
//! strategies that generate arbitrary ones, and small helpers.
#![allow(dead_code)]
// each test binary uses a different subset
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::{Bytes, BytesMut};
use ferry_protocol::requests::{Connect, Receive, Subscribe, SubscribeTopic};
use ferry_protocol::responses::Connected;
use ferry_protocol::{
    split_frame, AckMode, Delivery, ErrorCode, ErrorReply, FrameKind, Limits, Message, Name, Order,
    OutgoingMessage, PropertyValue, QueueInfo, QueueOptions, RawFrame, ReceiveMode, Request,
    Response, Source, SubscriptionInfo, SubscriptionOptions, TopicInfo,
};
use proptest::prelude::*;

pub mod pushes;

/// The request id every sample frame is encoded with.
pub const RID: u32 = 7;

/// A frame limit comfortably above every sample.
pub const LIMIT: u32 = 1 << 20;

/// Parses hex digits, ignoring whitespace and `|` (used to separate fields in pinned layouts).
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'|')
        .collect();
    assert!(
        digits.len().is_multiple_of(2),
        "odd number of hex digits in {s:?}"
    );
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// Encodes a request as one frame.
pub fn req_bytes(r: &Request, id: u32) -> Vec<u8> {
    let mut out = BytesMut::new();
    r.encode(id, &mut out);
    out.to_vec()
}

/// Encodes a response as one frame.
pub fn resp_bytes(r: &Response, id: u32) -> Vec<u8> {
    let mut out = BytesMut::new();
    r.encode(id, &mut out);
    out.to_vec()
}

/// Cuts exactly one whole frame out of `bytes`, asserting nothing is left over.
pub fn one_frame(bytes: &[u8]) -> RawFrame {
    let mut buf = BytesMut::from(bytes);
    let frame = split_frame(&mut buf, LIMIT)
        .expect("valid frame")
        .expect("complete frame");
    assert!(buf.is_empty(), "{} bytes left after the frame", buf.len());
    frame
}

/// A message with every optional field set.
pub fn full_message() -> OutgoingMessage {
    OutgoingMessage {
        queues: vec!["a".into(), "b".into()],
        topic: None,
        persistent: true,
        receiver: Some("r".into()),
        priority: 7,
        context: 0x0102_0304_0506_0708,
        properties: vec![("k".into(), PropertyValue::Int(-2))].into(),
        body: Bytes::from_static(b"hi"),
        ttl_ms: 30_000,
        delay_ms: 500,
    }
}

/// A message with one property of each remaining type.
pub fn typed_properties_message() -> OutgoingMessage {
    OutgoingMessage {
        queues: vec!["q".into()],
        topic: None,
        persistent: true,
        receiver: None,
        priority: 10,
        context: 0,
        properties: vec![
            ("b".into(), PropertyValue::Bool(true)),
            ("f".into(), PropertyValue::Float(1.5)),
            ("s".into(), PropertyValue::Str("ok".into())),
        ]
        .into(),
        body: Bytes::new(),
        ttl_ms: 0,
        delay_ms: 0,
    }
}

/// A non-persistent message published to a topic.
pub fn topic_message() -> OutgoingMessage {
    OutgoingMessage::to_topic("t", Bytes::from_static(b"p")).non_persistent()
}

/// A delivery as a client-ack receive returns it.
pub fn sample_delivery() -> Delivery {
    Delivery {
        delivery_id: 0x11,
        message: Message {
            id: 0x22,
            queue: "q".into(),
            sender: "s".into(),
            receiver: None,
            priority: 5,
            context: 0,
            properties: vec![].into(),
            body: Bytes::from_static(b"x"),
            created_at: 1000,
            delivery_count: 1,
            expires_at: 31_000,
        },
    }
}

/// A pushed auto-ack delivery with a receiver and a property.
pub fn pushed_delivery() -> Delivery {
    Delivery {
        delivery_id: 0,
        message: Message {
            id: 7,
            queue: "q".into(),
            sender: "s".into(),
            receiver: Some("me".into()),
            priority: 9,
            context: 1,
            properties: vec![("n".into(), PropertyValue::Str("v".into()))].into(),
            body: Bytes::new(),
            created_at: 0,
            delivery_count: 0,
            expires_at: 0,
        },
    }
}

/// Two auto-ack deliveries alike but for their consecutive ids and their bodies: a
/// `DeliverRun`'s (addressed to 'me', delivered once before, expiring).
pub fn run_deliveries() -> Vec<Delivery> {
    let first = Message {
        body: Bytes::from_static(b"a"),
        delivery_count: 1,
        expires_at: 9,
        ..pushed_delivery().message
    };
    let second = Message {
        id: 8,
        body: Bytes::from_static(b"bc"),
        ..first.clone()
    };
    [first, second]
        .into_iter()
        .map(|message| Delivery {
            delivery_id: 0,
            message,
        })
        .collect()
}

/// Two pushed deliveries sharing queue, sender and property: a `DeliverBatch`'s; the second
/// addressed and client-ack.
pub fn batched_deliveries() -> Vec<Delivery> {
    let first = Message {
        body: Bytes::from_static(b"a"),
        ..pushed_delivery().message
    };
    let mut second = first.clone();
    second.id = 8;
    second.receiver = Some("me".into());
    second.body = Bytes::new();
    second.delivery_count = 1;
    vec![
        Delivery {
            delivery_id: 0,
            message: Message {
                receiver: None,
                ..first
            },
        },
        Delivery {
            delivery_id: 2,
            message: second,
        },
    ]
}

/// The requests whose byte layout is pinned in `layout.rs`: one of every variant, and a second
/// `Receive` to pin the other value of each of its enums.
pub fn pinned_requests() -> Vec<Request> {
    vec![
        Request::Connect(Connect {
            version: 4,
            client: "app".into(),
            mechanism: "SCRAM-SHA-256".into(),
            credentials: "n,,n=app,r=abc".into(),
            keepalive_ms: 30_000,
            flags: ferry_protocol::requests::CONNECT_EPHEMERAL,
        }),
        Request::Disconnect,
        Request::Ping,
        Request::AuthResponse {
            data: "c=biws,r=abcdef,p=cHJvb2Y=".into(),
        },
        Request::CreateQueue {
            name: "q1".into(),
            options: ferry_protocol::QueueOptions {
                max_deliveries: 5,
                dead_letter_queue: Some("d".into()),
                expiry_queue: None,
            },
        },
        Request::DeleteQueue {
            name: "q1".into(),
            force: true,
        },
        Request::ListQueues,
        Request::Send(full_message()),
        Request::SendBatch(vec![
            OutgoingMessage::new("q", Bytes::from_static(b"x")),
            typed_properties_message(),
        ]),
        Request::PublishBatch(
            ferry_protocol::PublishBatch::new(
                "t",
                vec![Bytes::from_static(b"a"), Bytes::from_static(b"bc")],
            )
            .non_persistent(),
        ),
        Request::Send(topic_message()),
        Request::Receive(Receive {
            source: Source::Queue("q".into()),
            order: Order::Priority,
            mode: ReceiveMode::Take,
            ack: AckMode::Client,
            wait_ms: 1000,
            selector: String::new(),
        }),
        Request::Receive(Receive {
            source: Source::Sender("s".into()),
            order: Order::Time,
            mode: ReceiveMode::Peek,
            ack: AckMode::Auto,
            wait_ms: 0,
            selector: "a=1".into(),
        }),
        Request::Ack {
            ids: vec![1, 0x100],
        },
        Request::Nack {
            ids: vec![3],
            requeue: false,
        },
        Request::WaitingQueues,
        Request::Subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 100,
            selector: "a=1".into(),
        }),
        Request::Credit {
            subscription: 2,
            credit: 50,
        },
        Request::Cancel { subscription: 2 },
        Request::CreateTopic { name: "t".into() },
        Request::DeleteTopic {
            name: "t".into(),
            force: true,
        },
        Request::ListTopics,
        Request::SubscribeTopic(SubscribeTopic::new("t")),
        Request::SubscribeTopic(
            SubscribeTopic::new("t")
                .durable("d")
                .shared()
                .with_selector("a=1")
                .ack(AckMode::Auto)
                .order(Order::Time)
                .prefetch(0)
                .options(QueueOptions {
                    max_deliveries: 3,
                    dead_letter_queue: Some("x".into()),
                    expiry_queue: Some("y".into()),
                }),
        ),
        Request::Unsubscribe {
            topic: "t".into(),
            name: "d".into(),
        },
        Request::TxnBegin,
        Request::TxnCommit,
        Request::TxnRollback,
    ]
}

/// The responses whose byte layout is pinned in `layout.rs`: one of every variant, and both
/// shapes of `Received`.
pub fn pinned_responses() -> Vec<Response> {
    vec![
        Response::Connected(Connected {
            version: 4,
            client: "app".into(),
            limits: Limits::DEFAULT,
            keepalive_ms: 30_000,
            auth: "v=c2ln".into(),
        }),
        Response::AuthChallenge {
            data: "r=abcdef,s=c2FsdA==,i=4096".into(),
        },
        Response::Ok,
        Response::error(ErrorCode::QueueNotFound, "no q"),
        Response::Pong,
        Response::Queues(vec![QueueInfo {
            name: "q".into(),
            ready: 5,
            in_flight: 1,
        }]),
        Response::Sent { id: 42 },
        Response::PublishedRun {
            first_id: 9,
            count: 3,
        },
        Response::BatchSent(vec![
            Ok(9),
            Err(ErrorReply::new(ErrorCode::TooLarge, "big")),
        ]),
        Response::Received(None),
        Response::Received(Some(sample_delivery())),
        Response::WaitingQueues(vec!["a".into(), "bc".into()]),
        Response::Subscribed { subscription: 3 },
        Response::Deliver {
            subscription: 3,
            delivery: pushed_delivery(),
        },
        Response::SubscriptionClosed {
            subscription: 3,
            error: ErrorReply::new(ErrorCode::QueueNotFound, "gone"),
        },
        Response::DeliverBatch {
            subscription: 3,
            deliveries: batched_deliveries(),
        },
        Response::DeliverRun {
            subscription: 3,
            deliveries: run_deliveries(),
        },
        Response::Topics(vec![TopicInfo {
            name: "t".into(),
            subscriptions: vec![SubscriptionInfo {
                name: "d".into(),
                durable: true,
                shared: false,
                selector: "a=1".into(),
                ready: 2,
                in_flight: 1,
            }],
        }]),
        Response::TopicSubscribed {
            subscription: 4,
            queue: "t:d".into(),
        },
        Response::Committed { ids: vec![5, 6] },
    ]
}

/// Every pinned sample plus edge cases: empty lists, extreme numbers, non-ASCII text.
pub fn all_requests() -> Vec<Request> {
    let mut v = pinned_requests();
    v.extend([
        Request::Connect(Connect {
            version: u16::MAX,
            client: String::new(),
            mechanism: "ünknown".into(),
            credentials: "päss wörd ✓".into(),
            keepalive_ms: u32::MAX,
            flags: u32::MAX,
        }),
        Request::Send(OutgoingMessage {
            queues: vec![],
            topic: None,
            persistent: true,
            receiver: Some(String::new()),
            priority: 0,
            context: u64::MAX,
            properties: vec![
                ("min".into(), PropertyValue::Int(i64::MIN)),
                ("inf".into(), PropertyValue::Float(f64::NEG_INFINITY)),
                ("no".into(), PropertyValue::Bool(false)),
                ("".into(), PropertyValue::Str(String::new())),
            ]
            .into(),
            body: Bytes::from(vec![0xAB; 3000]),
            ttl_ms: u64::MAX,
            delay_ms: u64::MAX,
        }),
        Request::SendBatch(vec![]),
        Request::PublishBatch(ferry_protocol::PublishBatch {
            topic: "ünï".into(),
            priority: u8::MAX,
            ttl_ms: u64::MAX,
            delay_ms: u64::MAX,
            persistent: true,
            properties: vec![("n".into(), PropertyValue::Str("é".into()))].into(),
            bodies: vec![Bytes::new(), Bytes::from(vec![0xCD; 3000])].into(),
        }),
        Request::Ack { ids: vec![] },
        Request::Nack {
            ids: vec![u64::MAX, 0],
            requeue: true,
        },
        Request::Subscribe(Subscribe {
            queue: "orders.eu-1_x".into(),
            order: Order::Priority,
            ack: AckMode::Client,
            prefetch: u32::MAX,
            selector: String::new(),
        }),
        Request::Receive(Receive {
            source: Source::Queue("q".into()),
            order: Order::Time,
            mode: ReceiveMode::Take,
            ack: AckMode::Client,
            wait_ms: u32::MAX,
            selector: "région = 'é' AND price BETWEEN 1 AND 2".into(),
        }),
        Request::SendBatch(vec![
            topic_message(),
            full_message(),
            OutgoingMessage::to_topic("ünï", Bytes::new()),
        ]),
        Request::CreateTopic {
            name: String::new(),
        },
        Request::DeleteTopic {
            name: "t".into(),
            force: false,
        },
        Request::SubscribeTopic(SubscribeTopic {
            topic: "ü".into(),
            name: "~c.1".into(),
            options: SubscriptionOptions {
                durable: false,
                shared: true,
                selector: "région = 'é'".into(),
                queue: QueueOptions {
                    max_deliveries: u32::MAX,
                    dead_letter_queue: None,
                    expiry_queue: Some(String::new()),
                },
            },
            order: Order::Priority,
            ack: AckMode::Client,
            prefetch: u32::MAX,
        }),
        Request::Unsubscribe {
            topic: String::new(),
            name: String::new(),
        },
    ]);
    v
}

/// Every pinned sample plus edge cases.
pub fn all_responses() -> Vec<Response> {
    let mut v = pinned_responses();
    v.extend([
        Response::Connected(Connected {
            version: 9,
            keepalive_ms: u32::MAX,
            auth: String::new(),
            client: "ünïcode".into(),
            limits: Limits {
                max_frame_bytes: u32::MAX,
                max_body_bytes: 0,
                max_name_len: u16::MAX,
                max_connections: 1,
                max_queues: 2,
                max_in_flight_per_session: 3,
                max_prefetch: 4,
                max_batch: 5,
                max_queues_per_send: 6,
                max_properties: 7,
                lease_ms: 8,
            },
        }),
        Response::Queues(vec![]),
        Response::BatchSent(vec![]),
        Response::WaitingQueues(vec![]),
        Response::Error(ErrorReply::new(ErrorCode::LimitExceeded, "")),
        Response::Topics(vec![]),
        Response::Topics(vec![
            TopicInfo {
                name: "empty".into(),
                subscriptions: vec![],
            },
            TopicInfo {
                name: "ü".into(),
                subscriptions: vec![
                    SubscriptionInfo {
                        name: "~c.1".into(),
                        durable: false,
                        shared: false,
                        selector: String::new(),
                        ready: u64::MAX,
                        in_flight: 0,
                    },
                    SubscriptionInfo {
                        name: "s".into(),
                        durable: true,
                        shared: true,
                        selector: "x > 1".into(),
                        ready: 0,
                        in_flight: u64::MAX,
                    },
                ],
            },
        ]),
        Response::TopicSubscribed {
            subscription: 0,
            queue: String::new(),
        },
        Response::Committed { ids: vec![] },
        Response::Committed {
            ids: vec![0, u64::MAX],
        },
        Response::Deliver {
            subscription: u64::MAX,
            delivery: Delivery {
                delivery_id: u64::MAX,
                message: Message {
                    body: Bytes::from(vec![1u8; 5000]),
                    delivery_count: u32::MAX,
                    created_at: u64::MAX,
                    expires_at: u64::MAX,
                    ..full_delivery_message()
                },
            },
        },
        Response::DeliverBatch {
            subscription: u64::MAX,
            deliveries: vec![
                Delivery {
                    delivery_id: u64::MAX,
                    message: Message {
                        body: Bytes::from(vec![1u8; 5000]),
                        delivery_count: u32::MAX,
                        created_at: u64::MAX,
                        expires_at: u64::MAX,
                        ..full_delivery_message()
                    },
                },
                Delivery {
                    delivery_id: 1,
                    message: Message {
                        receiver: None,
                        ..full_delivery_message()
                    },
                },
            ],
        },
    ]);
    v.push(Response::PublishedRun {
        first_id: u64::MAX - 1,
        count: 2,
    });
    // A run at the ends of the number ranges, without a receiver, one large body.
    v.push(Response::DeliverRun {
        subscription: u64::MAX,
        deliveries: [u64::MAX - 2, u64::MAX - 1, u64::MAX]
            .into_iter()
            .map(|id| Delivery {
                delivery_id: 0,
                message: Message {
                    id,
                    receiver: None,
                    body: Bytes::from(vec![id as u8; if id == u64::MAX { 5000 } else { 1 }]),
                    delivery_count: u32::MAX,
                    created_at: u64::MAX,
                    expires_at: u64::MAX,
                    ..full_delivery_message()
                },
            })
            .collect(),
    });
    v.extend(ErrorCode::ALL.iter().map(|c| Response::error(*c, c.name())));
    v
}

fn full_delivery_message() -> Message {
    Message {
        id: 1,
        queue: "q".into(),
        sender: "s".into(),
        receiver: Some("r".into()),
        priority: 1,
        context: 2,
        properties: vec![
            ("a".into(), PropertyValue::Bool(true)),
            ("b".into(), PropertyValue::Int(3)),
            ("c".into(), PropertyValue::Float(-0.25)),
            ("d".into(), PropertyValue::Str("e".into())),
        ]
        .into(),
        body: Bytes::new(),
        created_at: 3,
        delivery_count: 4,
        expires_at: 5,
    }
}

// ---- proptest strategies ----

fn name() -> impl Strategy<Value = String> {
    // Any Unicode, not only valid names: the codec carries whatever it is given.
    ".{0,12}"
}

fn property_value() -> impl Strategy<Value = PropertyValue> {
    prop_oneof![
        any::<bool>().prop_map(PropertyValue::Bool),
        any::<i64>().prop_map(PropertyValue::Int),
        // NaN is carried bit for bit but is not equal to itself, which a roundtrip test needs.
        any::<f64>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(PropertyValue::Float),
        name().prop_map(PropertyValue::Str),
    ]
}

fn properties() -> impl Strategy<Value = Vec<(String, PropertyValue)>> {
    prop::collection::vec((name(), property_value()), 0..4)
}

fn body() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

/// Any outgoing message.
pub fn outgoing() -> impl Strategy<Value = OutgoingMessage> {
    (
        prop::collection::vec(name(), 0..4),
        prop::option::of(name()),
        any::<u8>(),
        any::<u64>(),
        properties(),
        body(),
        (any::<u64>(), any::<u64>()),
        // An empty topic is "none" on the wire, so a generated one is never empty.
        (prop::option::of(".{1,12}"), any::<bool>()),
    )
        .prop_map(
            |(
                queues,
                receiver,
                priority,
                context,
                properties,
                body,
                (ttl_ms, delay_ms),
                (topic, persistent),
            )| {
                OutgoingMessage {
                    queues,
                    topic: topic.map(Name::from),
                    persistent,
                    receiver,
                    priority,
                    context,
                    properties: properties.into(),
                    body,
                    ttl_ms,
                    delay_ms,
                }
            },
        )
}

/// Selector text: empty (no selector) or any string, the protocol does not parse it.
fn selector() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), any::<String>()]
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::Priority), Just(Order::Time)]
}

fn ack_mode() -> impl Strategy<Value = AckMode> {
    prop_oneof![Just(AckMode::Auto), Just(AckMode::Client)]
}

/// Any request.
pub fn request() -> impl Strategy<Value = Request> {
    let ids = || prop::collection::vec(any::<u64>(), 0..8);
    prop_oneof![
        (
            any::<u16>(),
            name(),
            name(),
            name(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(version, client, mechanism, credentials, keepalive_ms, flags)| {
                    Request::Connect(Connect {
                        version,
                        client,
                        mechanism,
                        credentials,
                        keepalive_ms,
                        flags,
                    })
                }
            ),
        Just(Request::Disconnect),
        Just(Request::Ping),
        name().prop_map(|data| Request::AuthResponse { data }),
        (
            name(),
            any::<u32>(),
            prop::option::of(name()),
            prop::option::of(name()),
        )
            .prop_map(|(name, max_deliveries, dead_letter_queue, expiry_queue)| {
                Request::CreateQueue {
                    name,
                    options: ferry_protocol::QueueOptions {
                        max_deliveries,
                        dead_letter_queue,
                        expiry_queue,
                    },
                }
            }),
        (name(), any::<bool>()).prop_map(|(name, force)| Request::DeleteQueue { name, force }),
        Just(Request::ListQueues),
        outgoing().prop_map(Request::Send),
        prop::collection::vec(outgoing(), 0..4).prop_map(Request::SendBatch),
        (
            name(),
            any::<u8>(),
            (any::<u64>(), any::<u64>()),
            any::<bool>(),
            properties(),
            prop::collection::vec(body(), 1..4),
        )
            .prop_map(
                |(topic, priority, (ttl_ms, delay_ms), persistent, properties, bodies)| {
                    Request::PublishBatch(ferry_protocol::PublishBatch {
                        topic: topic.into(),
                        priority,
                        ttl_ms,
                        delay_ms,
                        persistent,
                        properties: properties.into(),
                        bodies: bodies.into(),
                    })
                }
            ),
        (
            prop_oneof![
                name().prop_map(Source::Queue),
                name().prop_map(Source::Sender)
            ],
            order(),
            prop_oneof![Just(ReceiveMode::Take), Just(ReceiveMode::Peek)],
            ack_mode(),
            any::<u32>(),
            selector(),
        )
            .prop_map(|(source, order, mode, ack, wait_ms, selector)| {
                Request::Receive(Receive {
                    source,
                    order,
                    mode,
                    ack,
                    wait_ms,
                    selector,
                })
            }),
        ids().prop_map(|ids| Request::Ack { ids }),
        (ids(), any::<bool>()).prop_map(|(ids, requeue)| Request::Nack { ids, requeue }),
        Just(Request::WaitingQueues),
        (name(), order(), ack_mode(), any::<u32>(), selector()).prop_map(
            |(queue, order, ack, prefetch, selector)| {
                Request::Subscribe(Subscribe {
                    queue,
                    order,
                    ack,
                    prefetch,
                    selector,
                })
            }
        ),
        (any::<u64>(), any::<u32>()).prop_map(|(subscription, credit)| Request::Credit {
            subscription,
            credit,
        }),
        any::<u64>().prop_map(|subscription| Request::Cancel { subscription }),
        name().prop_map(|name| Request::CreateTopic { name }),
        (name(), any::<bool>()).prop_map(|(name, force)| Request::DeleteTopic { name, force }),
        Just(Request::ListTopics),
        subscribe_topic().prop_map(Request::SubscribeTopic),
        (name(), name()).prop_map(|(topic, name)| Request::Unsubscribe { topic, name }),
        Just(Request::TxnBegin),
        Just(Request::TxnCommit),
        Just(Request::TxnRollback),
    ]
}

fn queue_options() -> impl Strategy<Value = QueueOptions> {
    (
        any::<u32>(),
        prop::option::of(name()),
        prop::option::of(name()),
    )
        .prop_map(
            |(max_deliveries, dead_letter_queue, expiry_queue)| QueueOptions {
                max_deliveries,
                dead_letter_queue,
                expiry_queue,
            },
        )
}

/// Any topic subscription request.
pub fn subscribe_topic() -> impl Strategy<Value = SubscribeTopic> {
    (
        (name(), name()),
        (any::<bool>(), any::<bool>(), selector(), queue_options()),
        (order(), ack_mode(), any::<u32>()),
    )
        .prop_map(
            |((topic, name), (durable, shared, selector, queue), (order, ack, prefetch))| {
                SubscribeTopic {
                    topic,
                    name,
                    options: SubscriptionOptions {
                        durable,
                        shared,
                        selector,
                        queue,
                    },
                    order,
                    ack,
                    prefetch,
                }
            },
        )
}

fn error_reply() -> impl Strategy<Value = ErrorReply> {
    (prop::sample::select(ErrorCode::ALL.to_vec()), name())
        .prop_map(|(code, message)| ErrorReply { code, message })
}

/// Any delivery.
pub fn delivery() -> impl Strategy<Value = Delivery> {
    (
        any::<u64>(),
        any::<u64>(),
        (name(), name(), prop::option::of(name())),
        (any::<u8>(), any::<u64>(), any::<u64>(), any::<u32>()),
        properties(),
        body(),
    )
        .prop_map(
            |(
                delivery_id,
                id,
                (queue, sender, receiver),
                (priority, context, created_at, delivery_count),
                properties,
                body,
            )| Delivery {
                delivery_id,
                message: Message {
                    id,
                    queue: queue.into(),
                    sender: sender.into(),
                    receiver,
                    priority,
                    context,
                    properties: properties.into(),
                    body,
                    created_at,
                    delivery_count,
                    expires_at: created_at ^ id,
                },
            },
        )
}

/// Deliveries as a `DeliverBatch` carries them: one to four, all with the first's queue,
/// sender and properties, the rest of each their own.
pub fn delivery_batch() -> impl Strategy<Value = Vec<Delivery>> {
    prop::collection::vec(delivery(), 1..5).prop_map(|mut ds| {
        let shared = ds.first().map(|d| d.message.clone());
        if let Some(first) = shared {
            for d in &mut ds {
                d.message.queue = first.queue.clone();
                d.message.sender = first.sender.clone();
                d.message.properties = first.properties.clone();
            }
        }
        ds
    })
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        (any::<u32>(), any::<u32>(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (any::<u16>(), any::<u16>(), any::<u32>()),
    )
        .prop_map(|((a, b, c, d), (e, f, g, h), (i, j, k))| Limits {
            max_frame_bytes: a,
            max_body_bytes: b,
            max_name_len: c,
            max_connections: d,
            max_queues: e,
            max_in_flight_per_session: f,
            max_prefetch: g,
            max_batch: h,
            max_queues_per_send: i,
            max_properties: j,
            lease_ms: k,
        })
}

/// Any response.
pub fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        (any::<u16>(), name(), limits(), any::<u32>(), name()).prop_map(
            |(version, client, limits, keepalive_ms, auth)| {
                Response::Connected(Connected {
                    version,
                    client,
                    limits,
                    keepalive_ms,
                    auth,
                })
            }
        ),
        name().prop_map(|data| Response::AuthChallenge { data }),
        Just(Response::Ok),
        error_reply().prop_map(Response::Error),
        Just(Response::Pong),
        prop::collection::vec(
            (name(), any::<u64>(), any::<u64>()).prop_map(|(name, ready, in_flight)| QueueInfo {
                name,
                ready,
                in_flight
            }),
            0..4
        )
        .prop_map(Response::Queues),
        any::<u64>().prop_map(|id| Response::Sent { id }),
        prop::collection::vec(
            prop_oneof![any::<u64>().prop_map(Ok), error_reply().prop_map(Err)],
            0..6
        )
        .prop_map(Response::BatchSent),
        prop::option::of(delivery()).prop_map(Response::Received),
        prop::collection::vec(name(), 0..4).prop_map(Response::WaitingQueues),
        any::<u64>().prop_map(|subscription| Response::Subscribed { subscription }),
        (any::<u64>(), delivery()).prop_map(|(subscription, delivery)| Response::Deliver {
            subscription,
            delivery
        }),
        (any::<u64>(), delivery_batch()).prop_map(|(subscription, deliveries)| {
            Response::DeliverBatch {
                subscription,
                deliveries,
            }
        }),
        (any::<u64>(), error_reply()).prop_map(|(subscription, error)| {
            Response::SubscriptionClosed {
                subscription,
                error,
            }
        }),
        prop::collection::vec(topic_info(), 0..4).prop_map(Response::Topics),
        (any::<u64>(), name()).prop_map(|(subscription, queue)| Response::TopicSubscribed {
            subscription,
            queue
        }),
        prop::collection::vec(any::<u64>(), 0..8).prop_map(|ids| Response::Committed { ids }),
    ]
}

fn subscription_info() -> impl Strategy<Value = SubscriptionInfo> {
    (
        name(),
        any::<bool>(),
        any::<bool>(),
        selector(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(name, durable, shared, selector, ready, in_flight)| SubscriptionInfo {
                name,
                durable,
                shared,
                selector,
                ready,
                in_flight,
            },
        )
}

fn topic_info() -> impl Strategy<Value = TopicInfo> {
    (name(), prop::collection::vec(subscription_info(), 0..4)).prop_map(|(name, subscriptions)| {
        TopicInfo {
            name,
            subscriptions,
        }
    })
}

/// Request kinds (high bit clear).
pub fn request_kinds() -> Vec<FrameKind> {
    FrameKind::ALL
        .iter()
        .copied()
        .filter(|k| k.as_u16() & 0x8000 == 0)
        .collect()
}

/// Response and push kinds (high bit set).
pub fn response_kinds() -> Vec<FrameKind> {
    FrameKind::ALL
        .iter()
        .copied()
        .filter(|k| k.as_u16() & 0x8000 != 0)
        .collect()
}
