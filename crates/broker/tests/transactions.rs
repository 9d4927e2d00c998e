//! Transactions through the broker, on both engines: commit applies held sends, publishes and
//! acks together; rollback drops the sends and returns the acked deliveries; auto-ack takes
//! inside a transaction are settled by the commit; a failed commit changes nothing; a
//! disconnect rolls back; transaction requests out of order get `TransactionState`.
//! Atomicity across `kill -9` is in `crash_transactions.rs`.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use ferry_broker::StoreSetting;
use ferry_client::Client;
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::{AckMode, ErrorCode, Order, OutgoingMessage, ReceiveMode};
use ferry_testkit::{PgCluster, TestServer};

/// (ready, in flight) of `q`.
async fn depth(c: &Client, q: &str) -> (u64, u64) {
    let qs = c.list_queues().await.unwrap();
    let q = qs.iter().find(|i| i.name == q).expect("queue listed");
    (q.ready, q.in_flight)
}

async fn commit_applies_sends_publishes_and_acks_together(s: TestServer) {
    let c = s.client("worker").await;
    let watcher = s.client("watcher").await;
    c.create_queue("in").await.unwrap();
    c.create_queue("out").await.unwrap();
    c.create_topic("done").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("done").durable("log"))
        .await
        .unwrap();
    c.send(msg(&["in"], "job", 5)).await.unwrap();
    c.begin().await.unwrap();
    let d = take_client_ack(&c, "in").await.expect("a job");
    assert_eq!(
        c.send(msg(&["out"], "result", 5)).await.unwrap(),
        0,
        "held: id 0"
    );
    c.publish(OutgoingMessage::to_topic("done", "job done"))
        .await
        .unwrap();
    c.ack(&[d.delivery_id]).await.unwrap();
    // Nothing visible before the commit.
    assert!(
        take(&watcher, "out").await.is_none(),
        "a held send is visible"
    );
    assert_eq!(
        depth(&watcher, "in").await,
        (0, 1),
        "the acked job is still in flight"
    );
    let ids = c.commit().await.unwrap();
    assert_eq!(ids.len(), 2);
    assert!(ids[0] > 0 && ids[1] > ids[0], "ids in order: {ids:?}");
    assert_eq!(depth(&watcher, "in").await, (0, 0));
    let out = take(&watcher, "out")
        .await
        .expect("the result after the commit");
    assert_eq!((body(&out), out.message.id), ("result".into(), ids[0]));
    let log = take(&watcher, "done:log")
        .await
        .expect("the publish after the commit");
    assert_eq!(log.message.id, ids[1]);
    expect_code(c.ack(&[d.delivery_id]).await, ErrorCode::NotFound);
    s.shutdown().await;
}

async fn rollback_drops_sends_and_returns_acked_deliveries(s: TestServer) {
    let c = s.client("worker").await;
    c.create_queue("in").await.unwrap();
    c.create_queue("out").await.unwrap();
    c.send(msg(&["in"], "a", 5)).await.unwrap();
    c.send(msg(&["in"], "b", 5)).await.unwrap();
    c.begin().await.unwrap();
    let a = take_client_ack(&c, "in").await.unwrap();
    // Auto ack inside a transaction: settled by the commit, so returned by the rollback.
    let b = take(&c, "in").await.unwrap();
    assert_eq!((body(&a), body(&b)), ("a".into(), "b".into()));
    c.ack(&[a.delivery_id]).await.unwrap();
    c.send(msg(&["out"], "never", 5)).await.unwrap();
    c.rollback().await.unwrap();
    assert!(
        take(&c, "out").await.is_none(),
        "a rolled-back send arrived"
    );
    let again: Vec<_> = [take(&c, "in").await.unwrap(), take(&c, "in").await.unwrap()].into();
    assert_eq!(
        again.iter().map(body).collect::<Vec<_>>(),
        ["a", "b"],
        "old order kept"
    );
    assert!(again.iter().all(|d| d.message.redelivered()));
    s.shutdown().await;
}

async fn a_failed_commit_changes_nothing_and_rolls_back(s: TestServer) {
    let c = s.client("worker").await;
    c.create_queue("in").await.unwrap();
    c.create_queue("out").await.unwrap();
    c.send(msg(&["in"], "job", 5)).await.unwrap();
    c.begin().await.unwrap();
    let d = take_client_ack(&c, "in").await.unwrap();
    c.ack(&[d.delivery_id]).await.unwrap();
    c.send(msg(&["out"], "first", 5)).await.unwrap();
    c.send(msg(&["missing"], "second", 5)).await.unwrap();
    let e = expect_code(c.commit().await, ErrorCode::QueueNotFound);
    assert!(e.contains("missing"), "{e}");
    assert!(
        take(&c, "out").await.is_none(),
        "part of a failed commit took effect"
    );
    let back = take(&c, "in").await.expect("the acked job is back");
    assert!(back.message.redelivered());
    expect_code(c.commit().await, ErrorCode::TransactionState);
    s.shutdown().await;
}

async fn a_disconnect_rolls_back(s: TestServer) {
    let c = s.client("worker").await;
    c.create_queue("in").await.unwrap();
    c.create_queue("out").await.unwrap();
    c.send(msg(&["in"], "job", 5)).await.unwrap();
    c.begin().await.unwrap();
    let d = take_client_ack(&c, "in").await.unwrap();
    c.ack(&[d.delivery_id]).await.unwrap();
    c.send(msg(&["out"], "held", 5)).await.unwrap();
    c.disconnect().await.unwrap();
    let other = s.client("other").await;
    let back = other
        .receive(from_queue(
            "in",
            Order::Time,
            ReceiveMode::Take,
            AckMode::Auto,
            5_000,
        ))
        .await
        .unwrap()
        .expect("the job returns after the disconnect");
    assert!(back.message.redelivered());
    assert!(take(&other, "out").await.is_none());
    s.shutdown().await;
}

async fn transaction_requests_out_of_order_are_refused(s: TestServer) {
    let c = s.client("c").await;
    expect_code(c.commit().await, ErrorCode::TransactionState);
    expect_code(c.rollback().await, ErrorCode::TransactionState);
    c.begin().await.unwrap();
    expect_code(c.begin().await, ErrorCode::TransactionState);
    assert_eq!(
        c.commit().await.unwrap(),
        Vec::<u64>::new(),
        "an empty commit"
    );
    // Invalid messages are refused when they are made, and the transaction goes on.
    c.create_queue("q").await.unwrap();
    c.begin().await.unwrap();
    expect_code(
        c.send(msg(&["q"], "x", 42)).await,
        ErrorCode::InvalidArgument,
    );
    c.send(msg(&["q"], "ok", 5)).await.unwrap();
    assert_eq!(c.commit().await.unwrap().len(), 1);
    s.shutdown().await;
}

macro_rules! embedded {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            super::$name(TestServer::start().await).await;
        }
    )*};
}

mod embedded {
    use super::*;
    embedded!(
        commit_applies_sends_publishes_and_acks_together,
        rollback_drops_sends_and_returns_acked_deliveries,
        a_failed_commit_changes_nothing_and_rolls_back,
        a_disconnect_rolls_back,
        transaction_requests_out_of_order_are_refused,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_transactions() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    for scenario in 0..5 {
        let url = tokio::task::block_in_place(|| pg.fresh_database());
        let s = TestServer::start_with(|c| {
            c.store = StoreSetting::Postgres(url);
            c.store_pool_size = 4;
        })
        .await;
        match scenario {
            0 => commit_applies_sends_publishes_and_acks_together(s).await,
            1 => rollback_drops_sends_and_returns_acked_deliveries(s).await,
            2 => a_failed_commit_changes_nothing_and_rolls_back(s).await,
            3 => a_disconnect_rolls_back(s).await,
            _ => transaction_requests_out_of_order_are_refused(s).await,
        }
    }
}
