//! The conformance suite against the PostgreSQL engine, on a real PostgreSQL started for this
//! test binary ([`PgCluster`]), each test on a fresh database of its own.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::{Arc, OnceLock};

use ferry_store::{conformance, PostgresConfig, PostgresStore, Store};
use ferry_testkit::PgCluster;

/// One cluster for the whole binary (its watcher stops it when the process exits).
fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

async fn fresh_store() -> Arc<dyn Store> {
    let url = tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap();
    let mut cfg = PostgresConfig::new(url);
    cfg.pool_size = 4;
    PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
}

macro_rules! conformance_tests {
    ($($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                conformance::$module::$name(fresh_store().await).await;
            }
        )*
    };
}

ferry_store::for_each_conformance_test!(conformance_tests);

/// The whole suite in one go, as `run_all` runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_all_passes() {
    conformance::run_all(fresh_store).await;
}

/// Durable pattern subscriptions across a restart of the node (same database, same node name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_pattern_subscriptions_survive_restart() {
    let url = tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap();
    conformance::wildcards::durable_pattern_subscriptions_survive_restart(Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let mut cfg = PostgresConfig::new(url);
            cfg.pool_size = 4;
            PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
        })
    }))
    .await;
}

/// Users written through one node are read by another sharing the database, and survive both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_shared_by_nodes_and_survive_restart() {
    let url = tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap();
    let open = |node: &'static str| {
        let url = url.clone();
        async move {
            let mut cfg = PostgresConfig::new(url);
            cfg.pool_size = 2;
            cfg.node = node.into();
            PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
        }
    };
    let (a, b) = (open("node-a").await, open("node-b").await);
    let record = ferry_store::UserRecord {
        name: "ops".into(),
        credential: "SCRAM-SHA-256$4096:c2FsdA==$a:b".into(),
        grants: vec!["monitor".into()],
    };
    a.users().create_user(&record).await.unwrap();
    assert_eq!(b.users().user("ops").await.unwrap(), Some(record));
    b.users()
        .set_user_grants("ops", &["admin".into()])
        .await
        .unwrap();
    assert_eq!(
        a.users().user("ops").await.unwrap().unwrap().grants,
        ["admin"]
    );
    b.users().delete_user("ops").await.unwrap();
    assert_eq!(a.users().user("ops").await.unwrap(), None);
    drop((a, b));
    let url2 = url.clone();
    conformance::users::users_survive_reopen(Box::new(move || {
        let url = url2.clone();
        Box::pin(async move {
            let mut cfg = PostgresConfig::new(url);
            cfg.pool_size = 2;
            PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
        })
    }))
    .await;
}

/// Bodies of a backlog read back byte-exact across a restart of the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_survive_restart_byte_exact() {
    let url = tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap();
    conformance::backlog::bodies_survive_restart_byte_exact(Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let mut cfg = PostgresConfig::new(url);
            cfg.pool_size = 4;
            PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
        })
    }))
    .await;
}
