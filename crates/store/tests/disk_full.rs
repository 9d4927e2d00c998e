//! A full disk, as the in-memory backend's capacity models it: sends and publishes are refused
//! with `ResourceExhausted` before they change anything (a refused send never appears, in this
//! run or after a restart), everything that frees space goes on in the space reserve, the
//! store opens on the full disk and serves the drain, and once space returns, sends work again
//! by themselves.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::Arc;

use ferry_protocol::{AckMode, QueueOptions, ReceiveMode, SubscriptionOptions};
use ferry_store::embedded::{CrashMode, FaultyBackend};
use ferry_store::{EmbeddedStore, Registration, Store, StoreError};

mod common;
use common::{bodies, config, msg, peek_all, spec};

const SEGMENT: u64 = 4096;
/// Room for the reserve and about a dozen segments.
const CAPACITY: usize = 64 * 1024;

async fn open(disk: &FaultyBackend) -> Arc<EmbeddedStore> {
    let mut cfg = config(disk, SEGMENT);
    cfg.spare_segments = 2;
    EmbeddedStore::open(cfg).await.unwrap()
}

fn body(i: usize) -> String {
    format!("{i:05}-{}", "b".repeat(100))
}

fn exhausted(r: Result<impl std::fmt::Debug, StoreError>) -> String {
    match r {
        Err(StoreError::ResourceExhausted(m)) => m,
        other => panic!("expected ResourceExhausted, got {other:?}"),
    }
}

/// Sends until the disk is full; returns the bodies acknowledged and those refused (every send
/// after the first refusal is tried too, and refused as well).
async fn fill(store: &EmbeddedStore) -> (Vec<String>, Vec<String>) {
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for i in 0..10_000 {
        match store.queues().send(msg(&["q"], &body(i))).await {
            Ok(_) if refused.is_empty() => acked.push(body(i)),
            Ok(_) => panic!("send {i} succeeded after a refusal"),
            Err(StoreError::ResourceExhausted(_)) => refused.push(body(i)),
            Err(e) => panic!("send {i} failed with {e:?}, not ResourceExhausted"),
        }
        if refused.len() == 20 {
            return (acked, refused);
        }
    }
    panic!("the disk never filled");
}

/// Takes everything with auto ack, in small batches, as a consumer would.
async fn drain(store: &EmbeddedStore) -> Vec<String> {
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    let mut got = Vec::new();
    loop {
        let batch = store
            .queues()
            .receive(&take, 10)
            .await
            .expect("a take on a full disk");
        if batch.is_empty() {
            return got;
        }
        got.extend(bodies(&batch));
    }
}

#[tokio::test]
async fn a_full_disk_refuses_only_growth_and_a_refused_send_never_appears() {
    let disk = FaultyBackend::new();
    disk.set_capacity(Some(CAPACITY));
    let store = open(&disk).await;
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().create_queue("other").await.unwrap();
    let (acked, refused) = fill(&store).await;
    assert!(
        acked.len() > 200,
        "{} sends before the disk filled",
        acked.len()
    );
    assert!(store.is_full());
    assert!(disk.free_bytes() < SEGMENT as usize, "the disk is full");

    // Growth is refused with a clear error, before anything changes.
    let why = exhausted(store.queues().send(msg(&["q"], "late")).await);
    assert!(why.contains("disk is full"), "{why}");
    let batch = store
        .queues()
        .send_batch(vec![msg(&["q"], "b1"), msg(&["other"], "b2")])
        .await;
    assert!(batch
        .iter()
        .all(|r| matches!(r, Err(StoreError::ResourceExhausted(_)))));
    exhausted(store.queues().create_queue("new").await);
    // Non-persistent messages are written nowhere: they go on.
    let mut transient = msg(&["other"], "in memory");
    transient.persistent = false;
    store
        .queues()
        .send(transient)
        .await
        .expect("a non-persistent send");
    exhausted(store.topics().create_topic("t").await);
    exhausted(store.sessions().register_client("stranger").await);
    exhausted(
        store
            .sessions()
            .claim_session("stranger", 5, Registration::Permanent)
            .await,
    );
    // What writes nothing goes on: a known name connects, an ephemeral one too.
    store
        .sessions()
        .claim_session("c", 1, Registration::Permanent)
        .await
        .unwrap();
    store
        .sessions()
        .claim_session("cli-7", 2, Registration::Ephemeral)
        .await
        .unwrap();
    store.sessions().register_client("c").await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "q").await), acked);

    // A crash on the full disk: the store opens there, and nothing refused is in it.
    let image = disk.crash(CrashMode::Process);
    let reopened = open(&image).await;
    assert_eq!(bodies(&peek_all(&reopened, "q").await), acked);
    assert!(reopened.is_full() || image.free_bytes() >= SEGMENT as usize);

    // Consumers drain, compaction gives the drained segments back, sends work again.
    for store in [store, reopened] {
        assert_eq!(drain(&store).await, acked);
        store.upkeep().maintain().await.unwrap();
        store.upkeep().maintain().await.unwrap();
        assert!(!store.is_full(), "the reserve was made again");
        store.queues().send(msg(&["q"], "after")).await.unwrap();
        assert_eq!(bodies(&peek_all(&store, "q").await), ["after"]);
    }
    for image in [disk.clone(), image] {
        let store = open(&image).await;
        let left = bodies(&peek_all(&store, "q").await);
        assert_eq!(left, ["after"]);
        for r in &refused {
            assert!(!left.contains(r));
        }
    }
}

#[tokio::test]
async fn everything_that_frees_space_works_on_a_full_disk() {
    let disk = FaultyBackend::new();
    disk.set_capacity(Some(CAPACITY));
    let store = open(&disk).await;
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().create_queue("doomed").await.unwrap();
    store
        .queues()
        .create_queue_with("dlq", &QueueOptions::default())
        .await
        .unwrap();
    store.topics().create_topic("t").await.unwrap();
    let sub = SubscriptionOptions {
        durable: true,
        shared: false,
        selector: String::new(),
        queue: QueueOptions::default(),
    };
    store
        .topics()
        .subscribe_topic("t", "s", &sub, "c")
        .await
        .unwrap();
    for i in 0..20 {
        store
            .queues()
            .send(msg(&["doomed"], &format!("d{i}")))
            .await
            .unwrap();
    }
    fill(&store).await;
    assert!(store.is_full());

    // Client-ack takes, acks, nacks with and without requeue.
    let lease = spec("q", ReceiveMode::Take, AckMode::Client, 1);
    let got = store.queues().receive(&lease, 3).await.unwrap();
    assert_eq!(got.len(), 3);
    store.queues().ack(1, &[got[0].delivery_id]).await.unwrap();
    store
        .queues()
        .nack(1, &[got[1].delivery_id], true)
        .await
        .unwrap();
    store
        .queues()
        .nack(1, &[got[2].delivery_id], false)
        .await
        .unwrap();
    store.sessions().release_session(1).await.unwrap();
    // Deletes, forced, of a queue, a subscription and a topic; expiry of client names.
    store.queues().delete_queue("doomed", true).await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &sub, "c")
        .await
        .expect("it exists");
    store.topics().unsubscribe("t", "s").await.unwrap();
    store.topics().delete_topic("t", true).await.unwrap();
    store.upkeep().purge_expired(u64::MAX).await.unwrap();
    store.upkeep().expire_clients(u64::MAX, 0).await.unwrap();
    store
        .transactions()
        .commit(1, Vec::new(), &[])
        .await
        .unwrap();
    exhausted(
        store
            .transactions()
            .commit(1, vec![msg(&["q"], "in a transaction")], &[])
            .await,
    );
    drain(&store).await;
    store.upkeep().maintain().await.unwrap();
    assert!(!store.is_full());
}

#[tokio::test]
async fn a_disk_filled_by_something_else_refuses_sends_until_space_returns() {
    let disk = FaultyBackend::new();
    let store = open(&disk).await;
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().send(msg(&["q"], "before")).await.unwrap();
    // Another program takes the rest of the disk.
    disk.set_capacity(Some(disk.used_bytes()));
    let mut acked = vec!["before".to_string()];
    let mut refused = 0;
    for i in 0..200 {
        match store.queues().send(msg(&["q"], &body(i))).await {
            Ok(_) => acked.push(body(i)),
            Err(StoreError::ResourceExhausted(_)) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(refused > 0 && store.is_full());
    assert_eq!(bodies(&peek_all(&store, "q").await), acked);
    // The operator frees space: the next upkeep makes the reserve again.
    disk.set_capacity(None);
    store.upkeep().maintain().await.unwrap();
    store.queues().send(msg(&["q"], "after")).await.unwrap();
    drop(store);
    let store = open(&disk).await;
    acked.push("after".into());
    assert_eq!(bodies(&peek_all(&store, "q").await), acked);
}

#[tokio::test]
async fn a_store_on_a_disk_without_room_for_its_reserve_opens_refusing_sends() {
    let disk = FaultyBackend::new();
    let store = open(&disk).await;
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    for i in 0..5 {
        store.queues().send(msg(&["q"], &body(i))).await.unwrap();
    }
    drop(store);
    // The reserve is gone (an older version, or an operator) and the disk is full.
    let reserve = common::seg_dir().join("reserve");
    assert!(
        disk.file(&reserve).is_some(),
        "a store keeps its reserve file"
    );
    disk.set_file(&reserve, Vec::new());
    disk.set_capacity(Some(disk.used_bytes()));
    let store = open(&disk).await;
    assert!(store.is_full());
    exhausted(store.queues().send(msg(&["q"], "refused")).await);
    let got = drain(&store).await;
    assert_eq!(got.len(), 5, "{got:?}");
}
