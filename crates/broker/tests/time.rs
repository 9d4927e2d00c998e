//! Delayed delivery and time to live through the broker, on both engines, with the broker's
//! clock moved by hand (a [`ManualClock`]): nothing here sleeps to let time pass.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ferry_broker::StoreSetting;
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{AckMode, Order, ReceiveMode};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_delay_and_ttl() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    for scenario in 0..3 {
        let url = tokio::task::block_in_place(|| pg.fresh_database());
        let clock = ManualClock::new(START);
        let s = TestServer::start_with_clock(clock.clone(), |c| {
            c.store = StoreSetting::Postgres(url);
            c.store_pool_size = 4;
        })
        .await;
        match scenario {
            0 => long_poll_wakes_when_a_delayed_message_is_due(s, clock).await,
            1 => subscription_pushed_when_a_delayed_message_is_due(s, clock).await,
            _ => expired_messages_are_never_delivered(s, clock).await,
        }
    }
}
