//! Rough rates of the publish paths (run by hand, in release mode:
//! `cargo test -p ferry-store --release --lib embedded::perf_tests -- --ignored --nocapture`).
//! Not a benchmark: they print messages per second and check that every copy arrived.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ferry_protocol::{Order, PropertyValue, SubscriptionOptions};

use super::{EmbeddedConfig, EmbeddedStore, FsyncPolicy};
use crate::api::{NewMessage, ReceiveSpec, Store};

const MESSAGES: usize = 200_000;
const BATCH: usize = 500;

/// An auto-ack take from `queue` in time order.
fn auto_take(queue: &str) -> ReceiveSpec {
    ReceiveSpec {
        order: Order::Time,
        ..crate::conformance::take(queue, "c")
    }
}

/// Publishes to `subs` subscriptions (or, with `baseline`, sends to as many queues).
async fn run(subs: usize, persistent: bool, selectors: bool, fsync: FsyncPolicy, baseline: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = EmbeddedConfig::new(dir.path());
    cfg.fsync = fsync;
    let store: Arc<EmbeddedStore> = EmbeddedStore::open(cfg).await.unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    for i in 0..subs {
        let selector = if selectors {
            // Every other subscription takes every message, the others none.
            if i % 2 == 0 {
                "region = 'eu' AND n >= 0".to_string()
            } else {
                "region = 'us'".to_string()
            }
        } else {
            String::new()
        };
        let opts = SubscriptionOptions {
            durable: true,
            selector,
            ..SubscriptionOptions::default()
        };
        store
            .topics()
            .subscribe_topic("t", &format!("s{i}"), &opts, "p")
            .await
            .unwrap();
        store.queues().create_queue(&format!("q{i}")).await.unwrap();
    }
    let queues: Vec<String> = (0..subs).map(|i| format!("q{i}")).collect();
    let body = Bytes::from(vec![7u8; 128]);
    let started = Instant::now();
    for b in 0..MESSAGES / BATCH {
        let batch = (0..BATCH)
            .map(|i| NewMessage {
                queues: if baseline { queues.clone() } else { Vec::new() },
                topic: (!baseline).then(|| "t".into()),
                persistent,
                sender: "p".into(),
                receiver: None,
                priority: 5,
                context: 0,
                properties: vec![
                    ("region".into(), PropertyValue::Str("eu".into())),
                    ("n".into(), PropertyValue::Int((b * BATCH + i) as i64)),
                ]
                .into(),
                body: body.clone(),
                created_at: 0,
                deliver_at_ms: 0,
                expires_at_ms: 0,
            })
            .collect();
        for r in store.queues().send_batch(batch).await {
            r.unwrap();
        }
    }
    let publish = started.elapsed();
    let taking = Instant::now();
    let mut copies = 0;
    for i in 0..subs {
        let queue = if baseline {
            format!("q{i}")
        } else {
            format!("t:s{i}")
        };
        let spec = auto_take(&queue);
        loop {
            let got = store.queues().receive(&spec, 1000).await.unwrap();
            if got.is_empty() {
                break;
            }
            copies += got.len();
        }
    }
    let expected = if selectors && !baseline {
        subs.div_ceil(2)
    } else {
        subs
    } * MESSAGES;
    assert_eq!(copies, expected);
    println!(
        "{} {subs:2} persistent {persistent:5} selectors {selectors:5} fsync {fsync}: \
         {:>9.0} msg/s ({:>10.0} copies/s), take {:>10.0} copies/s",
        if baseline {
            "send to queues  "
        } else {
            "publish to subs "
        },
        MESSAGES as f64 / publish.as_secs_f64(),
        expected as f64 / publish.as_secs_f64(),
        expected as f64 / taking.elapsed().as_secs_f64(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints rates; run by hand in release mode"]
async fn publish_rates() {
    for persistent in [true, false] {
        for (subs, selectors) in [(1, false), (10, false), (10, true)] {
            run(subs, persistent, selectors, FsyncPolicy::Always, false).await;
        }
    }
    // CPU cost: publishing against sending the same message to as many queues.
    for subs in [1, 10] {
        for baseline in [true, false] {
            run(subs, true, false, FsyncPolicy::Never, baseline).await;
        }
    }
}

/// The store's share of a non-persistent fan-out to one subscription: time spent in
/// `send_batch` (batches of 256 bare 128-byte messages) and in `receive_with` (batches of up
/// to 2048, auto ack), each measured alone, so per message it is the work done under the
/// state lock plus the call's own overhead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints costs; run by hand in release mode"]
async fn fanout_store_costs() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<EmbeddedStore> = EmbeddedStore::open(EmbeddedConfig::new(dir.path()))
        .await
        .unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    let opts = SubscriptionOptions::default();
    store
        .topics()
        .subscribe_topic("t", "s", &opts, "p")
        .await
        .unwrap();
    let body = Bytes::from(vec![7u8; 128]);
    let spec = auto_take("t:s");
    let (mut publish, mut take) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    let mut taken = 0;
    let mut bytes = 0;
    for _round in 0..400 {
        for _ in 0..8 {
            let batch: Vec<NewMessage> = (0..256)
                .map(|_| NewMessage {
                    persistent: false,
                    body: body.clone(),
                    ..crate::conformance::publish("t", "p", "")
                })
                .collect();
            let t = Instant::now();
            for r in store.queues().send_batch(batch).await {
                r.unwrap();
            }
            publish += t.elapsed();
        }
        let t = Instant::now();
        // The broker copies each body out as it encodes; so does this sink.
        let mut buf = Vec::with_capacity(2048 * 128);
        let mut sink = |_: usize, d: ferry_protocol::DeliveryView<'_>| {
            buf.extend_from_slice(d.body);
        };
        taken += store
            .queues()
            .receive_with(&spec, 2048, None, &mut sink)
            .await
            .unwrap();
        bytes += buf.len();
        take += t.elapsed();
    }
    assert_eq!(taken, 400 * 8 * 256);
    println!(
        "publish {:.3} us/msg, take {:.3} us/msg ({} body bytes copied out)",
        publish.as_secs_f64() * 1e6 / taken as f64,
        take.as_secs_f64() * 1e6 / taken as f64,
        bytes
    );
}

/// The pause a purge of expired messages puts on every other operation (it holds the state
/// lock): a backlog of 500,000 messages without a time to live and 1,000 with one, purged
/// before and after they expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints costs; run by hand in release mode"]
async fn purge_cost_with_a_large_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = EmbeddedConfig::new(dir.path());
    cfg.fsync = FsyncPolicy::Never;
    let store: Arc<EmbeddedStore> = EmbeddedStore::open(cfg).await.unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let now = crate::conformance::NOW;
    for b in 0..501 {
        let batch: Vec<NewMessage> = (0..1000)
            .map(|_| NewMessage {
                persistent: false,
                expires_at_ms: if b == 0 { now + 100 } else { 0 },
                ..crate::conformance::msg(&["q"], "p", "x")
            })
            .collect();
        for r in store.queues().send_batch(batch).await {
            r.unwrap();
        }
    }
    for at in [now, now + 100] {
        let t = Instant::now();
        let purged = store.upkeep().purge_expired(at).await.unwrap();
        println!(
            "purge at +{} ms: {purged} purged in {:.3} ms",
            at - now,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
