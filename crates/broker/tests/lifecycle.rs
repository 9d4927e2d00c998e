//! Restart and graceful shutdown of the in-process broker.

mod common;

use std::time::Duration;

use common::*;
use ferry_protocol::{AckMode, Order, ReceiveMode};
use ferry_testkit::TestServer;

#[tokio::test]
async fn restart_keeps_queues_messages_clients_and_ids() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let id = c.send(msg(&["q"], "kept", 5)).await.unwrap();
    c.disconnect().await.unwrap();
    let s = s.restart().await;
    let c = s.client("bob").await;
    // alice is still a known client: a message addressed to her is accepted.
    let mut m = msg(&["q"], "for alice", 5);
    m.receiver = Some("alice".into());
    let id2 = c.send(m).await.unwrap();
    assert!(id2 > id, "ids keep increasing across restarts");
    let d = take(&c, "q").await.unwrap();
    assert_eq!((d.message.id, body(&d)), (id, "kept".to_string()));
    s.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_long_polls_and_finishes_in_flight_requests() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move {
            c.receive(from_queue(
                "q",
                Order::Time,
                ReceiveMode::Take,
                AckMode::Auto,
                60_000,
            ))
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(Duration::from_secs(10), s.shutdown())
        .await
        .expect("shutdown does not wait for the 60 s poll");
    let r = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    // Either answered "no message" before the close, or saw the connection close: never hangs.
    if let Ok(d) = r {
        assert!(d.is_none());
    }
}
