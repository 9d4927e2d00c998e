//! Delayed delivery, time to live and dead-lettering through the broker, on both engines, with
//! the broker's clock moved by hand (a [`ManualClock`]): nothing here sleeps to let time pass.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ferry_broker::StoreSetting;
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{AckMode, Order, PropertyValue, QueueOptions, ReceiveMode};
use ferry_testkit::{ManualClock, PgCluster, TestServer};

/// The manual clock's start: any fixed time.
const START: u64 = 1_800_000_000_000;

/// A guard against a test hanging when a wake-up is missed (not a way to let time pass).
const GUARD: Duration = Duration::from_secs(20);

/// A long poll waiting on a queue is woken when a delayed message there becomes due, and gets
/// it; before that, nothing is visible.
async fn long_poll_wakes_when_a_delayed_message_is_due(s: TestServer, clock: Arc<ManualClock>) {
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    alice.create_queue("later").await.unwrap();
    alice
        .send(msg(&["later"], "wake up", 5).with_delay_ms(5_000))
        .await
        .unwrap();
    assert!(
        take(&bob, "later").await.is_none(),
        "not visible before its time"
    );
    let qs = alice.list_queues().await.unwrap();
    assert_eq!(qs[0].ready, 1, "a delayed message counts in the depth");
    let waiter = {
        let bob = bob.clone();
        tokio::spawn(async move {
            bob.receive(from_queue(
                "later",
                Order::Time,
                ReceiveMode::Take,
                AckMode::Auto,
                60_000,
            ))
            .await
        })
    };
    // A reply to a later request on the same connection means the receive has started and
    // found nothing (requests start in the order they arrive).
    bob.list_queues().await.unwrap();
    clock.advance(4_999);
    bob.list_queues().await.unwrap();
    assert!(!waiter.is_finished(), "woken before the delivery time");
    clock.advance(1);
    let got = tokio::time::timeout(GUARD, waiter)
        .await
        .expect("the long poll was not woken when the message became due")
        .unwrap()
        .unwrap()
        .expect("a message");
    assert_eq!(body(&got), "wake up");
    assert_eq!(got.message.created_at, START);
    s.shutdown().await;
}

/// A subscription gets a delayed message pushed when it becomes due.
async fn subscription_pushed_when_a_delayed_message_is_due(s: TestServer, clock: Arc<ManualClock>) {
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    alice.create_queue("later").await.unwrap();
    let mut sub = bob
        .subscribe(Subscribe {
            queue: "later".into(),
            order: Order::Time,
            ack: AckMode::Client,
            prefetch: 10,
            selector: String::new(),
        })
        .await
        .unwrap();
    alice
        .send(msg(&["later"], "pushed", 5).with_delay_ms(1_000))
        .await
        .unwrap();
    clock.advance(1_000);
    let d = tokio::time::timeout(GUARD, sub.next())
        .await
        .expect("no push when the delayed message became due")
        .unwrap()
        .unwrap();
    assert_eq!(body(&d), "pushed");
    bob.ack(&[d.delivery_id]).await.unwrap();
    s.shutdown().await;
}

/// A message past its time to live is never delivered; one within it carries its expiry time.
async fn expired_messages_are_never_delivered(s: TestServer, clock: Arc<ManualClock>) {
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    alice.create_queue("q").await.unwrap();
    alice
        .send(msg(&["q"], "short", 9).with_ttl_ms(1_000))
        .await
        .unwrap();
    alice
        .send(msg(&["q"], "long", 5).with_ttl_ms(60_000))
        .await
        .unwrap();
    let d = take_client_ack(&bob, "q").await.unwrap();
    assert_eq!(body(&d), "short");
    assert_eq!(d.message.expires_at, START + 1_000);
    bob.nack(&[d.delivery_id], true).await.unwrap();
    clock.advance(1_000);
    let d = take(&bob, "q").await.unwrap();
    assert_eq!(body(&d), "long", "the expired message is passed over");
    assert_eq!(d.message.expires_at, START + 60_000);
    assert!(take(&bob, "q").await.is_none());
    s.shutdown().await;
}

/// A client-ack delivery whose lease expires (on the manual clock) for the second time on a
/// queue with at most 2 deliveries goes to its dead-letter queue, waking a long poll there.
async fn dead_lettered_by_lease_expiry(s: TestServer, clock: Arc<ManualClock>) {
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    alice.create_queue("dead").await.unwrap();
    alice
        .create_queue_with(
            "work",
            QueueOptions {
                max_deliveries: 2,
                dead_letter_queue: Some("dead".into()),
                expiry_queue: None,
            },
        )
        .await
        .unwrap();
    alice.send(msg(&["work"], "poison", 5)).await.unwrap();
    let wait = |q: &str| from_queue(q, Order::Time, ReceiveMode::Take, AckMode::Client, 60_000);
    let d = take_client_ack(&bob, "work").await.unwrap();
    assert_eq!(d.message.delivery_count, 0);
    let again = tokio::spawn({
        let (bob, r) = (bob.clone(), wait("work"));
        async move { bob.receive(r).await }
    });
    bob.list_queues().await.unwrap();
    clock.advance(u64::from(LEASE_MS));
    let d = tokio::time::timeout(GUARD, again)
        .await
        .expect("the expired delivery did not come back")
        .unwrap()
        .unwrap()
        .expect("a message");
    assert_eq!(d.message.delivery_count, 1);
    let dead = tokio::spawn({
        let (bob, r) = (bob.clone(), wait("dead"));
        async move { bob.receive(r).await }
    });
    bob.list_queues().await.unwrap();
    clock.advance(u64::from(LEASE_MS));
    let d = tokio::time::timeout(GUARD, dead)
        .await
        .expect("the long poll on the dead-letter queue was not woken")
        .unwrap()
        .unwrap()
        .expect("a message");
    assert_eq!(body(&d), "poison");
    let count = d
        .message
        .properties
        .iter()
        .find(|(n, _)| n == "ferry_delivery_count")
        .map(|(_, v)| v.clone());
    assert_eq!(count, Some(PropertyValue::Int(2)));
    let qs = alice.list_queues().await.unwrap();
    let work = qs.iter().find(|q| q.name == "work").unwrap();
    assert_eq!((work.ready, work.in_flight), (0, 0));
    s.shutdown().await;
}

/// Expired messages leave their queue through the broker's upkeep alone, with no receive
/// passing over them; a message without a time to live stays.
async fn expired_messages_leave_their_queue_without_a_receive(
    s: TestServer,
    clock: Arc<ManualClock>,
) {
    let alice = s.client("alice").await;
    alice.create_queue("q").await.unwrap();
    for i in 0..3 {
        alice
            .send(msg(&["q"], &format!("short {i}"), 5).with_ttl_ms(1_000))
            .await
            .unwrap();
    }
    alice.send(msg(&["q"], "plain", 5)).await.unwrap();
    let ready = || async {
        let queues = alice.list_queues().await.unwrap();
        queues.iter().find(|q| q.name == "q").map(|q| q.ready)
    };
    assert_eq!(ready().await, Some(4));
    clock.advance(1_000);
    // The upkeep runs every second of real time: poll for its effect, bounded by the guard.
    tokio::time::timeout(GUARD, async {
        while ready().await != Some(1) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the expired messages are still queued");
    let d = take(&alice, "q").await.unwrap();
    assert_eq!(body(&d), "plain");
    s.shutdown().await;
}

/// A short lease, so the broker's expiry job (every quarter lease, at least 10 ms of real
/// time) notices a lease the manual clock ended quickly.
const LEASE_MS: u32 = 40;

#[tokio::test]
async fn embedded_dead_lettered_by_lease_expiry() {
    let clock = ManualClock::new(START);
    let s = TestServer::start_with_clock(clock.clone(), |c| c.limits.lease_ms = LEASE_MS).await;
    dead_lettered_by_lease_expiry(s, clock).await;
}

#[tokio::test]
async fn embedded_long_poll_wakes_when_a_delayed_message_is_due() {
    let clock = ManualClock::new(START);
    let s = TestServer::start_with_clock(clock.clone(), |_| {}).await;
    long_poll_wakes_when_a_delayed_message_is_due(s, clock).await;
}

#[tokio::test]
async fn embedded_subscription_pushed_when_a_delayed_message_is_due() {
    let clock = ManualClock::new(START);
    let s = TestServer::start_with_clock(clock.clone(), |_| {}).await;
    subscription_pushed_when_a_delayed_message_is_due(s, clock).await;
}

#[tokio::test]
async fn embedded_expired_messages_are_never_delivered() {
    let clock = ManualClock::new(START);
    let s = TestServer::start_with_clock(clock.clone(), |_| {}).await;
    expired_messages_are_never_delivered(s, clock).await;
}

#[tokio::test]
async fn embedded_expired_messages_leave_their_queue_without_a_receive() {
    let clock = ManualClock::new(START);
    let s = TestServer::start_with_clock(clock.clone(), |_| {}).await;
    expired_messages_leave_their_queue_without_a_receive(s, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_delay_ttl_and_dead_letters() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    for scenario in 0..5 {
        let url = tokio::task::block_in_place(|| pg.fresh_database());
        let clock = ManualClock::new(START);
        let s = TestServer::start_with_clock(clock.clone(), |c| {
            c.store = StoreSetting::Postgres(url);
            c.store_pool_size = 4;
            c.limits.lease_ms = LEASE_MS;
        })
        .await;
        match scenario {
            0 => long_poll_wakes_when_a_delayed_message_is_due(s, clock).await,
            1 => subscription_pushed_when_a_delayed_message_is_due(s, clock).await,
            2 => expired_messages_are_never_delivered(s, clock).await,
            3 => expired_messages_leave_their_queue_without_a_receive(s, clock).await,
            _ => dead_lettered_by_lease_expiry(s, clock).await,
        }
    }
}
