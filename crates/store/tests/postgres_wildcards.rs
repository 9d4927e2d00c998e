//! PostgreSQL-engine tests of wildcard subscriptions beyond the conformance suite: a pattern
//! subscription made on one node gets what another node publishes, at once; pattern rows go
//! with their last subscription (also when subscribes and unsubscribes of one pattern race);
//! and the publish statement walks an index rather than every pattern.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::{Arc, OnceLock};

use ferry_protocol::SubscriptionOptions;
use ferry_store::conformance::{bodies, msg, setup, take};
use ferry_store::{NewMessage, PostgresConfig, PostgresStore, Store};
use ferry_testkit::PgCluster;

fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

async fn fresh_url() -> String {
    tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap()
}

async fn open_node(url: &str, node: &str) -> Arc<dyn Store> {
    let mut cfg = PostgresConfig::new(url);
    cfg.node = node.into();
    cfg.pool_size = 4;
    PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
}

fn psql(url: &str, sql: &str) -> String {
    let db = url.rsplit('/').next().unwrap();
    cluster().psql(db, sql).unwrap().trim().to_owned()
}

fn publish(topic: &str, body: &str) -> NewMessage {
    let mut m = msg(&[], "p", body);
    m.topic = Some(topic.into());
    m
}

fn durable() -> SubscriptionOptions {
    SubscriptionOptions {
        durable: true,
        ..SubscriptionOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_subscription_made_on_one_node_gets_what_another_publishes() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await;
    let b = open_node(&url, "b").await;
    setup(&a, &["p", "c"], &[]).await;
    a.topics().create_topic("prices.eu.fish").await.unwrap();
    // Node a publishes before b subscribes: nothing it may have kept about patterns helps.
    a.queues()
        .send(publish("prices.eu.fish", "before"))
        .await
        .unwrap();
    b.topics()
        .subscribe_topic("prices.*.fish", "s", &durable(), "c")
        .await
        .unwrap();
    a.queues()
        .send(publish("prices.eu.fish", "after"))
        .await
        .unwrap();
    let got = b
        .queues()
        .receive(&take("prices.*.fish:s", "c"), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_row_goes_with_its_last_subscription() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await;
    setup(&a, &["p", "c"], &[]).await;
    a.topics().create_topic("t.x").await.unwrap();
    for name in ["s1", "s2"] {
        a.topics()
            .subscribe_topic("t.>", name, &durable(), "c")
            .await
            .unwrap();
    }
    let patterns = || psql(&url, "SELECT count(*) FROM topics WHERE is_pattern");
    assert_eq!(
        patterns(),
        "1",
        "one row for the pattern, whatever its subscriptions"
    );
    a.topics().unsubscribe("t.>", "s1").await.unwrap();
    assert_eq!(patterns(), "1", "kept while a subscription is left");
    a.topics().unsubscribe("t.>", "s2").await.unwrap();
    assert_eq!(patterns(), "0", "gone with the last one");
    assert_eq!(
        psql(&url, "SELECT count(*) FROM topics"),
        "1",
        "the topic stays"
    );
}

/// Subscribes and unsubscribes of one pattern racing on two nodes never leave a subscription
/// whose pattern row is gone, and the pattern goes on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_subscribes_and_unsubscribes_of_one_pattern_keep_its_row() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await;
    let b = open_node(&url, "b").await;
    setup(&a, &["p", "c"], &[]).await;
    a.topics().create_topic("t.x").await.unwrap();
    let churn = |store: Arc<dyn Store>, name: &'static str| {
        tokio::spawn(async move {
            for _ in 0..30 {
                store
                    .topics()
                    .subscribe_topic("t.*", name, &durable(), "c")
                    .await
                    .unwrap();
                store.topics().unsubscribe("t.*", name).await.unwrap();
            }
        })
    };
    let (x, y) = (churn(a.clone(), "x"), churn(b.clone(), "y"));
    x.await.unwrap();
    y.await.unwrap();
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM subscriptions s \
             WHERE NOT EXISTS (SELECT 1 FROM topics t WHERE t.id = s.topic_id)"
        ),
        "0",
        "no subscription outlives its pattern's row"
    );
    a.topics()
        .subscribe_topic("t.*", "z", &durable(), "c")
        .await
        .unwrap();
    b.queues().send(publish("t.x", "m")).await.unwrap();
    assert_eq!(
        bodies(&a.queues().receive(&take("t.*:z", "c"), 10).await.unwrap()),
        vec!["m"]
    );
}

/// The publish statement looks patterns up by index: with thousands of patterns that do not
/// match, it reads a few index entries per word of the topic, not the patterns' rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_probe_the_pattern_index_instead_of_reading_every_pattern() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await;
    setup(&a, &["p", "c"], &[]).await;
    a.topics().create_topic("prices.eu.fish").await.unwrap();
    psql(
        &url,
        "INSERT INTO topics (name, is_pattern) \
         SELECT 'other' || i || '.*.>', true FROM generate_series(1, 5000) i",
    );
    a.topics()
        .subscribe_topic("prices.>", "s", &durable(), "c")
        .await
        .unwrap();
    // The statement's walk, as the engine runs it, reads the patterns' index only.
    let plan = psql(
        &url,
        "SET enable_seqscan = off; SET enable_bitmapscan = off; \
         EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) \
         SELECT 1 FROM topics t WHERE t.is_pattern \
           AND t.name COLLATE \"C\" >= 'prices.' AND t.name COLLATE \"C\" < 'prices/'",
    );
    assert!(plan.contains("topics_patterns"), "{plan}");
    a.queues()
        .send(publish("prices.eu.fish", "m"))
        .await
        .unwrap();
    assert_eq!(
        bodies(
            &a.queues()
                .receive(&take("prices.>:s", "c"), 10)
                .await
                .unwrap()
        ),
        vec!["m"]
    );
}
