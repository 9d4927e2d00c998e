//! Helpers shared by the engine tests.
#![allow(dead_code)]
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{AckMode, Delivery, Order, ReceiveMode, Source};
use ferry_store::embedded::{FaultyBackend, FsyncPolicy};
use ferry_store::{EmbeddedConfig, EmbeddedStore, NewMessage, ReceiveSpec, StoreError};

/// The data directory used on in-memory disks.
pub const DIR: &str = "/data";

/// Path of the segment directory on in-memory disks.
pub fn seg_dir() -> PathBuf {
    Path::new(DIR).join("segments")
}

/// A config on `disk` with `segment_bytes`.
pub fn config(disk: &FaultyBackend, segment_bytes: u64) -> EmbeddedConfig {
    let mut cfg = EmbeddedConfig::new(DIR);
    cfg.backend = Arc::new(disk.clone());
    cfg.segment_bytes = segment_bytes;
    cfg.fsync = FsyncPolicy::Always;
    cfg
}

/// Opens a store on `disk`.
pub async fn open(
    disk: &FaultyBackend,
    segment_bytes: u64,
) -> Result<Arc<EmbeddedStore>, StoreError> {
    EmbeddedStore::open(config(disk, segment_bytes)).await
}

/// A message from "p" on `queues`.
pub fn msg(queues: &[&str], body: &str) -> NewMessage {
    NewMessage {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        topic: None,
        persistent: true,
        sender: "p".into(),
        receiver: None,
        priority: 5,
        context: 0,
        properties: Default::default(),
        body: Bytes::copy_from_slice(body.as_bytes()),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    }
}

/// A receive spec on a queue for client "c".
pub fn spec(queue: &str, mode: ReceiveMode, ack: AckMode, session: u64) -> ReceiveSpec {
    ReceiveSpec {
        source: Source::Queue(queue.into()),
        order: Order::Time,
        mode,
        ack,
        hold: false,
        client: "c".into(),
        session,
        lease_until_ms: u64::MAX,
        selector: None,
        now_ms: 1,
        max_bytes: None,
    }
}

/// Peeks at everything ready on `queue`.
pub async fn peek_all(store: &EmbeddedStore, queue: &str) -> Vec<Delivery> {
    use ferry_store::Store;
    store
        .queues()
        .receive(
            &spec(queue, ReceiveMode::Peek, AckMode::Auto, 0),
            usize::MAX,
        )
        .await
        .unwrap()
}

/// Bodies of deliveries.
pub fn bodies(ds: &[Delivery]) -> Vec<String> {
    ds.iter()
        .map(|d| String::from_utf8_lossy(&d.message.body).into_owned())
        .collect()
}

/// The segment files on `disk`, oldest first, with their lengths.
pub fn segments(disk: &FaultyBackend) -> Vec<(PathBuf, usize)> {
    files_ending(disk, "log")
}

/// The spare segment files kept for reuse, with their lengths.
pub fn spares(disk: &FaultyBackend) -> Vec<(PathBuf, usize)> {
    files_ending(disk, "spare")
}

fn files_ending(disk: &FaultyBackend, extension: &str) -> Vec<(PathBuf, usize)> {
    disk.files()
        .into_iter()
        .filter(|(p, _)| {
            p.parent() == Some(seg_dir().as_path())
                && p.extension().and_then(|e| e.to_str()) == Some(extension)
        })
        .collect()
}

/// Heartbeats `store` with `timeout_ms` every tenth of it until it has been in contact for
/// three timeouts: long enough that a node judges the others (see the postgres engine's
/// `nodes`) and that one silent all along is taken for dead. Returns the queues that got
/// deliveries back.
pub async fn outlive(store: &dyn ferry_store::Store, timeout_ms: u64) -> Vec<String> {
    let mut returned = Vec::new();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(3 * timeout_ms) {
        let beat = store
            .sessions()
            .heartbeat(timeout_ms)
            .await
            .expect("heartbeat");
        assert!(!beat.was_taken_for_dead, "the surviving node was alive");
        returned.extend(beat.returned);
        tokio::time::sleep(std::time::Duration::from_millis(timeout_ms / 10)).await;
    }
    returned
}
