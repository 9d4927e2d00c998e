//! Background writeback: under the `never` and `interval` policies the active segment is synced
//! in the background as it grows, so it never holds much unsynced data; under `always` (every
//! commit synced) there is no background sync.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::engine_tests::{config, seg_dir};
use super::flusher::FLUSH_EVERY_BYTES;
use super::{EmbeddedStore, FaultyBackend, FsyncPolicy};
use crate::api::Store;
use crate::conformance::msg;

/// Bytes of message bodies sent by [`send_bulk`].
const BULK_BYTES: u64 = 12 * 1024 * 1024;

/// Sends [`BULK_BYTES`] of 2000-byte messages in batches of 100.
async fn send_bulk(store: &EmbeddedStore) {
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let body = "x".repeat(2_000);
    for _ in 0..BULK_BYTES / (2_000 * 100) {
        let batch = (0..100).map(|_| msg(&["q"], "c", &body)).collect();
        for r in store.queues().send_batch(batch).await {
            r.unwrap();
        }
    }
}

/// The last segment in the log.
fn active_segment(disk: &FaultyBackend) -> PathBuf {
    disk.files()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.parent() == Some(seg_dir().as_path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("log"))
        .max()
        .expect("a segment")
}

async fn open_with(disk: &FaultyBackend, policy: FsyncPolicy) -> std::sync::Arc<EmbeddedStore> {
    let mut cfg = config(disk, 1 << 30);
    cfg.fsync = policy;
    EmbeddedStore::open(cfg).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rare_sync_policies_sync_the_active_segment_in_the_background() {
    for policy in [
        FsyncPolicy::Never,
        FsyncPolicy::Interval(Duration::from_secs(3600)),
    ] {
        let disk = FaultyBackend::new();
        let store = open_with(&disk, policy).await;
        send_bulk(&store).await;
        // The flusher is a thread of its own: wait for it, bounded.
        let deadline = Instant::now() + Duration::from_secs(20);
        while disk.background_sync_count() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let synced_in_background = disk.background_sync_count();
        assert!(
            synced_in_background >= 2,
            "{policy}: {synced_in_background} background syncs for {BULK_BYTES} bytes"
        );
        let unsynced = disk.unsynced_bytes(&active_segment(&disk)) as u64;
        assert!(
            unsynced < BULK_BYTES - FLUSH_EVERY_BYTES,
            "{policy}: {unsynced} of about {BULK_BYTES} bytes written are still unsynced"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_syncs_every_commit_and_nothing_in_the_background() {
    let disk = FaultyBackend::new();
    let store = open_with(&disk, FsyncPolicy::Always).await;
    send_bulk(&store).await;
    assert_eq!(disk.background_sync_count(), 0);
    assert_eq!(disk.unsynced_bytes(&active_segment(&disk)), 0);
}
