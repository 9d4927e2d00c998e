//! A quick sanity check of the hot path, not a benchmark: one producer sending batches and one
//! consumer taking batches concurrently, fsync always, 128-byte bodies. It prints the rate and
//! only fails if something is grossly wrong (a lost message, or minutes for a few seconds' work).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_protocol::{AckMode, Order, ReceiveMode, Source};
use ferry_store::{EmbeddedConfig, EmbeddedStore, NewMessage, ReceiveSpec, Store};

const MESSAGES: usize = 100_000;
const BATCH: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_and_consumer_move_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path()))
        .await
        .unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    let body = Bytes::from(vec![7u8; 128]);
    let started = Instant::now();

    let producer = {
        let store = store.clone();
        tokio::spawn(async move {
            for _ in 0..MESSAGES / BATCH {
                let batch = (0..BATCH)
                    .map(|_| NewMessage {
                        queues: vec!["q".into()],
                        topic: None,
                        persistent: true,
                        sender: "p".into(),
                        receiver: None,
                        priority: 5,
                        context: 0,
                        properties: Default::default(),
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
        })
    };
    let consumer = {
        let store: Arc<EmbeddedStore> = store.clone();
        tokio::spawn(async move {
            let spec = ReceiveSpec {
                source: Source::Queue("q".into()),
                order: Order::Priority,
                mode: ReceiveMode::Take,
                ack: AckMode::Client,
                hold: false,
                client: "c".into(),
                session: 1,
                lease_until_ms: u64::MAX,
                selector: None,
                now_ms: 0,
                max_bytes: None,
            };
            let mut got = 0;
            let mut last = 0;
            while got < MESSAGES {
                let ds = store.queues().receive(&spec, BATCH).await.unwrap();
                if ds.is_empty() {
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    continue;
                }
                for d in &ds {
                    assert!(d.message.id > last, "ids in order");
                    last = d.message.id;
                }
                let ids: Vec<_> = ds.iter().map(|d| d.delivery_id).collect();
                store.queues().ack(1, &ids).await.unwrap();
                got += ds.len();
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(300), async {
        producer.await.unwrap();
        consumer.await.unwrap();
    })
    .await
    .expect("moving the messages took far too long");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{MESSAGES} messages sent, leased and acked in {secs:.2}s: {:.0} msg/s ({} build)",
        MESSAGES as f64 / secs,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    assert_eq!(store.message_count(), 0);
}
