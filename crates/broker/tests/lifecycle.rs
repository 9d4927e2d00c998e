//! Restart and graceful shutdown of the in-process broker.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

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

/// The log segments in a data directory with `extension` (`log` or `spare`).
fn segment_files(data_dir: &std::path::Path, extension: &str) -> usize {
    std::fs::read_dir(data_dir.join("store").join("segments"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().and_then(|x| x.to_str()) == Some(extension))
        .count()
}

/// The broker's upkeep compacts the log while it runs: once the messages that filled many
/// segments are taken, the drained segments go (their files kept as spares, up to the limit)
/// without a restart or any request.
#[tokio::test]
async fn the_broker_compacts_its_log_on_its_own() {
    let s = TestServer::start_with(|c| c.segment_bytes = 65_536).await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let body = "x".repeat(2_000);
    for _ in 0..10 {
        let batch = (0..100).map(|_| msg(&["q"], &body, 5)).collect();
        for r in c.send_batch(batch).await.unwrap() {
            r.unwrap();
        }
    }
    let filled = segment_files(s.data_dir(), "log");
    assert!(
        filled > 10,
        "2 MB of messages filled only {filled} segments"
    );
    let mut taken = 0;
    while take(&c, "q").await.is_some() {
        taken += 1;
    }
    assert_eq!(taken, 1_000);
    // The upkeep compacts every second of real time: poll for its effect, bounded.
    tokio::time::timeout(Duration::from_secs(20), async {
        while segment_files(s.data_dir(), "log") > 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} segments left of {filled}",
            segment_files(s.data_dir(), "log")
        )
    });
    let spares = segment_files(s.data_dir(), "spare");
    assert!(
        (1..=8).contains(&spares),
        "{spares} spare files (the default keeps up to 8)"
    );
    s.shutdown().await;
}
