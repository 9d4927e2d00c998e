//! Compaction: dead segments go, live messages move forward, nothing comes back, and disk use
//! stays bounded even behind an old backlog.

use ferry_protocol::{AckMode, ReceiveMode};
use ferry_store::embedded::FaultyBackend;
use ferry_store::Store;

mod common;
use common::{bodies, msg, open, peek_all, segments, spec};

fn disk_bytes(disk: &FaultyBackend) -> usize {
    segments(disk).iter().map(|(_, len)| len).sum()
}

#[tokio::test]
async fn dead_segments_are_deleted_and_live_messages_kept() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    for i in 0..200 {
        store
            .queues()
            .send(msg(&["q"], &format!("m{i}")))
            .await
            .unwrap();
        if i % 10 != 0 {
            store.queues().receive(&take, 1).await.unwrap();
        }
    }
    let before = segments(&disk).len();
    let kept = bodies(&peek_all(&store, "q").await);
    assert_eq!(kept.len(), 20);
    for _ in 0..20 {
        store.upkeep().maintain().await.unwrap();
    }
    let after = segments(&disk).len();
    assert!(
        after * 3 < before,
        "{before} segments before, {after} after"
    );
    assert_eq!(bodies(&peek_all(&store, "q").await), kept);
    drop(store);
    let store = open(&disk, 512).await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "q").await), kept);
}

#[tokio::test]
async fn removals_behind_a_live_segment_never_resurrect_messages() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 400).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().create_queue("keep").await.unwrap();
    // Segment 1: a big live message and a small one that is taken later.
    store
        .queues()
        .send(msg(&["keep"], &"k".repeat(300)))
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "victim")).await.unwrap();
    // Later segments: the victim's removal, then dead churn.
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    assert_eq!(
        bodies(&store.queues().receive(&take, 1).await.unwrap()),
        vec!["victim"]
    );
    for i in 0..10 {
        store
            .queues()
            .send(msg(&["q"], &format!("churn {i}")))
            .await
            .unwrap();
        store.queues().receive(&take, 1).await.unwrap();
    }
    store.upkeep().maintain().await.unwrap();
    drop(store);
    let store = open(&disk, 400).await.unwrap();
    assert!(
        peek_all(&store, "q").await.is_empty(),
        "a removed message came back"
    );
    assert_eq!(peek_all(&store, "keep").await.len(), 1);
}

#[tokio::test]
async fn disk_use_stays_bounded_behind_an_old_backlog() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 1024).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("backlog").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    for i in 0..20 {
        store
            .queues()
            .send(msg(&["backlog"], &format!("{i:0>200}")))
            .await
            .unwrap();
    }
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    let mut peak = 0;
    for round in 0..30 {
        for i in 0..50 {
            store
                .queues()
                .send(msg(&["q"], &format!("r{round} m{i} {:0>40}", 0)))
                .await
                .unwrap();
            store.queues().receive(&take, 1).await.unwrap();
        }
        // Each call has a budget; a few calls catch up with a round of churn.
        for _ in 0..4 {
            store.upkeep().maintain().await.unwrap();
        }
        peak = peak.max(disk_bytes(&disk));
    }
    // About 4.5 KiB live: space stays within twice that plus a few segments.
    assert!(peak < 2 * 4_600 + 6 * 1024, "peak {peak} bytes");
    drop(store);
    let store = open(&disk, 1024).await.unwrap();
    assert_eq!(peek_all(&store, "backlog").await.len(), 20);
}
