//! Selector scenarios through the real broker, shared by the embedded and PostgreSQL runs.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use ferry_protocol::{AckMode, Order, ReceiveMode};
use ferry_testkit::TestServer;

use super::*;

/// A message to `q` with a string property `region` and an int property `n`.
pub fn regional(q: &str, body: &str, region: &str, n: i64) -> ferry_protocol::OutgoingMessage {
    let mut m = msg(&[q], body, 5);
    m.properties = vec![
        (
            "region".into(),
            ferry_protocol::PropertyValue::Str(region.into()),
        ),
        ("n".into(), ferry_protocol::PropertyValue::Int(n)),
    ]
    .into();
    m
}

/// The next push of `sub`, failing the test after a while.
pub async fn next(sub: &mut ferry_client::Subscription) -> ferry_protocol::Delivery {
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("a push")
        .unwrap()
        .unwrap()
}

/// A subscription with a selector is pushed only the messages it selects, also later arrivals;
/// the others stay ready, in order, for other receivers.
pub async fn subscription_pushes_only_matching_messages(s: TestServer) {
    let c = s.client("alice").await;
    let other = s.client("bob").await;
    c.create_queue("q").await.unwrap();
    for i in 0..6 {
        let region = if i % 2 == 0 { "eu" } else { "us" };
        c.send(regional("q", &format!("m{i}"), region, i))
            .await
            .unwrap();
    }
    let mut sub = c
        .subscribe(ferry_protocol::requests::Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Client,
            prefetch: 10,
            selector: "region = 'eu'".into(),
        })
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut sub).await);
    }
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["m0", "m2", "m4"]);
    // The others stay ready for other receivers, in order.
    let qs = c.list_queues().await.unwrap();
    assert_eq!((qs[0].ready, qs[0].in_flight), (3, 3));
    let d = take(&other, "q").await.unwrap();
    assert_eq!(body(&d), "m1");
    // Later arrivals: only the matching one is pushed (the wake-up by the other is no push).
    c.send(regional("q", "late-us", "us", 7)).await.unwrap();
    c.send(regional("q", "late-eu", "eu", 8)).await.unwrap();
    assert_eq!(body(&next(&mut sub).await), "late-eu");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), sub.next())
            .await
            .is_err(),
        "nothing else matches"
    );
    let rest: Vec<String> = {
        let mut v = Vec::new();
        while let Some(d) = take(&other, "q").await {
            v.push(body(&d));
        }
        v
    };
    assert_eq!(rest, ["m3", "m5", "late-us"]);
    s.shutdown().await;
}

/// A waiting receive with a selector is woken by every arrival but goes on waiting until one it
/// selects arrives; what it passed over stays.
pub async fn long_poll_waits_past_non_matching_arrivals(s: TestServer) {
    let waiter = s.client("waiter").await;
    let alice = s.client("alice").await;
    alice.create_queue("q").await.unwrap();
    let wanted = |wait_ms| {
        from_queue("q", Order::Time, ReceiveMode::Take, AckMode::Auto, wait_ms)
            .with_selector("region = 'eu' AND n > 1")
    };
    alice.send(regional("q", "old", "eu", 1)).await.unwrap();
    let started = Instant::now();
    assert!(waiter.receive(wanted(300)).await.unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    let w = tokio::spawn(async move { waiter.receive(wanted(20_000)).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(100)).await;
    alice.send(regional("q", "us", "us", 5)).await.unwrap();
    alice.send(regional("q", "small", "eu", 0)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !w.is_finished(),
        "woken by non-matching arrivals, it went on waiting"
    );
    alice
        .send(regional("q", "this one", "eu", 2))
        .await
        .unwrap();
    let d = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body(&d.unwrap()), "this one");
    let mut rest = Vec::new();
    while let Some(d) = take(&alice, "q").await {
        rest.push(body(&d));
    }
    assert_eq!(rest, ["old", "us", "small"]);
    s.shutdown().await;
}
