//! What a queued message really costs the embedded engine in memory once its body is in the
//! log: every byte the engine allocates for it (its stored fields, its entry, its places in
//! the ready and by-sender indexes, the tables' spare room), counted by a counting global
//! allocator around 200,000 sends of 1 KiB messages to one queue, the body cache off.
//!
//! The figure is printed (`--nocapture`) and documented in docs/storage-format.md (113 bytes:
//! the 88-byte entry in the id-indexed slab, 8 bytes in the ready index, 16 in the by-sender
//! index); the bound, that figure with some margin, fails if bodies or a per-message
//! allocation come back, or if the messages go back into a table with a key and spare room.

use bytes::Bytes;
use ferry_protocol::{AckMode, Order, ReceiveMode, Source};
use ferry_store::{EmbeddedConfig, EmbeddedStore, FsyncPolicy, NewMessage, ReceiveSpec, Store};

/// The process's resident size in bytes (what the allocator really took from the system).
fn rss() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb * 1024)
}

const MESSAGES: usize = 200_000;
const BATCH: usize = 100;

#[tokio::test(flavor = "current_thread")]
async fn a_queued_message_costs_the_embedded_index_about_a_hundred_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = EmbeddedConfig::new(dir.path());
    cfg.fsync = FsyncPolicy::Never;
    cfg.cache_bytes = 0;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let body = Bytes::from(vec![7u8; 1024]);
    let message = || NewMessage {
        queues: vec!["q".into()],
        topic: None,
        persistent: true,
        sender: "p".into(),
        receiver: None,
        priority: 4,
        context: 0,
        properties: Default::default(),
        body: body.clone(),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    };
    // One batch first, so that the writer's buffers are at their working size.
    store
        .queues()
        .send_batch((0..BATCH).map(|_| message()).collect())
        .await;
    let before = rss();
    for _ in 0..MESSAGES / BATCH {
        for r in store
            .queues()
            .send_batch((0..BATCH).map(|_| message()).collect())
            .await
        {
            r.unwrap();
        }
    }
    let after = rss();
    let per_message = (after - before) as f64 / MESSAGES as f64;
    eprintln!(
        "{MESSAGES} queued 1 KiB messages on one queue: {per_message:.0} bytes each in memory \
         (the engine's own estimate: {} bytes each)",
        store.queues().memory_bytes() / (MESSAGES + BATCH) as u64
    );
    assert!(
        per_message < 140.0,
        "{per_message:.0} bytes per queued message: are bodies, per-message allocations or a \
         hash table back?"
    );
    // And they are all there, bodies read back from the log.
    let spec = ReceiveSpec {
        source: Source::Queue("q".into()),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        hold: false,
        client: "c".into(),
        session: 1,
        lease_until_ms: 0,
        selector: None,
        now_ms: 1,
        max_bytes: None,
    };
    let mut n = 0;
    loop {
        let d = store.queues().receive(&spec, 10_000).await.unwrap();
        if d.is_empty() {
            break;
        }
        assert!(d.iter().all(|d| d.message.body == body));
        n += d.len();
    }
    assert_eq!(n, MESSAGES + BATCH);
}
