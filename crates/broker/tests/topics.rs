//! Topics through the broker, on both engines: publish with selectors, durable subscriptions
//! (backlog kept across disconnects and restarts), shared subscriptions as competing consumers,
//! exclusive durable subscriptions, non-durable subscriptions that live with their consumer,
//! pulling from a subscription's queue, and non-persistent messages.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_broker::StoreSetting;
use ferry_client::{Client, Subscription};
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::{
    AckMode, Delivery, ErrorCode, Order, OutgoingMessage, PropertyValue, ReceiveMode,
};
use ferry_testkit::{PgCluster, TestServer};

/// A guard against a hang when a push never comes (not a way to let time pass).
const GUARD: Duration = Duration::from_secs(20);

fn order(n: i64, region: &str, amount: i64) -> OutgoingMessage {
    let mut m = OutgoingMessage::to_topic("orders", Bytes::from(format!("order-{n}")));
    m.properties = vec![
        ("region".into(), PropertyValue::Str(region.into())),
        ("amount".into(), PropertyValue::Int(amount)),
    ]
    .into();
    m
}

/// The next delivery of `sub`, within [`GUARD`]; `what` names the expectation if none comes.
async fn next_one(sub: &mut Subscription, what: &str) -> Delivery {
    tokio::time::timeout(GUARD, sub.next())
        .await
        .unwrap_or_else(|_| panic!("no delivery: {what}"))
        .expect("subscription ended")
        .expect("delivery")
}

/// The next `n` deliveries of `sub`, acked when it uses client ack.
async fn next_n(c: &Client, sub: &mut Subscription, n: usize) -> Vec<Delivery> {
    let mut out = Vec::new();
    while out.len() < n {
        let d = next_one(sub, &format!("only {} of {n} deliveries came", out.len())).await;
        if d.delivery_id != 0 {
            c.ack(&[d.delivery_id]).await.unwrap();
        }
        out.push(d);
    }
    out
}

fn bodies(ds: &[Delivery]) -> Vec<String> {
    ds.iter().map(body).collect()
}

/// Nothing ready on `queue` (a subscription's queue, pulled).
async fn assert_drained(c: &Client, queue: &str) {
    let got = c
        .receive(from_queue(
            queue,
            Order::Time,
            ReceiveMode::Peek,
            AckMode::Auto,
            0,
        ))
        .await
        .unwrap();
    assert!(
        got.is_none(),
        "{queue} still holds {:?}",
        got.map(|d| body(&d))
    );
}

async fn two_durable_subscriptions_with_different_selectors_get_exactly_their_messages(
    s: TestServer,
) {
    let c = s.client("pub").await;
    c.create_topic("orders").await.unwrap();
    let eu = c
        .ensure_subscription(
            SubscribeTopic::new("orders")
                .durable("eu")
                .with_selector("region = 'eu'"),
        )
        .await
        .unwrap();
    assert_eq!(eu, "orders:eu");
    c.ensure_subscription(
        SubscribeTopic::new("orders")
            .durable("big")
            .with_selector("amount > 100"),
    )
    .await
    .unwrap();
    c.ensure_subscription(SubscribeTopic::new("orders").durable("all"))
        .await
        .unwrap();
    let sent = [
        ("eu", 50),
        ("us", 500),
        ("eu", 101),
        ("apac", 7),
        ("eu", 100),
        ("us", 99),
    ];
    for (i, (region, amount)) in sent.iter().enumerate() {
        c.publish(order(i as i64, region, *amount)).await.unwrap();
    }
    // A message without the properties: NULL comparisons are UNKNOWN, so only `all` gets it.
    c.publish(OutgoingMessage::to_topic("orders", "bare"))
        .await
        .unwrap();

    let topics = c.list_topics().await.unwrap();
    let subs: HashMap<_, _> = topics[0]
        .subscriptions
        .iter()
        .map(|s| (s.name.as_str(), s.ready))
        .collect();
    assert_eq!(subs, HashMap::from([("all", 7), ("big", 2), ("eu", 3)]));

    let reader = s.client("reader").await;
    let mut got = HashMap::new();
    for (name, n) in [("eu", 3), ("big", 2), ("all", 7)] {
        let mut sub = reader
            .subscribe_topic(SubscribeTopic::new("orders").durable(name).with_selector(
                match name {
                    "eu" => "region = 'eu'",
                    "big" => "amount > 100",
                    _ => "",
                },
            ))
            .await
            .unwrap();
        assert_eq!(sub.queue(), format!("orders:{name}"));
        got.insert(name, bodies(&next_n(&reader, &mut sub, n).await));
        sub.cancel().await;
        assert_drained(&reader, &format!("orders:{name}")).await;
    }
    assert_eq!(got["eu"], ["order-0", "order-2", "order-4"]);
    assert_eq!(got["big"], ["order-1", "order-2"]);
    assert_eq!(got["all"].len(), 7);
    s.shutdown().await;
}

async fn a_durable_subscription_keeps_its_backlog_across_disconnect_and_restart(s: TestServer) {
    let c = s.client("pub").await;
    c.create_topic("news").await.unwrap();
    let reader = s.client("reader").await;
    let sub = reader
        .subscribe_topic(SubscribeTopic::new("news").durable("archive"))
        .await
        .unwrap();
    sub.cancel().await;
    reader.disconnect().await.unwrap();
    for i in 0..3 {
        c.publish(OutgoingMessage::to_topic("news", format!("n{i}")))
            .await
            .unwrap();
    }
    c.disconnect().await.unwrap();
    let s = s.restart().await;
    let reader = s.client("reader").await;
    let mut sub = reader
        .subscribe_topic(SubscribeTopic::new("news").durable("archive"))
        .await
        .unwrap();
    assert_eq!(
        bodies(&next_n(&reader, &mut sub, 3).await),
        ["n0", "n1", "n2"]
    );
    sub.cancel().await;
    reader.unsubscribe("news", "archive").await.unwrap();
    let topics = reader.list_topics().await.unwrap();
    assert!(
        topics[0].subscriptions.is_empty(),
        "unsubscribed: {topics:?}"
    );
    s.shutdown().await;
}

async fn a_shared_subscription_spreads_messages_over_its_consumers_without_duplicates(
    s: TestServer,
) {
    let c = s.client("pub").await;
    c.create_topic("jobs").await.unwrap();
    let spec = || {
        SubscribeTopic::new("jobs")
            .durable("workers")
            .shared()
            .ack(AckMode::Client)
            .prefetch(5)
    };
    let mut workers = Vec::new();
    for i in 0..3 {
        let w = s.client(&format!("worker{i}")).await;
        let sub = w.subscribe_topic(spec()).await.unwrap();
        workers.push((w, sub));
    }
    for i in 0..60 {
        c.publish(OutgoingMessage::to_topic("jobs", format!("job{i}")))
            .await
            .unwrap();
    }
    // With 5 unacked deliveries at most per consumer, the first 15 are spread 5/5/5.
    let mut held = Vec::new();
    for (_, sub) in workers.iter_mut() {
        let mut mine = Vec::new();
        for _ in 0..5 {
            let d = next_one(sub, "each shared consumer gets its prefetch").await;
            mine.push(d);
        }
        held.push(mine);
    }
    let mut seen: HashSet<String> = HashSet::new();
    for ((w, _), mine) in workers.iter().zip(&held) {
        for d in mine {
            assert!(seen.insert(body(d)), "{} delivered twice", body(d));
            assert!(!d.message.redelivered());
        }
        let ids: Vec<u64> = mine.iter().map(|d| d.delivery_id).collect();
        w.ack(&ids).await.unwrap();
    }
    // The remaining 45, acked as they come, whoever gets them.
    let mut rest = 0;
    while seen.len() < 60 {
        for (w, sub) in workers.iter_mut() {
            if let Ok(Some(Ok(d))) =
                tokio::time::timeout(Duration::from_millis(50), sub.next()).await
            {
                assert!(seen.insert(body(&d)), "{} delivered twice", body(&d));
                w.ack(&[d.delivery_id]).await.unwrap();
                rest += 1;
            }
        }
        assert!(rest <= 45, "more deliveries than messages");
    }
    assert_eq!(seen.len(), 60);
    s.shutdown().await;
}

async fn a_durable_subscription_that_is_not_shared_has_one_consumer_at_a_time(s: TestServer) {
    let a = s.client("a").await;
    let b = s.client("b").await;
    a.create_topic("t").await.unwrap();
    let sub = a
        .subscribe_topic(SubscribeTopic::new("t").durable("solo"))
        .await
        .unwrap();
    let msg = expect_code(
        b.subscribe_topic(SubscribeTopic::new("t").durable("solo"))
            .await,
        ErrorCode::SubscriptionInUse,
    );
    assert!(msg.contains("t:solo"), "{msg}");
    expect_code(
        b.unsubscribe("t", "solo").await,
        ErrorCode::SubscriptionInUse,
    );
    // Asking for it as shared does not get around it either.
    expect_code(
        b.subscribe_topic(SubscribeTopic::new("t").durable("solo").shared())
            .await,
        ErrorCode::SubscriptionInUse,
    );
    sub.cancel().await;
    let sub = b
        .subscribe_topic(SubscribeTopic::new("t").durable("solo"))
        .await
        .expect("free once the first consumer is gone");
    sub.cancel().await;
    b.unsubscribe("t", "solo").await.unwrap();
    s.shutdown().await;
}

async fn a_non_durable_subscription_lives_as_long_as_its_consumer(s: TestServer) {
    let c = s.client("pub").await;
    c.create_topic("ticks").await.unwrap();
    c.publish(OutgoingMessage::to_topic("ticks", "before"))
        .await
        .unwrap();
    let reader = s.client("reader").await;
    let mut sub = reader
        .subscribe_topic(SubscribeTopic::new("ticks").ack(AckMode::Auto))
        .await
        .unwrap();
    assert!(sub.queue().starts_with("ticks:~reader."), "{}", sub.queue());
    c.publish(OutgoingMessage::to_topic("ticks", "after"))
        .await
        .unwrap();
    assert_eq!(
        bodies(&next_n(&reader, &mut sub, 1).await),
        ["after"],
        "only messages published after subscribing"
    );
    let topics = c.list_topics().await.unwrap();
    assert_eq!(topics[0].subscriptions.len(), 1);
    assert!(!topics[0].subscriptions[0].durable);
    sub.cancel().await;
    assert!(c.list_topics().await.unwrap()[0].subscriptions.is_empty());
    // Ended by a disconnect too.
    let _sub = reader
        .subscribe_topic(SubscribeTopic::new("ticks"))
        .await
        .unwrap();
    assert_eq!(c.list_topics().await.unwrap()[0].subscriptions.len(), 1);
    reader.disconnect().await.unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if c.list_topics().await.unwrap()[0].subscriptions.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the non-durable subscription outlived its session");
    s.shutdown().await;
}

async fn a_shared_non_durable_subscription_lives_while_any_session_consumes_it(s: TestServer) {
    let c = s.client("pub").await;
    c.create_topic("jobs").await.unwrap();
    let spec = || {
        SubscribeTopic::new("jobs")
            .shared_as("pool")
            .ack(AckMode::Client)
            .prefetch(5)
    };
    let w1 = s.client("w1").await;
    let w2 = s.client("w2").await;
    let mut sub1 = w1.subscribe_topic(spec()).await.unwrap();
    let mut sub2 = w2.subscribe_topic(spec()).await.unwrap();
    assert_eq!(sub1.queue(), "jobs:pool");
    let subs = &c.list_topics().await.unwrap()[0].subscriptions;
    assert_eq!(subs.len(), 1, "one subscription, two consumers: {subs:?}");
    assert!(subs[0].shared && !subs[0].durable, "{subs:?}");
    for i in 0..40 {
        c.publish(OutgoingMessage::to_topic("jobs", format!("job{i}")))
            .await
            .unwrap();
    }
    // Each consumer gets its prefetch before anyone settles; then they drain the rest.
    let mut seen = std::collections::BTreeSet::new();
    for (w, sub) in [(&w1, &mut sub1), (&w2, &mut sub2)] {
        for _ in 0..5 {
            let d = next_one(sub, "each shared consumer gets its prefetch").await;
            assert!(seen.insert(body(&d)), "{} delivered twice", body(&d));
            w.ack(&[d.delivery_id]).await.unwrap();
        }
    }
    while seen.len() < 40 {
        for (w, sub) in [(&w1, &mut sub1), (&w2, &mut sub2)] {
            if let Ok(Some(Ok(d))) =
                tokio::time::timeout(Duration::from_millis(50), sub.next()).await
            {
                assert!(seen.insert(body(&d)), "{} delivered twice", body(&d));
                w.ack(&[d.delivery_id]).await.unwrap();
            }
        }
    }
    // The subscription outlives its first consumer, not its last.
    sub1.cancel().await;
    assert_eq!(c.list_topics().await.unwrap()[0].subscriptions.len(), 1);
    c.publish(OutgoingMessage::to_topic("jobs", "kept"))
        .await
        .unwrap();
    let d = next_one(&mut sub2, "the remaining consumer gets what is published").await;
    assert_eq!(body(&d), "kept");
    w2.ack(&[d.delivery_id]).await.unwrap();
    c.publish(OutgoingMessage::to_topic("jobs", "left"))
        .await
        .unwrap();
    sub2.cancel().await;
    assert!(
        c.list_topics().await.unwrap()[0].subscriptions.is_empty(),
        "gone with its last consumer"
    );
    // Made again, it starts empty: what it held went with it.
    let mut again = w1.subscribe_topic(spec()).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), again.next())
            .await
            .is_err(),
        "a new shared subscription starts empty"
    );
    again.cancel().await;
    s.shutdown().await;
}

async fn a_subscription_queue_is_pulled_like_a_queue_but_not_listed_as_one(s: TestServer) {
    let c = s.client("c").await;
    c.create_topic("t").await.unwrap();
    c.create_queue("t")
        .await
        .expect("queues and topics have separate names");
    c.ensure_subscription(SubscribeTopic::new("t").durable("pull"))
        .await
        .unwrap();
    c.publish(OutgoingMessage::to_topic("t", "one"))
        .await
        .unwrap();
    let names: Vec<String> = c
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, ["t"], "subscription queues are not listed as queues");
    let d = take_client_ack(&c, "t:pull")
        .await
        .expect("pulled from the subscription");
    assert_eq!(body(&d), "one");
    assert_eq!(d.message.queue, "t:pull");
    c.nack(&[d.delivery_id], true).await.unwrap();
    let d = take(&c, "t:pull").await.expect("back after the nack");
    assert!(d.message.redelivered());
    assert!(
        take(&c, "t").await.is_none(),
        "the queue named like the topic got nothing"
    );
    s.shutdown().await;
}

/// Embedded only: non-persistent messages are delivered like others and gone after a restart.
async fn non_persistent_messages_are_delivered_and_do_not_survive_a_restart(s: TestServer) {
    let c = s.client("c").await;
    c.create_queue("q").await.unwrap();
    c.send(msg(&["q"], "fast", 5).non_persistent())
        .await
        .unwrap();
    assert_eq!(body(&take(&c, "q").await.unwrap()), "fast");
    c.send(msg(&["q"], "kept", 5)).await.unwrap();
    c.send(msg(&["q"], "lost", 5).non_persistent())
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    let s = s.restart().await;
    let c = s.client("c").await;
    assert_eq!(body(&take(&c, "q").await.unwrap()), "kept");
    assert!(
        take(&c, "q").await.is_none(),
        "a non-persistent message survived a restart"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn embedded_two_durable_subscriptions_with_different_selectors_get_exactly_their_messages() {
    two_durable_subscriptions_with_different_selectors_get_exactly_their_messages(
        TestServer::start().await,
    )
    .await;
}

#[tokio::test]
async fn embedded_a_durable_subscription_keeps_its_backlog_across_disconnect_and_restart() {
    a_durable_subscription_keeps_its_backlog_across_disconnect_and_restart(
        TestServer::start().await,
    )
    .await;
}

#[tokio::test]
async fn embedded_a_shared_subscription_spreads_messages_over_its_consumers_without_duplicates() {
    a_shared_subscription_spreads_messages_over_its_consumers_without_duplicates(
        TestServer::start().await,
    )
    .await;
}

#[tokio::test]
async fn embedded_a_durable_subscription_that_is_not_shared_has_one_consumer_at_a_time() {
    a_durable_subscription_that_is_not_shared_has_one_consumer_at_a_time(TestServer::start().await)
        .await;
}

#[tokio::test]
async fn embedded_a_non_durable_subscription_lives_as_long_as_its_consumer() {
    a_non_durable_subscription_lives_as_long_as_its_consumer(TestServer::start().await).await;
}

#[tokio::test]
async fn embedded_a_shared_non_durable_subscription_lives_while_any_session_consumes_it() {
    a_shared_non_durable_subscription_lives_while_any_session_consumes_it(
        TestServer::start().await,
    )
    .await;
}

#[tokio::test]
async fn embedded_a_subscription_queue_is_pulled_like_a_queue_but_not_listed_as_one() {
    a_subscription_queue_is_pulled_like_a_queue_but_not_listed_as_one(TestServer::start().await)
        .await;
}

#[tokio::test]
async fn embedded_non_persistent_messages_are_delivered_and_do_not_survive_a_restart() {
    non_persistent_messages_are_delivered_and_do_not_survive_a_restart(TestServer::start().await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_topics_and_subscriptions() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    for scenario in 0..7 {
        let url = tokio::task::block_in_place(|| pg.fresh_database());
        let s = TestServer::start_with(|c| {
            c.store = StoreSetting::Postgres(url);
            c.store_pool_size = 4;
        })
        .await;
        match scenario {
            0 => {
                two_durable_subscriptions_with_different_selectors_get_exactly_their_messages(s)
                    .await
            }
            1 => a_durable_subscription_keeps_its_backlog_across_disconnect_and_restart(s).await,
            2 => {
                a_shared_subscription_spreads_messages_over_its_consumers_without_duplicates(s)
                    .await
            }
            3 => a_durable_subscription_that_is_not_shared_has_one_consumer_at_a_time(s).await,
            4 => a_non_durable_subscription_lives_as_long_as_its_consumer(s).await,
            5 => a_shared_non_durable_subscription_lives_while_any_session_consumes_it(s).await,
            _ => a_subscription_queue_is_pulled_like_a_queue_but_not_listed_as_one(s).await,
        }
    }
}
