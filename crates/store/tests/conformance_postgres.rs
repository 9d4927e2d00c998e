//! The conformance suite against the PostgreSQL engine, on a real PostgreSQL started for this
//! test binary ([`PgCluster`]), each test on a fresh database of its own.

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
