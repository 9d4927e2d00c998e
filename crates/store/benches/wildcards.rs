//! What wildcard subscriptions that do not match cost a publish: publishes to `prices.eu.fish`
//! (one exact subscription takes each) on a store without pattern subscriptions and on one
//! with 10,000 pattern subscriptions that never match it, for both engines. The target: at most
//! 1.5x the cost without them.
//!
//! The patterns are chosen to be close to the topic, so that an index that looked at them
//! would show: a third share its first two words (`prices.*.x17`), a third its first two words
//! and a trailing wildcard (`prices.eu.y17.>`), a third nothing (`other17.>`).
//!
//! The two stores are measured alternately, round after round (the machine is shared and
//! noisy), and the medians of the per-publish times compared. Not a test; run it with
//!
//! ```sh
//! cargo bench -p ferry-store --bench wildcards -- [--rounds N] [--json FILE] [--embedded-only]
//! ```
//!
//! (`FILE` relative to the workspace, e.g. `docs/benchmarks/results/wildcards.json`.)
//!
//! The PostgreSQL part starts a cluster of its own (as the tests do).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ferry_protocol::{AckMode, Order, ReceiveMode, Source, SubscriptionOptions};
use ferry_store::embedded::FaultyBackend;
use ferry_store::{
    EmbeddedConfig, EmbeddedStore, FsyncPolicy, NewMessage, PostgresConfig, PostgresStore,
    ReceiveSpec, Store,
};
use ferry_testkit::PgCluster;

const TOPIC: &str = "prices.eu.fish";
const PATTERNS: usize = 10_000;

fn pattern(i: usize) -> String {
    match i % 3 {
        0 => format!("prices.*.x{i}"),
        1 => format!("prices.eu.y{i}.>"),
        _ => format!("other{i}.>"),
    }
}

fn publish(i: u64) -> NewMessage {
    NewMessage {
        queues: Vec::new(),
        topic: Some(TOPIC.into()),
        persistent: true,
        sender: "p".into(),
        receiver: None,
        priority: 5,
        context: i,
        properties: Default::default(),
        body: Bytes::from(vec![7u8; 128]),
        created_at: 1_700_000_000_000,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    }
}

/// Makes the topic, its one exact subscription and `patterns` pattern subscriptions.
async fn prepare(store: &Arc<dyn Store>, patterns: usize) {
    store.sessions().register_client("p").await.unwrap();
    store.topics().create_topic(TOPIC).await.unwrap();
    let durable = SubscriptionOptions {
        durable: true,
        ..SubscriptionOptions::default()
    };
    store
        .topics()
        .subscribe_topic(TOPIC, "exact", &durable, "c")
        .await
        .unwrap();
    for i in 0..patterns {
        store
            .topics()
            .subscribe_topic(&pattern(i), "s", &durable, "c")
            .await
            .unwrap();
    }
}

/// Publishes `n` messages one by one; returns microseconds per publish. Then takes them off
/// the exact subscription, untimed, so every round starts from an empty queue.
async fn round(store: &Arc<dyn Store>, n: u64) -> f64 {
    let started = Instant::now();
    for i in 0..n {
        store.queues().send(publish(i)).await.unwrap();
    }
    let us = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    let spec = ReceiveSpec {
        source: Source::Queue(format!("{TOPIC}:exact")),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        hold: false,
        client: "c".into(),
        session: 1,
        lease_until_ms: 0,
        selector: None,
        now_ms: 1_700_000_000_000,
        max_bytes: None,
    };
    let mut left = n as usize;
    while left > 0 {
        let got = store.queues().receive(&spec, 1000).await.unwrap();
        assert!(
            !got.is_empty(),
            "every publish reached the exact subscription"
        );
        left -= got.len();
    }
    us
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

/// Alternates rounds on `none` and `many`; returns the JSON result of one engine.
async fn compare(
    engine: &str,
    none: &Arc<dyn Store>,
    many: &Arc<dyn Store>,
    rounds: usize,
    n: u64,
) -> serde_json::Value {
    // One untimed round each, to warm caches and prepared statements.
    round(none, n / 4).await;
    round(many, n / 4).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r % 2 == 0 {
            a.push(round(none, n).await);
            b.push(round(many, n).await);
        } else {
            b.push(round(many, n).await);
            a.push(round(none, n).await);
        }
    }
    let (ma, mb) = (median(&a), median(&b));
    println!(
        "{engine}: {n} publishes per round, {rounds} rounds; median us/publish: \
         no patterns {ma:.2}, {PATTERNS} non-matching patterns {mb:.2}; ratio {:.3}",
        mb / ma
    );
    serde_json::json!({
        "engine": engine,
        "publishes_per_round": n,
        "rounds": rounds,
        "us_per_publish_without_patterns": a,
        "us_per_publish_with_patterns": b,
        "median_without_patterns": ma,
        "median_with_patterns": mb,
        "ratio": mb / ma,
        "target_ratio": 1.5,
    })
}

async fn embedded(patterns: usize) -> Arc<dyn Store> {
    let mut cfg = EmbeddedConfig::new("/mem");
    cfg.backend = Arc::new(FaultyBackend::new());
    cfg.fsync = FsyncPolicy::Never;
    let store = EmbeddedStore::open(cfg).await.unwrap() as Arc<dyn Store>;
    prepare(&store, patterns).await;
    store
}

async fn postgres(cluster: &'static PgCluster, patterns: usize) -> Arc<dyn Store> {
    let url = tokio::task::spawn_blocking(|| cluster.fresh_database())
        .await
        .unwrap();
    let mut cfg = PostgresConfig::new(url);
    cfg.pool_size = 4;
    let store = PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>;
    prepare(&store, patterns).await;
    store
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let rounds: usize = value("--rounds").and_then(|r| r.parse().ok()).unwrap_or(9);
    let json = value("--json");
    let mut results = Vec::new();

    let (none, many) = (embedded(0).await, embedded(PATTERNS).await);
    results.push(compare("embedded (in memory)", &none, &many, rounds, 20_000).await);
    drop((none, many));

    if !args.iter().any(|a| a == "--embedded-only") {
        let cluster: &'static PgCluster = Box::leak(Box::new(
            tokio::task::spawn_blocking(PgCluster::start).await.unwrap(),
        ));
        let (none, many) = (
            postgres(cluster, 0).await,
            postgres(cluster, PATTERNS).await,
        );
        results.push(compare("postgres", &none, &many, rounds, 1_000).await);
    }

    if let Some(path) = json {
        let doc = serde_json::json!({
            "benchmark": "wildcards: publish cost with 10,000 non-matching pattern subscriptions",
            "command": "cargo bench -p ferry-store --bench wildcards -- --json FILE",
            "patterns": PATTERNS,
            "results": results,
        });
        // Relative to the workspace (cargo runs benches in the package's directory).
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path);
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
        println!("wrote {}", path.display());
    }
}
