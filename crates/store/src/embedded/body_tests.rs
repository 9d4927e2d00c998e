//! Message bodies in the log: the cache of recent bodies, reads from the log, and failed reads
//! (injected by the [`FaultyBackend`]) that are retried or reported, losing nothing.

use std::sync::atomic::Ordering;

use ferry_protocol::{AckMode, ReceiveMode};

use super::engine_tests::{bodies, config, message, spec};
use super::{EmbeddedStore, FaultKind, FaultyBackend};
use crate::api::Store;
use crate::error::StoreError;

/// A store on `disk` whose body cache holds `cache_bytes`, with queue `q` and client `c`.
async fn open_with_cache(disk: &FaultyBackend, cache_bytes: u64) -> std::sync::Arc<EmbeddedStore> {
    let mut cfg = config(disk, 1 << 20);
    cfg.cache_bytes = cache_bytes;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    if store.queues().create_queue("q").await.is_err() {
        // Reopened: the queue is there already.
    }
    store
}

async fn send(store: &EmbeddedStore, bodies: &[&str]) {
    for b in bodies {
        store
            .queues()
            .send(message(&["q"], None, b, "eu"))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn consumers_that_keep_up_never_read_the_disk() {
    let disk = FaultyBackend::new();
    let store = open_with_cache(&disk, 1 << 20).await;
    for i in 0..50 {
        send(&store, &[&format!("m{i}")]).await;
        let d = store
            .queues()
            .receive(&spec("q", ReceiveMode::Take, AckMode::Auto, 1), 1)
            .await
            .unwrap();
        assert_eq!(&d[0].message.body[..], format!("m{i}").as_bytes());
    }
    assert_eq!(disk.read_count(), 0, "every body came from the cache");
    let f = store.cache.clone();
    assert_eq!(f.hits.load(Ordering::Relaxed), 50);
    assert_eq!(
        f.bytes.load(Ordering::Relaxed),
        0,
        "taken bodies leave the cache"
    );
}

#[tokio::test]
async fn bodies_evicted_from_the_cache_are_read_from_the_log() {
    let disk = FaultyBackend::new();
    // Room for about two of these bodies.
    let store = open_with_cache(&disk, 2 * (1000 + 64)).await;
    let big: Vec<String> = (0..5).map(|i| format!("{i}").repeat(1000)).collect();
    send(&store, &big.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(bodies(&store, "q").await, big);
    assert_eq!(
        disk.read_count(),
        1,
        "the three oldest were evicted, and read back together: their records are neighbours"
    );
}

#[tokio::test]
async fn a_failed_body_read_is_retried() {
    let disk = FaultyBackend::new();
    let store = open_with_cache(&disk, 0).await;
    send(&store, &["a", "b", "c"]).await;
    disk.fail_reads(2, FaultKind::Io);
    let d = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Auto, 1), 10)
        .await
        .unwrap();
    let got: Vec<&[u8]> = d.iter().map(|d| &d.message.body[..]).collect();
    assert_eq!(got, [b"a", b"b", b"c"]);
    assert_eq!(disk.read_count(), 5, "three reads, two retries");
    assert!(bodies(&store, "q").await.is_empty());
}

#[tokio::test]
async fn a_body_that_cannot_be_read_is_reported_and_the_message_stays() {
    let disk = FaultyBackend::new();
    let store = open_with_cache(&disk, 0).await;
    send(&store, &["a", "b"]).await;
    for (mode, ack) in [
        (ReceiveMode::Take, AckMode::Auto),
        (ReceiveMode::Take, AckMode::Client),
        (ReceiveMode::Peek, AckMode::Auto),
    ] {
        disk.fail_reads(u32::MAX, FaultKind::Io);
        let err = store
            .queues()
            .receive(&spec("q", mode, ack, 1), 10)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::Unavailable(why) if why.contains("reading message bodies")),
            "{mode:?} {ack:?}: {err}"
        );
        disk.fail_reads(0, FaultKind::Io);
        assert_eq!(bodies(&store, "q").await, ["a", "b"], "{mode:?} {ack:?}");
    }
    // Nothing was removed either after a restart.
    drop(store);
    let store = open_with_cache(&disk, 0).await;
    let d = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Auto, 1), 10)
        .await
        .unwrap();
    let got: Vec<&[u8]> = d.iter().map(|d| &d.message.body[..]).collect();
    assert_eq!(got, [b"a", b"b"]);
}

#[tokio::test]
async fn a_receive_cancelled_while_reading_puts_back_what_it_took() {
    let disk = FaultyBackend::new();
    let store = open_with_cache(&disk, 0).await;
    send(&store, &["a", "b"]).await;
    for ack in [AckMode::Auto, AckMode::Client] {
        // The reads fail until the retries give up (at least 15 ms of pauses): the receive is
        // still reading, its messages taken, when its caller gives up on it after 1 ms.
        disk.fail_reads(u32::MAX, FaultKind::Io);
        let taking = spec("q", ReceiveMode::Take, ack, 1);
        let receive = store.queues().receive(&taking, 10);
        let cancelled = tokio::time::timeout(std::time::Duration::from_millis(1), receive).await;
        assert!(cancelled.is_err(), "{ack:?}: the receive was still reading");
        disk.fail_reads(0, FaultKind::Io);
        assert_eq!(
            bodies(&store, "q").await,
            ["a", "b"],
            "{ack:?}: ready again at once, not when the session ends"
        );
    }
    let d = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Auto, 2), 10)
        .await
        .unwrap();
    let got: Vec<&[u8]> = d.iter().map(|d| &d.message.body[..]).collect();
    assert_eq!(got, [b"a", b"b"], "another session takes them");
}

#[tokio::test]
async fn the_memory_figure_counts_the_cache_and_not_the_bodies_in_the_log() {
    let disk = FaultyBackend::new();
    let store = open_with_cache(&disk, 0).await;
    let body = "x".repeat(100_000);
    send(&store, &[&body]).await;
    let held = store.queues().memory_bytes();
    assert!(held < 1_000, "a body in the log is not in memory: {held}");
    drop(store);
    let store = open_with_cache(&disk, 1 << 20).await;
    send(&store, &[&body]).await;
    let held = store.queues().memory_bytes();
    assert!(
        (100_000..101_000).contains(&held),
        "the cached body counts: {held}"
    );
}

#[tokio::test]
async fn the_cache_lets_go_first_when_memory_is_short() {
    let disk = FaultyBackend::new();
    let store = open_with_cache(&disk, 1 << 20).await;
    let body = "y".repeat(50_000);
    send(&store, &[&body]).await;
    let index = store.index_bytes();
    assert!(store.queues().memory_bytes() > index + 50_000);
    assert!(
        store.queues().relieve_memory(true),
        "the cached body is freed"
    );
    assert_eq!(store.queues().memory_bytes(), index);
    send(&store, &[&body]).await;
    assert!(
        store.queues().memory_bytes() < 2 * index + 1000,
        "nothing is cached while memory is short"
    );
    assert!(!store.queues().relieve_memory(true), "nothing more to free");
    assert!(!store.queues().relieve_memory(false));
    send(&store, &[&body]).await;
    assert!(store.queues().memory_bytes() > 50_000, "cached again");
    assert_eq!(
        bodies(&store, "q").await,
        [body.clone(), body.clone(), body]
    );
}

#[tokio::test]
async fn a_drain_through_the_log_asks_for_the_log_ahead_of_it_and_a_single_read_does_not() {
    let disk = FaultyBackend::new();
    let mut cfg = config(&disk, 64 << 20);
    cfg.cache_bytes = 0;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    // 20,000 bodies of 1 KiB: about 21 MB of one segment, more than a read ahead.
    let body = "x".repeat(1024);
    for _ in 0..20 {
        let batch = (0..1000)
            .map(|_| message(&["q"], None, &body, "eu"))
            .collect();
        for sent in store.queues().send_batch(batch).await {
            sent.unwrap();
        }
    }
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    assert_eq!(store.queues().receive(&take, 1).await.unwrap().len(), 1);
    assert!(
        disk.read_aheads().is_empty(),
        "one read is no run: nothing to read ahead"
    );
    let mut taken = 1;
    while taken < 20_000 {
        let got = store.queues().receive(&take, 500).await.unwrap();
        assert!(!got.is_empty() && got.iter().all(|d| d.message.body.len() == 1024));
        taken += got.len();
    }
    let asked = disk.read_aheads();
    // Asked for again each time half of the window is used: a few asks, not one per read;
    // each starting where the previous one ended.
    assert!((2..=4).contains(&asked.len()), "asks: {asked:?}");
    for pair in asked.windows(2) {
        let [(_, at, len), (_, next, _)] = pair else {
            unreachable!()
        };
        assert_eq!(at + len, *next, "asks overlap or leave a gap: {asked:?}");
    }
    let (_, at, len) = asked.last().cloned().unwrap();
    assert!(at + len > 20_000 * 1024, "asked up to {} only", at + len);
}
