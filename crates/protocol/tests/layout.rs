//! The exact bytes of one instance of every frame, written out by hand from `docs/protocol.md`.
//! A change here is a wire-format change: every broker and client in the field must agree.
//!
//! Each layout reads: header (length | kind | request id) || payload fields separated by `|`.
//! All samples use request id 7 (`07 00 00 00`).

mod common;

use common::*;
use ferry_protocol::{Request, Response};

/// Pinned bytes of `pinned_requests()`, in the same order.
const REQUESTS: &[(&str, &str)] = &[
    (
        "Connect v4 'app' SCRAM-SHA-256 'n,,n=app,r=abc', keep-alive 30 s, ephemeral",
        "34 00 00 00 | 01 00 | 07 00 00 00 ||
         04 00 | 03 00 61 70 70 | 0d 00 53 43 52 41 4d 2d 53 48 41 2d 32 35 36 |
         0e 00 6e 2c 2c 6e 3d 61 70 70 2c 72 3d 61 62 63 | 30 75 00 00 | 01 00 00 00",
    ),
    ("Disconnect", "06 00 00 00 | 02 00 | 07 00 00 00"),
    ("Ping", "06 00 00 00 | 03 00 | 07 00 00 00"),
    (
        "AuthResponse 'c=biws,r=abcdef,p=cHJvb2Y='",
        "22 00 00 00 | 04 00 | 07 00 00 00 ||
         1a 00 63 3d 62 69 77 73 2c 72 3d 61 62 63 64 65 66 2c 70 3d 63 48 4a 76 62 32 59 3d",
    ),
    (
        "CreateQueue 'q1', max deliveries 5, dead-letter queue 'd', no expiry queue",
        "13 00 00 00 | 10 00 | 07 00 00 00 || 02 00 71 31 | 05 00 00 00 | 01 01 00 64 | 00",
    ),
    (
        "DeleteQueue 'q1' force",
        "0b 00 00 00 | 11 00 | 07 00 00 00 || 02 00 71 31 | 01",
    ),
    ("ListQueues", "06 00 00 00 | 12 00 | 07 00 00 00"),
    (
        "Send to a,b for r, priority 7, context 0x0102030405060708, k=Int(-2), body 'hi', ttl 30 s, delay 500 ms, persistent, no topic",
        "42 00 00 00 | 20 00 | 07 00 00 00 ||
         02 00 | 01 00 61 | 01 00 62 |
         01 | 01 00 72 |
         07 |
         08 07 06 05 04 03 02 01 |
         01 00 | 01 00 6b | 01 | fe ff ff ff ff ff ff ff |
         02 00 00 00 | 68 69 |
         30 75 00 00 00 00 00 00 | f4 01 00 00 00 00 00 00 |
         00 | 00 00",
    ),
    (
        "SendBatch [q 'x'] [q prio 10, b=true f=1.5 s='ok', empty body]",
        "74 00 00 00 | 21 00 | 07 00 00 00 ||
         02 00 00 00 |
         01 00 | 01 00 71 | 00 | 05 | 00 00 00 00 00 00 00 00 | 00 00 | 01 00 00 00 78 |
           00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 | 00 00 |
         01 00 | 01 00 71 | 00 | 0a | 00 00 00 00 00 00 00 00 |
           03 00 | 01 00 62 | 00 | 01
                 | 01 00 66 | 02 | 00 00 00 00 00 00 f8 3f
                 | 01 00 73 | 03 | 02 00 6f 6b |
           00 00 00 00 |
           00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 | 00 00",
    ),
    (
        "PublishBatch to 't', priority 5, non-persistent, no properties: 'a', 'bc'",
        "2c 00 00 00 | 22 00 | 07 00 00 00 ||
         01 00 74 | 05 | 00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 01 |
         00 00 | 02 00 00 00 | 01 00 00 00 61 | 02 00 00 00 62 63",
    ),
    (
        "Send non-persistent 'p' published to topic 't'",
        "2d 00 00 00 | 20 00 | 07 00 00 00 ||
         00 00 | 00 | 05 | 00 00 00 00 00 00 00 00 | 00 00 | 01 00 00 00 70 |
         00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 |
         01 | 01 00 74",
    ),
    (
        "Receive queue 'q', priority order, take, client ack, wait 1000 ms, no selector",
        "13 00 00 00 | 30 00 | 07 00 00 00 || 00 | 01 00 71 | 00 | 00 | 01 | e8 03 00 00 | 00 00",
    ),
    (
        "Receive sender 's', time order, peek, auto ack, no wait, selector 'a=1'",
        "16 00 00 00 | 30 00 | 07 00 00 00 ||
         01 | 01 00 73 | 01 | 01 | 00 | 00 00 00 00 | 03 00 61 3d 31",
    ),
    (
        "Ack [1, 256]",
        "1a 00 00 00 | 31 00 | 07 00 00 00 ||
         02 00 00 00 | 01 00 00 00 00 00 00 00 | 00 01 00 00 00 00 00 00",
    ),
    (
        "Nack [3] drop",
        "13 00 00 00 | 32 00 | 07 00 00 00 || 01 00 00 00 | 03 00 00 00 00 00 00 00 | 00",
    ),
    ("WaitingQueues", "06 00 00 00 | 33 00 | 07 00 00 00"),
    (
        "Subscribe 'q', time order, auto ack, prefetch 100, selector 'a=1'",
        "14 00 00 00 | 40 00 | 07 00 00 00 || 01 00 71 | 01 | 00 | 64 00 00 00 | 03 00 61 3d 31",
    ),
    (
        "Credit subscription 2 +50",
        "12 00 00 00 | 41 00 | 07 00 00 00 || 02 00 00 00 00 00 00 00 | 32 00 00 00",
    ),
    (
        "Cancel subscription 2",
        "0e 00 00 00 | 42 00 | 07 00 00 00 || 02 00 00 00 00 00 00 00",
    ),
    (
        "CreateTopic 't'",
        "09 00 00 00 | 50 00 | 07 00 00 00 || 01 00 74",
    ),
    (
        "DeleteTopic 't' force",
        "0a 00 00 00 | 51 00 | 07 00 00 00 || 01 00 74 | 01",
    ),
    ("ListTopics", "06 00 00 00 | 52 00 | 07 00 00 00"),
    (
        "SubscribeTopic 't' as built by SubscribeTopic::new: non-durable, priority, client ack, prefetch 100",
        "1b 00 00 00 | 53 00 | 07 00 00 00 ||
         01 00 74 | 00 00 | 00 | 00 | 00 00 | 00 00 00 00 | 00 | 00 | 00 | 01 | 64 00 00 00",
    ),
    (
        "SubscribeTopic 't' durable 'd' shared, selector 'a=1', max deliveries 3, dead letters 'x', expired 'y', time order, auto ack, prefetch 0",
        "25 00 00 00 | 53 00 | 07 00 00 00 ||
         01 00 74 | 01 00 64 | 01 | 01 | 03 00 61 3d 31 |
         03 00 00 00 | 01 01 00 78 | 01 01 00 79 |
         01 | 00 | 00 00 00 00",
    ),
    (
        "Unsubscribe 't' 'd'",
        "0c 00 00 00 | 54 00 | 07 00 00 00 || 01 00 74 | 01 00 64",
    ),
    ("TxnBegin", "06 00 00 00 | 60 00 | 07 00 00 00"),
    ("TxnCommit", "06 00 00 00 | 61 00 | 07 00 00 00"),
    ("TxnRollback", "06 00 00 00 | 62 00 | 07 00 00 00"),
];

/// Pinned bytes of `pinned_responses()`, in the same order.
const RESPONSES: &[(&str, &str)] = &[
    (
        "Connected v4 'app' with the default limits, keep-alive 30 s, server-final 'v=c2ln'",
        "3f 00 00 00 | 01 80 | 07 00 00 00 ||
         04 00 | 03 00 61 70 70 |
         00 00 00 01 | 00 00 10 00 | c8 00 | 00 04 00 00 | a0 86 01 00 | a0 86 01 00 |
         00 00 01 00 | 10 27 00 00 | 64 00 | 40 00 | 60 ea 00 00 |
         30 75 00 00 | 06 00 76 3d 63 32 6c 6e",
    ),
    (
        "AuthChallenge 'r=abcdef,s=c2FsdA==,i=4096'",
        "22 00 00 00 | 05 80 | 07 00 00 00 ||
         1a 00 72 3d 61 62 63 64 65 66 2c 73 3d 63 32 46 73 64 41 3d 3d 2c 69 3d 34 30 39 36",
    ),
    ("Ok", "06 00 00 00 | 02 80 | 07 00 00 00"),
    (
        "Error QueueNotFound 'no q'",
        "0e 00 00 00 | 03 80 | 07 00 00 00 || 01 00 | 04 00 6e 6f 20 71",
    ),
    ("Pong", "06 00 00 00 | 04 80 | 07 00 00 00"),
    (
        "Queues [q ready 5 in flight 1]",
        "1d 00 00 00 | 12 80 | 07 00 00 00 ||
         01 00 00 00 | 01 00 71 | 05 00 00 00 00 00 00 00 | 01 00 00 00 00 00 00 00",
    ),
    (
        "Sent 42",
        "0e 00 00 00 | 20 80 | 07 00 00 00 || 2a 00 00 00 00 00 00 00",
    ),
    (
        "PublishedRun: 3 bodies published as messages 9, 10 and 11",
        "12 00 00 00 | 22 80 | 07 00 00 00 || 09 00 00 00 00 00 00 00 | 03 00 00 00",
    ),
    (
        "BatchSent [Ok 9, Err TooLarge 'big']",
        "1b 00 00 00 | 21 80 | 07 00 00 00 ||
         02 00 00 00 | 00 | 09 00 00 00 00 00 00 00 | 01 | 08 00 | 03 00 62 69 67",
    ),
    ("Received none", "07 00 00 00 | 30 80 | 07 00 00 00 || 00"),
    (
        "Received delivery 0x11 of message 0x22, expires at 31000",
        "42 00 00 00 | 30 80 | 07 00 00 00 ||
         01 |
         11 00 00 00 00 00 00 00 | 22 00 00 00 00 00 00 00 |
         01 00 71 | 01 00 73 | 00 | 05 |
         00 00 00 00 00 00 00 00 | e8 03 00 00 00 00 00 00 | 01 00 00 00 |
         00 00 | 01 00 00 00 78 |
         18 79 00 00 00 00 00 00",
    ),
    (
        "WaitingQueues [a, bc]",
        "0f 00 00 00 | 33 80 | 07 00 00 00 || 02 00 | 01 00 61 | 02 00 62 63",
    ),
    (
        "Subscribed 3",
        "0e 00 00 00 | 40 80 | 07 00 00 00 || 03 00 00 00 00 00 00 00",
    ),
    (
        "Deliver on 3: auto-ack delivery of message 7 for 'me', n='v', empty body",
        "53 00 00 00 | 41 80 | 07 00 00 00 ||
         03 00 00 00 00 00 00 00 |
         00 00 00 00 00 00 00 00 | 07 00 00 00 00 00 00 00 |
         01 00 71 | 01 00 73 | 01 02 00 6d 65 | 09 |
         01 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 00 00 00 |
         01 00 | 01 00 6e | 03 | 01 00 76 |
         00 00 00 00 |
         00 00 00 00 00 00 00 00",
    ),
    (
        "SubscriptionClosed 3 QueueNotFound 'gone'",
        "16 00 00 00 | 42 80 | 07 00 00 00 ||
         03 00 00 00 00 00 00 00 | 01 00 | 04 00 67 6f 6e 65",
    ),
    (
        "DeliverBatch on 3: queue 'q', sender 's', n='v'; message 7 (auto ack, body 'a'), \
         message 8 (delivery 2 for 'me', delivered once, empty body)",
        "8a 00 00 00 | 43 80 | 07 00 00 00 ||
         03 00 00 00 00 00 00 00 | 01 00 71 | 01 00 73 |
         01 00 | 01 00 6e | 03 | 01 00 76 |
         02 00 00 00 |
         00 00 00 00 00 00 00 00 | 07 00 00 00 00 00 00 00 | 00 | 09 |
         01 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 00 00 00 |
         01 00 00 00 | 61 | 00 00 00 00 00 00 00 00 |
         02 00 00 00 00 00 00 00 | 08 00 00 00 00 00 00 00 | 01 02 00 6d 65 | 09 |
         01 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 01 00 00 00 |
         00 00 00 00 | 00 00 00 00 00 00 00 00",
    ),
    (
        "DeliverRun on 3: queue 'q', sender 's', n='v', for 'me', priority 9, context 1, \
         delivered once, expires at 9; messages 7 (body 'a') and 8 (body 'bc'), auto ack",
        "56 00 00 00 | 44 80 | 07 00 00 00 ||
         03 00 00 00 00 00 00 00 | 01 00 71 | 01 00 73 |
         01 00 | 01 00 6e | 03 | 01 00 76 |
         01 02 00 6d 65 | 09 |
         01 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 01 00 00 00 |
         09 00 00 00 00 00 00 00 | 07 00 00 00 00 00 00 00 | 02 00 00 00 |
         01 00 00 00 | 61 | 02 00 00 00 | 62 63",
    ),
    (
        "Topics [t: d durable, not shared, selector 'a=1', ready 2, in flight 1]",
        "2b 00 00 00 | 52 80 | 07 00 00 00 ||
         01 00 00 00 | 01 00 74 | 01 00 00 00 |
         01 00 64 | 01 | 00 | 03 00 61 3d 31 | 02 00 00 00 00 00 00 00 | 01 00 00 00 00 00 00 00",
    ),
    (
        "TopicSubscribed 4 on queue 't:d'",
        "13 00 00 00 | 53 80 | 07 00 00 00 || 04 00 00 00 00 00 00 00 | 03 00 74 3a 64",
    ),
    (
        "Committed [5, 6]",
        "1a 00 00 00 | 61 80 | 07 00 00 00 ||
         02 00 00 00 | 05 00 00 00 00 00 00 00 | 06 00 00 00 00 00 00 00",
    ),
];

fn show(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn request_layouts_are_pinned() {
    let samples = pinned_requests();
    assert_eq!(samples.len(), REQUESTS.len());
    for (req, (what, layout)) in samples.iter().zip(REQUESTS) {
        let expected = hex(layout);
        let actual = req_bytes(req, RID);
        assert_eq!(show(&actual), show(&expected), "{what}: encoding changed");
        // And the pinned bytes decode to the value (not only the value to the bytes).
        assert_eq!(
            &Request::decode(&one_frame(&expected)).unwrap(),
            req,
            "{what}"
        );
    }
}

#[test]
fn response_layouts_are_pinned() {
    let samples = pinned_responses();
    assert_eq!(samples.len(), RESPONSES.len());
    for (resp, (what, layout)) in samples.iter().zip(RESPONSES) {
        let expected = hex(layout);
        let actual = resp_bytes(resp, RID);
        assert_eq!(show(&actual), show(&expected), "{what}: encoding changed");
        assert_eq!(
            &Response::decode(&one_frame(&expected)).unwrap(),
            resp,
            "{what}"
        );
    }
}

#[test]
fn pushes_carry_request_id_zero_in_the_header() {
    let push = Response::Deliver {
        subscription: 3,
        delivery: pushed_delivery(),
    };
    let bytes = resp_bytes(&push, 0);
    assert_eq!(show(&bytes[..10]), "53 00 00 00 41 80 00 00 00 00");
}

/// The usual delivery (no receiver, no properties) takes the encoders' shortest path, which
/// writes the receiver tag, the fixed fields, the property count and the body length as one
/// run: its bytes are pinned here, through the owned response and the borrowed push alike.
#[test]
fn a_delivery_without_receiver_or_properties_is_pinned_through_both_encoders() {
    let delivery = ferry_protocol::Delivery {
        delivery_id: 0,
        message: ferry_protocol::Message {
            id: 7,
            queue: "q".into(),
            sender: "s".into(),
            receiver: None,
            priority: 9,
            context: 1,
            properties: Default::default(),
            body: bytes::Bytes::from_static(b"hi"),
            created_at: 2,
            delivery_count: 5,
            expires_at: 0x10,
        },
    };
    let expected = hex("4a 00 00 00 | 41 80 | 00 00 00 00 ||
         03 00 00 00 00 00 00 00 |
         00 00 00 00 00 00 00 00 | 07 00 00 00 00 00 00 00 |
         01 00 71 | 01 00 73 | 00 | 09 |
         01 00 00 00 00 00 00 00 | 02 00 00 00 00 00 00 00 | 05 00 00 00 |
         00 00 |
         02 00 00 00 | 68 69 |
         10 00 00 00 00 00 00 00");
    let push = Response::Deliver {
        subscription: 3,
        delivery: delivery.clone(),
    };
    assert_eq!(show(&resp_bytes(&push, 0)), show(&expected));
    let mut borrowed = bytes::BytesMut::new();
    ferry_protocol::encode_deliver(&mut borrowed, 3, &delivery.view());
    assert_eq!(show(&borrowed), show(&expected));
    assert_eq!(Response::decode(&one_frame(&expected)).unwrap(), push);
}
