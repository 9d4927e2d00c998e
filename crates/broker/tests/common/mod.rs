//! Helpers shared by the broker's integration tests.
#![allow(dead_code)]

pub mod selectors;

use bytes::Bytes;
use ferry_client::{Client, ClientError};
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, Delivery, ErrorCode, Order, OutgoingMessage, ReceiveMode, Source};

/// A receive request from a queue.
pub fn from_queue(q: &str, order: Order, mode: ReceiveMode, ack: AckMode, wait_ms: u32) -> Receive {
    Receive {
        source: Source::Queue(q.into()),
        order,
        mode,
        ack,
        wait_ms,
        selector: String::new(),
    }
}

/// Takes one message from `q` now (priority order, auto ack).
pub async fn take(c: &Client, q: &str) -> Option<Delivery> {
    c.receive(from_queue(
        q,
        Order::Priority,
        ReceiveMode::Take,
        AckMode::Auto,
        0,
    ))
    .await
    .expect("receive")
}

/// Takes one message from `q` with client ack.
pub async fn take_client_ack(c: &Client, q: &str) -> Option<Delivery> {
    c.receive(from_queue(
        q,
        Order::Time,
        ReceiveMode::Take,
        AckMode::Client,
        0,
    ))
    .await
    .expect("receive")
}

/// A message to `queues` with `body` and `priority`.
pub fn msg(queues: &[&str], body: &str, priority: u8) -> OutgoingMessage {
    OutgoingMessage {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        topic: None,
        persistent: true,
        receiver: None,
        priority,
        context: 0,
        properties: Default::default(),
        body: Bytes::copy_from_slice(body.as_bytes()),
        ttl_ms: 0,
        delay_ms: 0,
    }
}

/// The body as text.
pub fn body(d: &Delivery) -> String {
    String::from_utf8_lossy(&d.message.body).into_owned()
}

/// Asserts `r` failed with `code` and returns the message.
pub fn expect_code<T: std::fmt::Debug>(r: Result<T, ClientError>, code: ErrorCode) -> String {
    match r {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, code, "expected {code}, got {e}");
            e.message
        }
        other => panic!("expected {code}, got {other:?}"),
    }
}
