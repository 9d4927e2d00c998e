//! Pattern subscriptions of the embedded engine across compaction and a reopen: a pattern
//! needs no topic, so a store whose only metadata is a pattern subscription must still carry
//! it in every segment header (compaction deletes the segment holding its record).

use std::sync::Arc;

use ferry_protocol::{AckMode, Order, ReceiveMode, Source, SubscriptionOptions};
use ferry_store::embedded::FaultyBackend;
use ferry_store::{ReceiveSpec, Store};

mod common;
use common::{msg, open};

fn take(queue: &str) -> ReceiveSpec {
    ReceiveSpec {
        source: Source::Queue(queue.into()),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        hold: false,
        client: "c".into(),
        session: 1,
        lease_until_ms: 0,
        selector: None,
        now_ms: 1_700_000_000_000,
        max_bytes: None,
    }
}

#[tokio::test]
async fn a_pattern_subscription_without_topics_survives_compaction_and_reopen() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await.unwrap();
    let durable = SubscriptionOptions {
        durable: true,
        ..SubscriptionOptions::default()
    };
    store
        .topics()
        .subscribe_topic("prices.>", "all", &durable, "c")
        .await
        .unwrap();
    store.queues().create_queue("q").await.unwrap();
    // Enough traffic to roll many segments, all of it taken so compaction drops them.
    for i in 0..200 {
        store
            .queues()
            .send(msg(&["q"], &format!("m{i}")))
            .await
            .unwrap();
        store.queues().receive(&take("q"), 1).await.unwrap();
    }
    let before = store.segments().len();
    for _ in 0..20 {
        store.upkeep().maintain().await.unwrap();
    }
    assert!(
        store.segments().len() * 2 < before,
        "compaction dropped segments, among them the one with the subscription's record"
    );
    drop(store);
    let store = open(&disk, 512).await.unwrap() as Arc<dyn Store>;
    let listed = store.topics().list_topics().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].name, "prices.>");
    assert_eq!(listed[0].subscriptions[0].name, "all");
    store.topics().create_topic("prices.eu").await.unwrap();
    let mut m = msg(&[], "x");
    m.topic = Some("prices.eu".into());
    store.queues().send(m).await.unwrap();
    let got = store
        .queues()
        .receive(&take("prices.>:all"), 10)
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "the pattern goes on matching");
}
