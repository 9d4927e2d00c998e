//! The operator's figures on the PostgreSQL engine across nodes sharing one database: every
//! node shows the whole cluster's queue flows (each node's counts reach the others with its
//! heartbeat) and the node each online client is on.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::{Arc, OnceLock};

use ferry_store::conformance::{msg, setup, take};
use ferry_store::{PostgresConfig, PostgresStore, QueueDetails, Registration, Store};
use ferry_testkit::PgCluster;

fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

async fn open_as(url: &str, node: &str) -> Arc<dyn Store> {
    let mut cfg = PostgresConfig::new(url);
    cfg.node = node.into();
    PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
}

async fn figures(store: &Arc<dyn Store>, queue: &str) -> QueueDetails {
    store
        .admin()
        .queue_details()
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.name == queue)
        .unwrap()
}

async fn flows(store: &Arc<dyn Store>, queue: &str) -> (Option<u64>, Option<u64>) {
    let q = figures(store, queue).await;
    (q.entered_total, q.left_total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_shows_the_whole_clusters_queue_flows_and_clients() {
    let url = tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap();
    let a = open_as(&url, "node-a").await;
    let b = open_as(&url, "node-b").await;
    setup(&a, &["p", "c"], &["q"]).await;
    for i in 0..5 {
        a.queues()
            .send(msg(&["q"], "p", &format!("m{i}")))
            .await
            .unwrap();
    }
    assert_eq!(
        b.queues().receive(&take("q", "c"), 3).await.unwrap().len(),
        3
    );
    // Each node knows its own counts at once...
    assert_eq!(flows(&a, "q").await, (Some(5), Some(0)));
    assert_eq!(flows(&b, "q").await, (Some(0), Some(3)));
    // ... and the others' after their heartbeats.
    a.sessions().heartbeat(60_000).await.unwrap();
    b.sessions().heartbeat(60_000).await.unwrap();
    assert_eq!(flows(&a, "q").await, (Some(5), Some(3)));
    assert_eq!(flows(&b, "q").await, (Some(5), Some(3)));
    // Written once: more heartbeats add nothing.
    a.sessions().heartbeat(60_000).await.unwrap();
    assert_eq!(flows(&b, "q").await, (Some(5), Some(3)));
    let q = figures(&b, "q").await;
    assert_eq!((q.ready, q.ready_bytes), (2, Some(4)));

    // Clients name the node their session is on, seen from either node.
    a.sessions()
        .claim_session("alice", 1, Registration::Permanent)
        .await
        .unwrap();
    b.sessions()
        .claim_session("bob", 1, Registration::Permanent)
        .await
        .unwrap();
    for store in [&a, &b] {
        let nodes: Vec<(String, Option<String>)> = store
            .admin()
            .list_clients()
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.node))
            .collect();
        assert_eq!(
            nodes,
            vec![
                ("alice".to_string(), Some("node-a".to_string())),
                ("bob".to_string(), Some("node-b".to_string())),
                ("c".to_string(), None),
                ("p".to_string(), None),
            ]
        );
    }

    // A deleted queue takes its counters with it; one made again under its name starts at 0.
    b.queues().delete_queue("q", true).await.unwrap();
    b.queues().create_queue("q").await.unwrap();
    assert_eq!(flows(&a, "q").await, (Some(0), Some(0)));
}
