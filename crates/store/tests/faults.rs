//! Injected I/O failures: a failed fsync poisons the store; a failed write fails its batch
//! with `Unavailable`, whose outcome is unknown (the batch is written once writes succeed
//! again), and the store recovers by itself. A write fails so only on a fault: a full disk is
//! met before anything is written (see `disk_full.rs`), yet an injected `ENOSPC` (a filesystem
//! that cannot allocate ahead) takes this path too.

use ferry_protocol::{AckMode, ReceiveMode};
use ferry_store::embedded::{CrashMode, FaultKind, FaultyBackend};
use ferry_store::{Admin, EmbeddedConfig, EmbeddedStore, Store, StoreError};
use std::sync::Arc;

mod common;
use common::{bodies, msg, open, peek_all, spec};

const BIG: u64 = 1 << 30;

fn unavailable(r: Result<impl std::fmt::Debug, StoreError>) -> String {
    match r {
        Err(StoreError::Unavailable(m)) => m,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn failed_fsync_poisons_until_reopened() {
    let disk = FaultyBackend::new();
    let store = open(&disk, BIG).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store
        .queues()
        .send(msg(&["q"], "acknowledged"))
        .await
        .unwrap();
    disk.fail_syncs(1, FaultKind::Io);
    let why = unavailable(store.queues().send(msg(&["q"], "unlucky")).await);
    assert!(why.contains("fsync"), "{why}");
    // Later writes fail although fsync works again: the store is poisoned.
    let why = unavailable(store.queues().send(msg(&["q"], "later")).await);
    assert!(why.contains("reopened"), "{why}");
    unavailable(store.queues().create_queue("r").await);
    unavailable(store.sessions().register_client("d").await);
    unavailable(store.upkeep().flush().await);
    unavailable(store.upkeep().maintain().await);
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    unavailable(store.queues().receive(&take, 1).await);
    // Reads of settled state still work.
    assert_eq!(store.queues().list_queues().await.unwrap().len(), 1);

    // What was acknowledged is still there after a crash and a reopen.
    let image = disk.crash(CrashMode::Machine { seed: 7 });
    drop(store);
    let store = open(&image, BIG).await.unwrap();
    let got = bodies(&peek_all(&store, "q").await);
    assert_eq!(got.first().map(String::as_str), Some("acknowledged"));
    assert!(!got.contains(&"later".to_string()));
    store
        .queues()
        .send(msg(&["q"], "after reopen"))
        .await
        .unwrap();
}

#[tokio::test]
async fn failed_write_fails_the_batch_then_writes_resume() {
    let disk = FaultyBackend::new();
    let store = open(&disk, BIG).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().send(msg(&["q"], "one")).await.unwrap();
    disk.fail_writes(1, FaultKind::NoSpace);
    let why = unavailable(store.queues().send(msg(&["q"], "two")).await);
    assert!(
        why.contains("os error 28") || why.to_lowercase().contains("space"),
        "{why}"
    );
    // The disk has room again: the next write goes through by itself.
    store.queues().send(msg(&["q"], "three")).await.unwrap();
    let visible = bodies(&peek_all(&store, "q").await);
    // Memory and disk agree after a crash: nothing half-written, nothing acknowledged lost.
    let image = disk.crash(CrashMode::Machine { seed: 3 });
    drop(store);
    let store = open(&image, BIG).await.unwrap();
    let recovered = bodies(&peek_all(&store, "q").await);
    assert_eq!(recovered, visible);
    assert!(recovered.contains(&"one".to_string()) && recovered.contains(&"three".to_string()));
}

#[tokio::test]
async fn failing_writes_refuse_new_writes_until_a_retry_succeeds() {
    let disk = FaultyBackend::new();
    let store = open(&disk, BIG).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().send(msg(&["q"], "kept")).await.unwrap();
    disk.fail_writes(4, FaultKind::NoSpace);
    for i in 0..4 {
        unavailable(
            store
                .queues()
                .send(msg(&["q"], &format!("refused {i}")))
                .await,
        );
    }
    // Refused sends after the first did not change the state (no pile-up of unknown outcomes);
    // the first one's outcome is unknown: it may be there.
    let during = bodies(&peek_all(&store, "q").await);
    assert!(during.len() <= 2, "{during:?}");
    let take = spec("q", ReceiveMode::Take, AckMode::Client, 1);
    let d = store.queues().receive(&take, 10).await.unwrap();
    store
        .queues()
        .ack(1, &d.iter().map(|d| d.delivery_id).collect::<Vec<_>>())
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "back")).await.unwrap();
    drop(store);
    let store = open(&disk, BIG).await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "q").await), vec!["back"]);
}

#[tokio::test]
async fn failed_segment_roll_is_retried() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 150).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let mut acked = Vec::new();
    for i in 0..30 {
        if i % 7 == 3 {
            disk.fail_writes(1, FaultKind::NoSpace);
        }
        if store
            .queues()
            .send(msg(&["q"], &format!("m{i}")))
            .await
            .is_ok()
        {
            acked.push(format!("m{i}"));
        }
    }
    let visible = bodies(&peek_all(&store, "q").await);
    for m in &acked {
        assert!(visible.contains(m), "{m} missing from {visible:?}");
    }
    let image = disk.crash(CrashMode::Machine { seed: 11 });
    drop(store);
    let store = open(&image, 150).await.unwrap();
    let recovered = bodies(&peek_all(&store, "q").await);
    for m in &acked {
        assert!(recovered.contains(m), "{m} missing from {recovered:?}");
    }
    assert_eq!(recovered, visible);
}

#[tokio::test]
async fn interval_and_never_policies_lose_nothing_on_process_kill() {
    use ferry_store::embedded::FsyncPolicy;
    use std::time::Duration;
    for policy in [
        FsyncPolicy::Interval(Duration::from_millis(50)),
        FsyncPolicy::Never,
    ] {
        let disk = FaultyBackend::new();
        let mut cfg = common::config(&disk, 300);
        cfg.fsync = policy;
        let store = ferry_store::EmbeddedStore::open(cfg).await.unwrap();
        store.sessions().register_client("c").await.unwrap();
        store.queues().create_queue("q").await.unwrap();
        for i in 0..20 {
            store
                .queues()
                .send(msg(&["q"], &format!("m{i}")))
                .await
                .unwrap();
        }
        let image = disk.crash(CrashMode::Process);
        if policy == FsyncPolicy::Never {
            // Only sealed segments were synced.
            assert!(common::segments(&disk)
                .iter()
                .any(|(p, _)| disk.unsynced_bytes(p) > 0));
            store.upkeep().flush().await.unwrap();
            assert!(common::segments(&disk)
                .iter()
                .all(|(p, _)| disk.unsynced_bytes(p) == 0));
        }
        drop(store);
        let store = open(&image, 300).await.unwrap();
        assert_eq!(peek_all(&store, "q").await.len(), 20, "{policy}");
    }
}

#[tokio::test]
async fn interval_policy_syncs_by_itself() {
    use ferry_store::embedded::FsyncPolicy;
    use std::time::Duration;
    let disk = FaultyBackend::new();
    let mut cfg = common::config(&disk, BIG);
    cfg.fsync = FsyncPolicy::Interval(Duration::from_millis(20));
    let store = ferry_store::EmbeddedStore::open(cfg).await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().send(msg(&["q"], "x")).await.unwrap();
    let (path, _) = common::segments(&disk).pop().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while disk.unsynced_bytes(&path) > 0 {
        assert!(std::time::Instant::now() < deadline, "never synced");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A disk nearly out of space makes the store not ready (`/readyz`), with the free bytes in
/// the reason, and shows in its figures; enough space makes it ready again.
#[tokio::test]
async fn a_disk_out_of_space_makes_the_store_not_ready() {
    let disk = FaultyBackend::new();
    let mut cfg = EmbeddedConfig::new("/mem");
    cfg.backend = Arc::new(disk.clone());
    let store = EmbeddedStore::open(cfg).await.unwrap();
    store.check_ready().await.unwrap();
    assert_eq!(
        store.engine_stats().disk_free_bytes,
        None,
        "unknown until reported"
    );
    disk.set_disk_space(1 << 20, 1 << 30);
    match store.check_ready().await {
        Err(StoreError::Unavailable(m)) => assert!(m.contains("1048576 bytes free"), "{m}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let stats = store.engine_stats();
    assert_eq!(
        (stats.disk_free_bytes, stats.disk_total_bytes),
        (Some(1 << 20), Some(1 << 30))
    );
    disk.set_disk_space(512 << 20, 1 << 30);
    store.check_ready().await.unwrap();
}
