//! What a selector costs a queue receive on the embedded engine, in memory (no disk): takes
//! every message of a preloaded queue in batches, once without a selector and once with
//! selectors that match all, half or a few of the messages (then the first two again, to show
//! how much the timings drift within one run), and prints the time per message taken. Not a
//! test and not part of `ferry-bench`; run it with
//!
//! ```sh
//! cargo run --release -p ferry-store --example selector_cost [MESSAGES]
//! ```

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ferry_protocol::{AckMode, Order, PropertyValue, ReceiveMode, Source};
use ferry_selector::Selector;
use ferry_store::embedded::FaultyBackend;
use ferry_store::{EmbeddedConfig, EmbeddedStore, FsyncPolicy, NewMessage, ReceiveSpec, Store};

const BATCH: usize = 64;

/// Ten properties, like the selector crate's benchmark message; `region` alternates eu/us and
/// `seq` counts up.
fn message(i: i64) -> NewMessage {
    let region = if i % 2 == 0 { "eu" } else { "us" };
    NewMessage {
        queues: vec!["q".into()],
        topic: None,
        persistent: true,
        sender: "shop".into(),
        receiver: None,
        priority: 5,
        context: 0,
        properties: vec![
            (
                "customer".into(),
                PropertyValue::Str(format!("c-{}", i % 1000)),
            ),
            ("channel".into(), PropertyValue::Str("web".into())),
            ("currency".into(), PropertyValue::Str("EUR".into())),
            ("items".into(), PropertyValue::Int(3)),
            ("weight".into(), PropertyValue::Float(1.75)),
            (
                "name".into(),
                PropertyValue::Str(format!("order-{i}-{region}")),
            ),
            ("discounted".into(), PropertyValue::Bool(false)),
            ("price".into(), PropertyValue::Int(150)),
            ("seq".into(), PropertyValue::Int(i)),
            ("region".into(), PropertyValue::Str(region.into())),
        ]
        .into(),
        body: Bytes::from(vec![7u8; 128]),
        created_at: 1_700_000_000_000,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    }
}

async fn fresh(n: i64) -> Arc<EmbeddedStore> {
    let mut cfg = EmbeddedConfig::new("/mem");
    cfg.backend = Arc::new(FaultyBackend::new());
    cfg.fsync = FsyncPolicy::Never;
    let store = EmbeddedStore::open(cfg).await.expect("open");
    store
        .sessions()
        .register_client("shop")
        .await
        .expect("client");
    store.queues().create_queue("q").await.expect("queue");
    let mut i = 0;
    while i < n {
        let batch: Vec<_> = (i..(i + 1000).min(n)).map(message).collect();
        for r in store.queues().send_batch(batch).await {
            r.expect("send");
        }
        i += 1000;
    }
    store
}

/// Takes until nothing more is selected; returns (messages taken, seconds).
async fn drain(store: &EmbeddedStore, selector: Option<&str>) -> (usize, f64) {
    let spec = ReceiveSpec {
        source: Source::Queue("q".into()),
        order: Order::Priority,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        hold: false,
        client: "shop".into(),
        session: 1,
        lease_until_ms: u64::MAX,
        selector: selector.map(|s| Arc::new(Selector::parse(s).expect("selector parses"))),
        now_ms: 0,
        max_bytes: None,
    };
    let started = Instant::now();
    let mut taken = 0;
    loop {
        let got = store.queues().receive(&spec, BATCH).await.expect("receive");
        if got.is_empty() {
            break;
        }
        taken += got.len();
    }
    (taken, started.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    println!("{n} messages of 128 bytes with 10 properties, takes of {BATCH}, auto ack, in memory");
    let cases: &[(&str, Option<&str>)] = &[
        ("no selector", None),
        ("matches all", Some("price > 100 AND currency = 'EUR'")),
        ("matches half", Some("region = 'eu' AND price > 100")),
        ("matches 1 in 1000, spread", Some("seq / 1000 * 1000 = seq")),
        (
            "matches all, again",
            Some("price > 100 AND currency = 'EUR'"),
        ),
        ("no selector, again", None),
    ];
    let mut base = None;
    for &(name, selector) in cases {
        let store = fresh(n).await;
        let (taken, secs) = drain(&store, selector).await;
        let per = secs * 1e9 / taken.max(1) as f64;
        let base_per = *base.get_or_insert(per);
        println!(
            "{name:<28} {taken:>8} taken in {secs:>7.3} s: {per:>9.0} ns per message taken ({:.2}x)",
            per / base_per
        );
    }
}
