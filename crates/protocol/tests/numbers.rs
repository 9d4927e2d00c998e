//! Numbers that must never change: error codes, frame kinds, the protocol version, default
//! limits; and the name rule.

use std::collections::HashSet;

use ferry_protocol::limits::is_valid_name;
use ferry_protocol::{ErrorCode, FrameKind, Limits, PROTOCOL_VERSION};

/// Every error code with its wire number, written out. Numbers are never reused: a code that is
/// retired keeps its line here (commented) so that nobody hands its number to something else.
const ERROR_CODES: &[(ErrorCode, u16, &str)] = &[
    (ErrorCode::QueueNotFound, 1, "QueueNotFound"),
    (ErrorCode::QueueExists, 2, "QueueExists"),
    (ErrorCode::QueueNotEmpty, 3, "QueueNotEmpty"),
    (ErrorCode::ClientNotFound, 4, "ClientNotFound"),
    (ErrorCode::AlreadyOnline, 5, "AlreadyOnline"),
    (ErrorCode::ServerFull, 6, "ServerFull"),
    (ErrorCode::InvalidArgument, 7, "InvalidArgument"),
    (ErrorCode::TooLarge, 8, "TooLarge"),
    (ErrorCode::Unauthorized, 9, "Unauthorized"),
    (ErrorCode::NotFound, 10, "NotFound"),
    (ErrorCode::UnsupportedVersion, 11, "UnsupportedVersion"),
    (ErrorCode::StoreUnavailable, 12, "StoreUnavailable"),
    (ErrorCode::Internal, 13, "Internal"),
    (ErrorCode::UnknownRequest, 14, "UnknownRequest"),
    (ErrorCode::LimitExceeded, 15, "LimitExceeded"),
    (ErrorCode::TopicNotFound, 16, "TopicNotFound"),
    (ErrorCode::TopicExists, 17, "TopicExists"),
    (ErrorCode::TopicNotEmpty, 18, "TopicNotEmpty"),
    (ErrorCode::SubscriptionInUse, 19, "SubscriptionInUse"),
    (ErrorCode::TransactionState, 20, "TransactionState"),
    (ErrorCode::ResourceExhausted, 21, "ResourceExhausted"),
    (ErrorCode::QueueInUse, 22, "QueueInUse"),
];

const FRAME_KINDS: &[(FrameKind, u16)] = &[
    (FrameKind::Connect, 0x0001),
    (FrameKind::Disconnect, 0x0002),
    (FrameKind::Ping, 0x0003),
    (FrameKind::CreateQueue, 0x0010),
    (FrameKind::DeleteQueue, 0x0011),
    (FrameKind::ListQueues, 0x0012),
    (FrameKind::Send, 0x0020),
    (FrameKind::SendBatch, 0x0021),
    (FrameKind::PublishBatch, 0x0022),
    (FrameKind::Receive, 0x0030),
    (FrameKind::Ack, 0x0031),
    (FrameKind::Nack, 0x0032),
    (FrameKind::WaitingQueues, 0x0033),
    (FrameKind::Subscribe, 0x0040),
    (FrameKind::Credit, 0x0041),
    (FrameKind::Cancel, 0x0042),
    (FrameKind::CreateTopic, 0x0050),
    (FrameKind::DeleteTopic, 0x0051),
    (FrameKind::ListTopics, 0x0052),
    (FrameKind::SubscribeTopic, 0x0053),
    (FrameKind::Unsubscribe, 0x0054),
    (FrameKind::TxnBegin, 0x0060),
    (FrameKind::TxnCommit, 0x0061),
    (FrameKind::TxnRollback, 0x0062),
    (FrameKind::Connected, 0x8001),
    (FrameKind::Ok, 0x8002),
    (FrameKind::Error, 0x8003),
    (FrameKind::Pong, 0x8004),
    (FrameKind::Queues, 0x8012),
    (FrameKind::Sent, 0x8020),
    (FrameKind::BatchSent, 0x8021),
    (FrameKind::PublishedRun, 0x8022),
    (FrameKind::Received, 0x8030),
    (FrameKind::WaitingQueuesList, 0x8033),
    (FrameKind::Subscribed, 0x8040),
    (FrameKind::Deliver, 0x8041),
    (FrameKind::DeliverBatch, 0x8043),
    (FrameKind::DeliverRun, 0x8044),
    (FrameKind::SubscriptionClosed, 0x8042),
    (FrameKind::Topics, 0x8052),
    (FrameKind::TopicSubscribed, 0x8053),
    (FrameKind::Committed, 0x8061),
    (FrameKind::AuthResponse, 0x0004),
    (FrameKind::AuthChallenge, 0x8005),
];

#[test]
fn error_code_numbers_are_pinned() {
    assert_eq!(
        ErrorCode::ALL.len(),
        ERROR_CODES.len(),
        "a code was added: pin it here"
    );
    for &(code, n, name) in ERROR_CODES {
        assert_eq!(code.as_u16(), n, "{name}");
        assert_eq!(code as u16, n, "{name}");
        assert_eq!(ErrorCode::from_u16(n), Some(code), "{name}");
        assert_eq!(code.name(), name);
        assert_eq!(code.to_string(), name);
    }
}

#[test]
fn error_codes_are_unique_and_all_is_in_number_order() {
    let numbers: Vec<u16> = ErrorCode::ALL.iter().map(|c| c.as_u16()).collect();
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(numbers, sorted);
    let names: HashSet<_> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), ErrorCode::ALL.len());
}

#[test]
fn numbers_that_are_no_error_code_give_none() {
    let known: HashSet<u16> = ERROR_CODES.iter().map(|e| e.1).collect();
    for n in 0..=u16::MAX {
        assert_eq!(ErrorCode::from_u16(n).is_some(), known.contains(&n), "{n}");
    }
}

#[test]
fn frame_kind_numbers_are_pinned() {
    assert_eq!(
        FrameKind::ALL.len(),
        FRAME_KINDS.len(),
        "a kind was added: pin it here"
    );
    for &(kind, n) in FRAME_KINDS {
        assert_eq!(kind.as_u16(), n, "{kind:?}");
        assert_eq!(FrameKind::from_u16(n), Some(kind));
        // Requests have the high bit clear, replies and pushes have it set.
        assert_eq!(kind.is_request(), n & 0x8000 == 0, "{kind:?}");
    }
    let known: HashSet<u16> = FRAME_KINDS.iter().map(|k| k.1).collect();
    for n in 0..=u16::MAX {
        assert_eq!(
            FrameKind::from_u16(n).is_some(),
            known.contains(&n),
            "{n:#06x}"
        );
    }
}

#[test]
fn protocol_version_is_7_and_4_is_still_spoken() {
    assert_eq!(PROTOCOL_VERSION, 7);
    assert_eq!(ferry_protocol::MIN_PROTOCOL_VERSION, 4);
    assert_eq!(ferry_protocol::DELIVER_BATCH_VERSION, 5);
    assert_eq!(ferry_protocol::PUBLISH_BATCH_VERSION, 6);
    assert_eq!(ferry_protocol::DELIVER_RUN_VERSION, 7);
    assert!(!ferry_protocol::speaks_version(3));
    assert!(ferry_protocol::speaks_version(4));
    assert!(ferry_protocol::speaks_version(5));
    assert!(ferry_protocol::speaks_version(6));
    assert!(ferry_protocol::speaks_version(7));
    assert!(!ferry_protocol::speaks_version(8));
    assert_eq!(ferry_protocol::requests::CONNECT_EPHEMERAL, 1);
    assert_eq!(ferry_protocol::requests::CONNECT_FLAGS, 1);
}

#[test]
fn default_limits_are_as_documented() {
    let l = Limits::default();
    assert_eq!(l, Limits::DEFAULT);
    assert_eq!(l.max_frame_bytes, 16 * 1024 * 1024);
    assert_eq!(l.max_body_bytes, 1024 * 1024);
    assert_eq!(l.max_name_len, 200);
    assert_eq!(l.max_connections, 1024);
    assert_eq!(l.max_queues, 100_000);
    assert_eq!(l.max_in_flight_per_session, 100_000);
    assert_eq!(l.max_prefetch, 65_536);
    assert_eq!(l.max_batch, 10_000);
    assert_eq!(l.max_queues_per_send, 100);
    assert_eq!(l.max_properties, 64);
    assert_eq!(l.lease_ms, 60_000);
}

#[test]
fn valid_names() {
    for name in [
        "a",
        "Z",
        "0",
        "orders",
        "orders.eu-1_x",
        "...",
        "-",
        "_",
        "A.b-C_9",
    ] {
        assert!(is_valid_name(name, 200), "{name:?}");
    }
    assert!(is_valid_name(&"x".repeat(200), 200));
    assert!(is_valid_name(&"x".repeat(5), 5));
}

#[test]
fn invalid_names() {
    for name in [
        "", " ", "a b", "a/b", "a:b", "a*", "é", "naïve", "a\0", "a\n", "tab\t", "ü", "q#", "✓",
    ] {
        assert!(!is_valid_name(name, 200), "{name:?}");
    }
    assert!(!is_valid_name(&"x".repeat(201), 200));
    assert!(!is_valid_name("abcdef", 5));
    assert!(!is_valid_name("a", 0));
}

#[test]
fn every_ascii_byte_is_judged_by_the_alphabet() {
    for b in 0u8..=127 {
        let s = (b as char).to_string();
        let expected = b.is_ascii_alphanumeric() || b"._-".contains(&b);
        assert_eq!(is_valid_name(&s, 200), expected, "{b:#04x}");
    }
}
