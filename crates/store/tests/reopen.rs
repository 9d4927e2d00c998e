//! Reopening a store keeps its state: clients, queues, messages (all fields), delivery counts,
//! the next message id, across several segments, on the real filesystem.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::Arc;

use ferry_protocol::{AckMode, PropertyValue, ReceiveMode};
use ferry_store::{EmbeddedConfig, EmbeddedStore, Store, StoreError};

mod common;
use common::{bodies, msg, peek_all, spec};

async fn open(dir: &std::path::Path) -> Arc<EmbeddedStore> {
    let mut cfg = EmbeddedConfig::new(dir);
    cfg.segment_bytes = 300; // several segments
    EmbeddedStore::open(cfg).await.unwrap()
}

#[tokio::test]
async fn reopen_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.sessions().register_client("p").await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.sessions().register_client("r").await.unwrap();
    for q in ["a", "b", "gone"] {
        store.queues().create_queue(q).await.unwrap();
    }
    store.queues().delete_queue("gone", false).await.unwrap();
    let mut rich = msg(&["a", "b"], "rich");
    rich.receiver = Some("r".into());
    rich.priority = 8;
    rich.context = 99;
    rich.created_at = 123_456;
    rich.properties = vec![("k".into(), PropertyValue::Str("v".into()))].into();
    let rich_id = store.queues().send(rich.clone()).await.unwrap();
    let mut last = 0;
    for i in 0..20 {
        last = store
            .queues()
            .send(msg(&["a"], &format!("m{i}")))
            .await
            .unwrap();
    }
    // m0 taken (auto ack), m1 leased and acked, m2 leased and not acked, m3 nacked and requeued.
    let take = spec("a", ReceiveMode::Take, AckMode::Auto, 1);
    let lease = spec("a", ReceiveMode::Take, AckMode::Client, 1);
    assert_eq!(
        bodies(&store.queues().receive(&take, 1).await.unwrap()),
        vec!["m0"]
    );
    let d = store.queues().receive(&lease, 3).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1", "m2", "m3"]);
    store.queues().ack(1, &[d[0].delivery_id]).await.unwrap();
    store
        .queues()
        .nack(1, &[d[2].delivery_id], true)
        .await
        .unwrap();
    // The rich message left queue b only.
    let mut rb = spec("b", ReceiveMode::Take, AckMode::Auto, 1);
    rb.client = "r".into();
    assert_eq!(
        store.queues().receive(&rb, 1).await.unwrap()[0].message.id,
        rich_id
    );
    let segments_before = store.segments().len();
    assert!(segments_before > 2, "the test should span several segments");
    drop(store);

    let store = open(dir.path()).await;
    assert!(store.sessions().client_exists("p").await.unwrap());
    assert!(store.sessions().client_exists("r").await.unwrap());
    let names: Vec<String> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, vec!["a", "b"]);
    let all = peek_all(&store, "a").await;
    let expect: Vec<String> = (2..20).map(|i| format!("m{i}")).collect();
    assert_eq!(
        bodies(&all),
        expect,
        "client c does not see the message for r"
    );
    assert_eq!(
        all[0].message.delivery_count, 1,
        "the unacked lease comes back redelivered"
    );
    assert_eq!(all[1].message.delivery_count, 1, "the nacked one too");
    assert_eq!(all[2].message.delivery_count, 0);
    assert!(peek_all(&store, "b").await.is_empty());
    let mut ra = spec("a", ReceiveMode::Peek, AckMode::Auto, 1);
    ra.client = "r".into();
    let got = store.queues().receive(&ra, 1).await.unwrap();
    let m = &got[0].message;
    assert_eq!(
        (m.id, m.priority, m.context, m.created_at),
        (rich_id, 8, 99, 123_456)
    );
    assert_eq!(m.receiver.as_deref(), Some("r"));
    assert_eq!(m.properties, rich.properties);
    assert_eq!(
        store.queues().waiting_queues("r", u64::MAX).await.unwrap(),
        vec!["a"]
    );
    let next = store.queues().send(msg(&["a"], "after")).await.unwrap();
    assert!(next > last, "ids are never reused: {next} after {last}");
    // A second reopen after more work still agrees.
    drop(store);
    let store = open(dir.path()).await;
    assert_eq!(
        peek_all(&store, "a").await.len(),
        19,
        "m2..m19 and the new one"
    );
    assert_eq!(store.message_count(), 20);
}

#[tokio::test]
async fn a_locked_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let err = EmbeddedStore::open(EmbeddedConfig::new(dir.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable(ref m) if m.contains("lock")),
        "{err}"
    );
    drop(store);
    open(dir.path()).await;
}

#[tokio::test]
async fn ids_survive_compaction_of_every_old_segment() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.sessions().register_client("p").await.unwrap();
    store.queues().create_queue("a").await.unwrap();
    let take = spec("a", ReceiveMode::Take, AckMode::Auto, 1);
    let mut last = 0;
    for i in 0..50 {
        last = store
            .queues()
            .send(msg(&["a"], &format!("m{i}")))
            .await
            .unwrap();
        store.queues().receive(&take, 1).await.unwrap();
    }
    store.upkeep().maintain().await.unwrap();
    store.upkeep().maintain().await.unwrap();
    assert!(store.segments().len() <= 2, "{:?}", store.segments());
    drop(store);
    let store = open(dir.path()).await;
    let next = store.queues().send(msg(&["a"], "x")).await.unwrap();
    assert!(next > last);
    assert!(store.sessions().client_exists("p").await.unwrap());
}

#[tokio::test]
async fn reopen_keeps_delivery_and_expiry_times() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let mut later = msg(&["q"], "later");
    later.deliver_at_ms = 1_000;
    let mut short = msg(&["q"], "short");
    short.expires_at_ms = 500;
    let mut both = msg(&["q"], "both");
    both.deliver_at_ms = 200;
    both.expires_at_ms = 2_000;
    for m in [later, short, both, msg(&["q"], "plain")] {
        store.queues().send(m).await.unwrap();
    }
    drop(store);

    let store = open(dir.path()).await;
    let at = |now_ms| {
        let mut s = spec("q", ReceiveMode::Peek, AckMode::Auto, 0);
        s.now_ms = now_ms;
        s
    };
    let peek = |store: Arc<EmbeddedStore>, now_ms| {
        let s = at(now_ms);
        async move { bodies(&store.queues().receive(&s, 10).await.unwrap()) }
    };
    assert_eq!(peek(store.clone(), 1).await, vec!["short", "plain"]);
    assert_eq!(
        peek(store.clone(), 200).await,
        vec!["short", "both", "plain"]
    );
    let got = store.queues().receive(&at(499), 10).await.unwrap();
    assert_eq!(got[0].message.expires_at, 500);
    assert_eq!(got[1].message.expires_at, 2_000);
    // At 500 "short" has expired: the receive passes over it and removes it for good.
    assert_eq!(
        peek(store.clone(), 1_000).await,
        vec!["later", "both", "plain"]
    );
    drop(store);

    let store = open(dir.path()).await;
    assert_eq!(peek(store.clone(), 499).await, vec!["both", "plain"]);
    assert_eq!(
        peek(store.clone(), 1_000).await,
        vec!["later", "both", "plain"]
    );
    assert_eq!(peek(store.clone(), 2_000).await, vec!["later", "plain"]);
}

/// Queue settings survive a reopen, from their record and, once compaction has deleted the
/// segment holding it, from the segment header's snapshot.
#[tokio::test]
async fn reopen_keeps_queue_settings_also_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.sessions().register_client("p").await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("dlq").await.unwrap();
    store.queues().create_queue("exp").await.unwrap();
    let options = ferry_protocol::QueueOptions {
        max_deliveries: 1,
        dead_letter_queue: Some("dlq".into()),
        expiry_queue: Some("exp".into()),
    };
    store
        .queues()
        .create_queue_with("q", &options)
        .await
        .unwrap();
    let lease = spec("q", ReceiveMode::Take, AckMode::Client, 1);
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    let take_dead = spec("dlq", ReceiveMode::Take, AckMode::Auto, 1);
    let take_expired = spec("exp", ReceiveMode::Take, AckMode::Auto, 1);
    let dead_letters = |store: Arc<EmbeddedStore>, body: &'static str| {
        let (lease, take_dead) = (lease.clone(), take_dead.clone());
        let take_expired = take_expired.clone();
        async move {
            store.queues().send(msg(&["q"], body)).await.unwrap();
            let d = store.queues().receive(&lease, 1).await.unwrap();
            store
                .queues()
                .nack(1, &[d[0].delivery_id], true)
                .await
                .unwrap();
            assert_eq!(
                bodies(&store.queues().receive(&take_dead, 1).await.unwrap()),
                vec![body]
            );
            let mut short = msg(&["q"], body);
            short.expires_at_ms = 5;
            store.queues().send(short).await.unwrap();
            assert_eq!(store.upkeep().purge_expired(10).await.unwrap(), 1);
            assert_eq!(
                bodies(&store.queues().receive(&take_expired, 1).await.unwrap()),
                vec![body]
            );
        }
    };
    dead_letters(store.clone(), "first").await;
    drop(store);
    let store = open(dir.path()).await;
    dead_letters(store.clone(), "after reopen").await;
    // Fill and empty segments so that compaction deletes the one holding the settings.
    let first = store.segments()[0];
    for i in 0..50 {
        store
            .queues()
            .send(msg(&["q"], &format!("m{i}")))
            .await
            .unwrap();
        store.queues().receive(&take, 1).await.unwrap();
    }
    store.upkeep().maintain().await.unwrap();
    store.upkeep().maintain().await.unwrap();
    assert!(!store.segments().contains(&first), "{:?}", store.segments());
    drop(store);
    let store = open(dir.path()).await;
    dead_letters(store.clone(), "after compaction").await;
}
