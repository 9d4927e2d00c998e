//! The conformance suite against the embedded engine, on the real filesystem in a temp dir,
//! and once more on the in-memory faulty backend (with no faults injected). Both runs give the
//! engine a body cache far smaller than the suite's backlogs (none at all in memory), so that
//! most deliveries read their body back from the log.

use std::sync::{Arc, Mutex};

use ferry_store::embedded::FaultyBackend;
use ferry_store::{conformance, EmbeddedConfig, EmbeddedStore, Store};

#[tokio::test]
async fn embedded_on_disk_passes_conformance() {
    // Keep every temp dir alive until the end of the run. Each store allocates the disk space
    // of its active segment and of its reserve ahead: 1 MiB segments keep a hundred of them
    // small.
    let dirs = Arc::new(Mutex::new(Vec::new()));
    conformance::run_all(|| {
        let dirs = dirs.clone();
        async move {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = EmbeddedConfig::new(dir.path());
            cfg.segment_bytes = 1 << 20;
            cfg.cache_bytes = 16 * 1024;
            let store = EmbeddedStore::open(cfg).await.unwrap();
            dirs.lock().unwrap().push(dir);
            store as Arc<dyn Store>
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_in_memory_with_tiny_segments_and_properties_in_the_log_passes_conformance() {
    conformance::run_all(|| async {
        let mut cfg = EmbeddedConfig::new("/mem");
        cfg.backend = Arc::new(FaultyBackend::new());
        cfg.segment_bytes = 256;
        cfg.cache_bytes = 0;
        // Every persistent message's properties in the log only.
        cfg.properties_bytes = 0;
        EmbeddedStore::open(cfg).await.unwrap() as Arc<dyn Store>
    })
    .await;
}

#[tokio::test]
async fn embedded_durable_pattern_subscriptions_survive_restart() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().to_owned();
    conformance::wildcards::durable_pattern_subscriptions_survive_restart(Box::new(move || {
        let path = path.clone();
        Box::pin(async move {
            EmbeddedStore::open(EmbeddedConfig::new(&path))
                .await
                .unwrap() as Arc<dyn Store>
        })
    }))
    .await;
    drop(dir);
}

#[tokio::test]
async fn embedded_users_survive_restart() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().to_owned();
    conformance::users::users_survive_reopen(Box::new(move || {
        let path = path.clone();
        Box::pin(async move {
            EmbeddedStore::open(EmbeddedConfig::new(&path))
                .await
                .unwrap() as Arc<dyn Store>
        })
    }))
    .await;
    drop(dir);
}

#[tokio::test]
async fn embedded_bodies_survive_restart_byte_exact() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().to_owned();
    conformance::backlog::bodies_survive_restart_byte_exact(Box::new(move || {
        let path = path.clone();
        Box::pin(async move {
            let mut cfg = EmbeddedConfig::new(&path);
            cfg.segment_bytes = 64 * 1024;
            cfg.cache_bytes = 8 * 1024;
            EmbeddedStore::open(cfg).await.unwrap() as Arc<dyn Store>
        })
    }))
    .await;
    drop(dir);
}
