//! Non-persistent publishes to auto-ack push subscriptions, on both engines. The embedded
//! engine hands such a publish straight to an idle subscription's one consumer; what users see
//! must not change: publish order, credit, selectors, competing consumers, and a durable
//! subscription's backlog once its consumer has gone.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_broker::StoreSetting;
use ferry_client::{Client, Subscription};
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::{AckMode, Delivery, OutgoingMessage, PropertyValue};
use ferry_testkit::{PgCluster, TestServer};

/// A guard against a hang when a push never comes (not a way to let time pass).
const GUARD: Duration = Duration::from_secs(20);

fn tick(body: &str) -> OutgoingMessage {
    OutgoingMessage::to_topic("ticks", Bytes::copy_from_slice(body.as_bytes())).non_persistent()
}

fn auto(name: &str, prefetch: u32) -> SubscribeTopic {
    SubscribeTopic::new("ticks")
        .durable(name)
        .ack(AckMode::Auto)
        .prefetch(prefetch)
}

async fn next_one(sub: &mut Subscription, what: &str) -> Delivery {
    tokio::time::timeout(GUARD, sub.next())
        .await
        .unwrap_or_else(|_| panic!("no delivery: {what}"))
        .expect("subscription ended")
        .expect("delivery")
}

async fn next_bodies(sub: &mut Subscription, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(body(&next_one(sub, &format!("only {i} of {n} came")).await));
    }
    out
}

/// Messages waiting on subscription `name` of `ticks`.
async fn waiting(c: &Client, name: &str) -> u64 {
    let topics = c.list_topics().await.unwrap();
    topics
        .iter()
        .find(|t| t.name == "ticks")
        .and_then(|t| t.subscriptions.iter().find(|s| s.name == name))
        .map_or_else(|| panic!("no subscription {name}: {topics:?}"), |s| s.ready)
}

/// Polls until `name` holds `n` messages (a state the broker reaches by itself).
async fn until_waiting(c: &Client, name: &str, n: u64) {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let now = waiting(c, name).await;
        if now == n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} holds {now}, expected {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Client `pub`, with topic `ticks` created.
async fn publisher(s: &TestServer) -> Client {
    let p = s.client("pub").await;
    p.create_topic("ticks").await.unwrap();
    p
}

/// [`publisher`], and client `reader`.
async fn publisher_and_reader(s: &TestServer) -> (Client, Client) {
    (publisher(s).await, s.client("reader").await)
}

fn numbered(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m{i}")).collect()
}

async fn non_persistent_publishes_arrive_in_publish_order_among_persistent_ones(s: TestServer) {
    let (p, r) = publisher_and_reader(&s).await;
    let mut sub = r.subscribe_topic(auto("live", 1000)).await.unwrap();
    let before = s.broker().stats().deliveries.load(Ordering::Relaxed);
    for (i, b) in numbered(150).iter().enumerate() {
        let mut m = tick(b);
        // Every third persistent: those always go through the queue.
        m.persistent = i % 3 == 0;
        p.publish(m).await.unwrap();
    }
    assert_eq!(next_bodies(&mut sub, 150).await, numbered(150));
    assert_eq!(waiting(&p, "live").await, 0);
    let counted = s.broker().stats().deliveries.load(Ordering::Relaxed) - before;
    assert_eq!(counted, 150, "every delivery counted once");
    s.shutdown().await;
}

async fn a_subscriber_gets_no_more_than_its_credit_and_the_rest_waits_in_order(s: TestServer) {
    let (p, r) = publisher_and_reader(&s).await;
    let mut sub = r.subscribe_topic(auto("slow", 4)).await.unwrap();
    for b in numbered(10) {
        p.publish(tick(&b)).await.unwrap();
    }
    // Nothing consumed, so nothing granted: 4 pushed, 6 waiting.
    until_waiting(&p, "slow", 6).await;
    p.ping().await.unwrap();
    assert_eq!(waiting(&p, "slow").await, 6, "pushed beyond the credit");
    assert_eq!(next_bodies(&mut sub, 10).await, numbered(10));
    until_waiting(&p, "slow", 0).await;
    s.shutdown().await;
}

async fn subscription_selectors_filter_non_persistent_publishes(s: TestServer) {
    let (p, r) = publisher_and_reader(&s).await;
    let mut big = r
        .subscribe_topic(auto("big", 100).with_selector("amount > 10"))
        .await
        .unwrap();
    let mut all = r.subscribe_topic(auto("all", 100)).await.unwrap();
    for i in 0..20 {
        let mut m = tick(&format!("m{i}"));
        m.properties = vec![("amount".into(), PropertyValue::Int(i))].into();
        p.publish(m).await.unwrap();
    }
    let expected: Vec<String> = (11..20).map(|i| format!("m{i}")).collect();
    assert_eq!(next_bodies(&mut big, 9).await, expected);
    assert_eq!(next_bodies(&mut all, 20).await, numbered(20));
    p.ping().await.unwrap();
    assert_eq!(waiting(&p, "big").await, 0);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), big.next())
            .await
            .is_err(),
        "the selector let more through"
    );
    s.shutdown().await;
}

async fn shared_consumers_split_non_persistent_publishes_without_duplicates(s: TestServer) {
    let p = publisher(&s).await;
    let spec = || auto("workers", 10).shared();
    let a = s.client("a").await;
    let b = s.client("b").await;
    let mut subs = [
        a.subscribe_topic(spec()).await.unwrap(),
        b.subscribe_topic(spec()).await.unwrap(),
    ];
    for m in numbered(60) {
        p.publish(tick(&m)).await.unwrap();
    }
    let mut seen = HashSet::new();
    let mut per = [0usize; 2];
    let deadline = tokio::time::Instant::now() + GUARD;
    while seen.len() < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {}",
            seen.len()
        );
        for (i, sub) in subs.iter_mut().enumerate() {
            if let Ok(Some(Ok(d))) =
                tokio::time::timeout(Duration::from_millis(20), sub.next()).await
            {
                assert!(seen.insert(body(&d)), "{} delivered twice", body(&d));
                per[i] += 1;
            }
        }
    }
    assert!(
        per.iter().all(|&n| n > 0),
        "one consumer got everything: {per:?}"
    );
    s.shutdown().await;
}

async fn a_durable_subscription_keeps_what_is_published_after_its_consumer_left(s: TestServer) {
    let (p, r) = publisher_and_reader(&s).await;
    let mut sub = r.subscribe_topic(auto("keep", 100)).await.unwrap();
    p.publish(tick("first")).await.unwrap();
    assert_eq!(next_bodies(&mut sub, 1).await, ["first"]);
    // Gone by cancel: published messages wait.
    sub.cancel().await;
    p.publish(tick("a")).await.unwrap();
    assert_eq!(waiting(&p, "keep").await, 1);
    let mut sub = r.subscribe_topic(auto("keep", 100)).await.unwrap();
    assert_eq!(next_bodies(&mut sub, 1).await, ["a"]);
    // Gone by disconnect: once it returns, published messages wait.
    r.disconnect().await.unwrap();
    p.publish(tick("b")).await.unwrap();
    p.publish(tick("c")).await.unwrap();
    assert_eq!(waiting(&p, "keep").await, 2);
    let r = s.client("reader").await;
    let mut sub = r.subscribe_topic(auto("keep", 100)).await.unwrap();
    assert_eq!(next_bodies(&mut sub, 2).await, ["b", "c"]);
    s.shutdown().await;
}

async fn a_committed_publish_is_not_overtaken_by_a_later_one(s: TestServer) {
    let (p, r) = publisher_and_reader(&s).await;
    let mut sub = r.subscribe_topic(auto("txn", 100)).await.unwrap();
    for round in 0..20 {
        p.begin().await.unwrap();
        p.publish(tick(&format!("t{round}"))).await.unwrap();
        p.commit().await.unwrap();
        p.publish(tick(&format!("after{round}"))).await.unwrap();
        assert_eq!(
            next_bodies(&mut sub, 2).await,
            [format!("t{round}"), format!("after{round}")]
        );
    }
    s.shutdown().await;
}

macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(TestServer::start().await).await;
                }
            )*
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn postgres_direct_delivery_scenarios() {
            let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
            $(
                let url = tokio::task::block_in_place(|| pg.fresh_database());
                let s = TestServer::start_with(|c| {
                    c.store = StoreSetting::Postgres(url);
                    c.store_pool_size = 4;
                })
                .await;
                $name(s).await;
            )*
        }
    };
}

on_both_engines!(
    non_persistent_publishes_arrive_in_publish_order_among_persistent_ones,
    a_subscriber_gets_no_more_than_its_credit_and_the_rest_waits_in_order,
    subscription_selectors_filter_non_persistent_publishes,
    shared_consumers_split_non_persistent_publishes_without_duplicates,
    a_durable_subscription_keeps_what_is_published_after_its_consumer_left,
    a_committed_publish_is_not_overtaken_by_a_later_one,
);
