//! Wildcard topic subscriptions through the broker and the Rust client, on both engines: push
//! consumers on `*` and `>` patterns are woken by publishes to the topics they match (and only
//! those), a durable pattern subscription keeps its backlog across a restart, and names are
//! checked: patterns are for subscriptions, never for publishing or creating.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_broker::StoreSetting;
use ferry_client::Subscription;
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::{AckMode, Delivery, ErrorCode, OutgoingMessage};
use ferry_testkit::{PgCluster, TestServer};

/// A guard against a hang when a push never comes (not a way to let time pass).
const GUARD: Duration = Duration::from_secs(20);

async fn next_one(sub: &mut Subscription, what: &str) -> Delivery {
    tokio::time::timeout(GUARD, sub.next())
        .await
        .unwrap_or_else(|_| panic!("no delivery: {what}"))
        .expect("subscription ended")
        .expect("delivery")
}

fn publish(topic: &str, body: &str) -> OutgoingMessage {
    OutgoingMessage::to_topic(topic, Bytes::from(body.to_owned()))
}

/// Push consumers on an exact topic, `*` and `>` each get exactly the publishes they match,
/// pushed as they happen.
async fn pattern_consumers_are_pushed_what_they_match(s: TestServer) {
    let c = s.client("pub").await;
    for t in ["prices.eu.fish", "prices.us.fish", "prices.eu", "news.eu"] {
        c.create_topic(t).await.unwrap();
    }
    let reader = s.client("reader").await;
    let mut subs = Vec::new();
    for filter in ["prices.eu.fish", "prices.*.fish", "prices.>"] {
        subs.push(
            reader
                .subscribe_topic(SubscribeTopic::new(filter).ack(AckMode::Auto))
                .await
                .unwrap(),
        );
    }
    for t in ["news.eu", "prices.eu", "prices.us.fish", "prices.eu.fish"] {
        c.publish(publish(t, t)).await.unwrap();
    }
    let expected: [&[&str]; 3] = [
        &["prices.eu.fish"],
        &["prices.us.fish", "prices.eu.fish"],
        &["prices.eu", "prices.us.fish", "prices.eu.fish"],
    ];
    for (sub, want) in subs.iter_mut().zip(expected) {
        let mut got = Vec::new();
        for _ in want {
            got.push(body(&next_one(sub, "a matching publish").await));
        }
        assert_eq!(got, want, "subscription on {}", sub.queue());
        assert!(sub.queue().contains(":~reader."), "{}", sub.queue());
    }
    // Nothing more: each got one copy of each matching publish and nothing else.
    for sub in &mut subs {
        let extra = tokio::time::timeout(Duration::from_millis(200), sub.next()).await;
        assert!(
            extra.is_err(),
            "an extra delivery on {}: {extra:?}",
            sub.queue()
        );
    }
}

/// A durable subscription on a pattern needs no topic, collects while nobody consumes it and
/// across a restart, and is listed under its pattern.
async fn a_durable_pattern_subscription_keeps_its_backlog(s: TestServer) {
    let c = s.client("pub").await;
    let queue = c
        .ensure_subscription(SubscribeTopic::new("orders.>").durable("audit"))
        .await
        .unwrap();
    assert_eq!(queue, "orders.>:audit");
    c.create_topic("orders.eu").await.unwrap();
    c.publish(publish("orders.eu", "one")).await.unwrap();
    drop(c);
    let s = s.restart().await;
    let c = s.client("pub").await;
    c.publish(publish("orders.eu", "two")).await.unwrap();
    let listed = c.list_topics().await.unwrap();
    let pattern = listed
        .iter()
        .find(|t| t.name == "orders.>")
        .expect("the pattern is listed");
    assert_eq!(pattern.subscriptions[0].name, "audit");
    assert_eq!(pattern.subscriptions[0].ready, 2);
    let mut sub = c
        .subscribe_topic(SubscribeTopic::new("orders.>").durable("audit"))
        .await
        .unwrap();
    for want in ["one", "two"] {
        let d = next_one(&mut sub, want).await;
        assert_eq!(body(&d), want);
        assert_eq!(d.message.queue, "orders.>:audit");
        c.ack(&[d.delivery_id]).await.unwrap();
    }
    sub.cancel().await;
    c.unsubscribe("orders.>", "audit").await.unwrap();
    let e = expect_code(
        c.unsubscribe("orders.>", "audit").await,
        ErrorCode::NotFound,
    );
    assert!(e.contains("orders.>:audit"), "{e}");
}

/// Patterns are refused where a topic is needed, and malformed patterns everywhere, each with
/// a message that says why.
async fn patterns_are_for_subscriptions_only(s: TestServer) {
    let c = s.client("pub").await;
    let e = expect_code(c.create_topic("prices.*").await, ErrorCode::InvalidArgument);
    assert!(e.contains("patterns are for subscriptions"), "{e}");
    let e = expect_code(
        c.publish(publish("prices.>", "x")).await,
        ErrorCode::InvalidArgument,
    );
    assert!(e.contains("patterns are for subscriptions"), "{e}");
    let e = expect_code(
        c.delete_topic("prices.>", false).await,
        ErrorCode::InvalidArgument,
    );
    assert!(e.contains("patterns are for subscriptions"), "{e}");
    for (bad, says) in [
        ("prices.>.eu", "must be the last word"),
        ("pri*ces", "whole words"),
        ("prices.#", "characters"),
    ] {
        let e = expect_code(
            c.ensure_subscription(SubscribeTopic::new(bad).durable("d"))
                .await,
            ErrorCode::InvalidArgument,
        );
        assert!(e.contains(says), "{bad}: {e}");
    }
    let e = expect_code(
        c.receive(from_queue(
            "prices.>.eu:d",
            ferry_protocol::Order::Time,
            ferry_protocol::ReceiveMode::Peek,
            AckMode::Auto,
            0,
        ))
        .await,
        ErrorCode::InvalidArgument,
    );
    assert!(e.contains("last word"), "{e}");
}

#[tokio::test]
async fn embedded_pattern_consumers_are_pushed_what_they_match() {
    pattern_consumers_are_pushed_what_they_match(TestServer::start().await).await;
}

#[tokio::test]
async fn embedded_a_durable_pattern_subscription_keeps_its_backlog() {
    a_durable_pattern_subscription_keeps_its_backlog(TestServer::start().await).await;
}

#[tokio::test]
async fn embedded_patterns_are_for_subscriptions_only() {
    patterns_are_for_subscriptions_only(TestServer::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_wildcard_subscriptions() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    for scenario in 0..2 {
        let url = tokio::task::block_in_place(|| pg.fresh_database());
        let s = TestServer::start_with(|c| {
            c.store = StoreSetting::Postgres(url);
            c.store_pool_size = 4;
        })
        .await;
        match scenario {
            0 => pattern_consumers_are_pushed_what_they_match(s).await,
            _ => a_durable_pattern_subscription_keeps_its_backlog(s).await,
        }
    }
}
