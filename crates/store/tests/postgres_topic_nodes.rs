//! More PostgreSQL-engine tests of topics with several nodes over one database: a
//! subscription re-made on one node with another selector applies at once to another node's
//! publishes and conflicts across nodes; a restarted node drops the non-durable subscriptions
//! of the clients its previous run held; non-persistent messages are shared like any other; a
//! commit settles only its own node's deliveries.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::{Arc, OnceLock};

use ferry_protocol::{PropertyValue, SubscriptionOptions};
use ferry_store::conformance::{bodies, lease, msg, publish, take, SESSION};
use ferry_store::{NewMessage, PostgresConfig, PostgresStore, Registration, Store, StoreError};
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

/// A node named `node` on the database at `url`.
async fn node(url: &str, node: &str) -> Arc<PostgresStore> {
    let mut cfg = PostgresConfig::new(url);
    cfg.node = node.into();
    cfg.pool_size = 4;
    PostgresStore::open(cfg).await.unwrap()
}

fn durable(selector: &str) -> SubscriptionOptions {
    SubscriptionOptions {
        durable: true,
        selector: selector.into(),
        ..SubscriptionOptions::default()
    }
}

/// A publish to `t` with an int property `n`.
fn numbered(n: i64) -> NewMessage {
    NewMessage {
        properties: vec![("n".into(), PropertyValue::Int(n))].into(),
        ..publish("t", "p", &format!("m{n}"))
    }
}

/// Names of the subscriptions of `topic`, as `store` lists them.
async fn subscription_names(store: &PostgresStore, topic: &str) -> Vec<String> {
    let topics = store.topics().list_topics().await.unwrap();
    topics
        .iter()
        .find(|t| t.name == topic)
        .unwrap_or_else(|| panic!("topic '{topic}' missing from {topics:?}"))
        .subscriptions
        .iter()
        .map(|s| s.name.clone())
        .collect()
}

/// Bodies of everything ready on `queue` for client "c", in time order (taken).
async fn take_all(store: &PostgresStore, queue: &str) -> Vec<String> {
    let mut spec = take(queue, "c");
    spec.order = ferry_protocol::Order::Time;
    bodies(&store.queues().receive(&spec, 1000).await.unwrap())
}

/// A subscription made on one node gets what another node publishes from then on, with its
/// selector; re-made with another selector, the new one applies at once, and the old settings
/// conflict from either node; a topic deleted on one node is gone for the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_remade_on_one_node_applies_at_once_on_another() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    for c in ["p", "c"] {
        a.sessions().register_client(c).await.unwrap();
    }
    a.topics().create_topic("t").await.unwrap();
    b.queues().send(numbered(0)).await.unwrap();
    a.topics()
        .subscribe_topic("t", "s", &durable("n > 1"), "c")
        .await
        .unwrap();
    for n in 1..=3 {
        b.queues().send(numbered(n)).await.unwrap();
    }
    assert_eq!(subscription_names(&b, "t").await, vec!["s"]);
    assert_eq!(take_all(&b, "t:s").await, vec!["m2", "m3"]);
    a.topics().unsubscribe("t", "s").await.unwrap();
    a.topics()
        .subscribe_topic("t", "s", &durable("n < 5"), "c")
        .await
        .unwrap();
    for n in 4..=6 {
        b.queues().send(numbered(n)).await.unwrap();
    }
    assert_eq!(
        take_all(&a, "t:s").await,
        vec!["m4"],
        "the other node applies the new subscription's selector"
    );
    b.topics()
        .subscribe_topic("t", "s", &durable("n < 5"), "c")
        .await
        .expect("the same settings from the other node");
    match b
        .topics()
        .subscribe_topic("t", "s", &durable("n > 1"), "c")
        .await
    {
        Err(StoreError::InvalidArgument(_)) => {}
        other => {
            panic!("the old selector from the other node: expected InvalidArgument, got {other:?}")
        }
    }
    b.topics().delete_topic("t", true).await.unwrap();
    assert_eq!(
        a.queues().send(numbered(7)).await,
        Err(StoreError::TopicNotFound("t".into()))
    );
    assert!(a.topics().list_topics().await.unwrap().is_empty());
}

/// Sets up topic `t` with a durable subscription and non-durable ones owned by alice (claimed
/// on `a`) and bob (claimed on `b`), each holding one message.
async fn owned_subscriptions(a: &PostgresStore, b: &PostgresStore) {
    a.sessions().register_client("p").await.unwrap();
    a.sessions()
        .claim_session("alice", 1, Registration::Permanent)
        .await
        .unwrap();
    b.sessions()
        .claim_session("bob", 2, Registration::Permanent)
        .await
        .unwrap();
    a.topics().create_topic("t").await.unwrap();
    a.topics()
        .subscribe_topic("t", "keep", &durable(""), "alice")
        .await
        .unwrap();
    let nd = SubscriptionOptions::default();
    a.topics()
        .subscribe_topic("t", "~alice.1", &nd, "alice")
        .await
        .unwrap();
    b.topics()
        .subscribe_topic("t", "~bob.1", &nd, "bob")
        .await
        .unwrap();
    b.queues().send(publish("t", "p", "x")).await.unwrap();
    assert_eq!(
        subscription_names(b, "t").await,
        vec!["keep", "~alice.1", "~bob.1"]
    );
}

/// A node reopened under its name frees what its previous run held, non-durable
/// subscriptions of its clients included (their sessions ended with that run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_drops_its_clients_non_durable_subscriptions() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    owned_subscriptions(&a, &b).await;
    drop(a);
    let a = node(&url, "a").await;
    assert_eq!(subscription_names(&a, "t").await, vec!["keep", "~bob.1"]);
}

/// A non-persistent message is stored in the shared database like any other: another node
/// receives and settles it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_persistent_messages_are_shared_between_nodes() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    for c in ["p", "c"] {
        a.sessions().register_client(c).await.unwrap();
    }
    a.queues().create_queue("q").await.unwrap();
    a.topics().create_topic("t").await.unwrap();
    a.topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    let transient = |m: NewMessage| NewMessage {
        persistent: false,
        ..m
    };
    a.queues()
        .send(transient(msg(&["q"], "p", "np")))
        .await
        .unwrap();
    a.queues()
        .send(transient(publish("t", "p", "np-pub")))
        .await
        .unwrap();
    let d = b.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["np"]);
    b.queues().ack(SESSION, &[d[0].delivery_id]).await.unwrap();
    assert_eq!(take_all(&b, "t:s").await, vec!["np-pub"]);
}

/// Session ids are per node: a commit on one node cannot ack a delivery another node's
/// session of the same number holds, and then stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_settles_only_its_own_nodes_deliveries() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    for c in ["p", "c"] {
        a.sessions().register_client(c).await.unwrap();
    }
    a.queues().create_queue("q").await.unwrap();
    a.queues().create_queue("out").await.unwrap();
    a.queues().send(msg(&["q"], "p", "held")).await.unwrap();
    let d = a.queues().receive(&lease("q", "c"), 1).await.unwrap();
    let id = d[0].delivery_id;
    assert_eq!(
        b.transactions()
            .commit(SESSION, vec![msg(&["out"], "p", "from b")], &[id])
            .await,
        Err(StoreError::DeliveriesNotFound(vec![id]))
    );
    assert!(take_all(&a, "out").await.is_empty());
    let ids = a
        .transactions()
        .commit(SESSION, vec![msg(&["out"], "p", "from a")], &[id])
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(take_all(&b, "out").await, vec!["from a"]);
    assert!(take_all(&b, "q").await.is_empty());
}
