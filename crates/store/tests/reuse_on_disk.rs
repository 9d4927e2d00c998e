//! Reused segment files on the real filesystem: a copy of the data directory taken while the
//! store runs (what `kill -9` leaves) holds old records past the active segment's end, and
//! opening it gives back exactly what was acknowledged; a clean close cuts them off.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::fs;
use std::path::Path;

use ferry_protocol::{AckMode, ReceiveMode};
use ferry_store::embedded::FsyncPolicy;
use ferry_store::{EmbeddedConfig, EmbeddedStore, Store};

mod common;
use common::{bodies, msg, peek_all, spec};

fn config(dir: &Path) -> EmbeddedConfig {
    let mut cfg = EmbeddedConfig::new(dir);
    cfg.segment_bytes = 4096;
    cfg.fsync = FsyncPolicy::Always;
    cfg
}

/// Bodies of one size, so that a reused file's old records line up with the new ones.
fn body(i: usize) -> String {
    format!("message {i:06} {:0>40}", 0)
}

fn files(dir: &Path, extension: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(extension))
        .collect();
    names.sort();
    names
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to.join("segments")).unwrap();
    for name in files(from, ".log") {
        fs::copy(
            from.join("segments").join(&name),
            to.join("segments").join(&name),
        )
        .unwrap();
    }
}

#[tokio::test]
async fn a_running_stores_copy_replays_only_the_new_records_of_a_reused_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(config(dir.path())).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    for i in 0..200 {
        store.queues().send(msg(&["q"], &body(i))).await.unwrap();
    }
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    while !store.queues().receive(&take, 100).await.unwrap().is_empty() {}
    for _ in 0..10 {
        store.upkeep().maintain().await.unwrap();
    }
    let spares = files(dir.path(), ".spare");
    assert!(!spares.is_empty(), "compaction kept no spare");
    // Roll onto a reused file, then write a little into it.
    let mut i = 1000;
    while files(dir.path(), ".spare") == spares {
        store.queues().send(msg(&["q"], &body(i))).await.unwrap();
        i += 1;
    }
    store.queues().send(msg(&["q"], &body(i))).await.unwrap();
    let expected: Vec<String> = (1000..=i).map(body).collect();
    let head = files(dir.path(), ".log").pop().unwrap();
    let written = fs::metadata(dir.path().join("segments").join(&head))
        .unwrap()
        .len();
    assert!(
        written > 3000,
        "the reused file keeps its old length ({written} bytes) while a few records overwrite its start"
    );

    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), copy.path());
    let recovered = EmbeddedStore::open(config(copy.path())).await.unwrap();
    assert_eq!(bodies(&peek_all(&recovered, "q").await), expected);
    let cut = fs::metadata(copy.path().join("segments").join(&head))
        .unwrap()
        .len();
    assert!(
        cut < written,
        "recovery cut the old records off: {cut} bytes"
    );
    drop(recovered);

    // A clean close cuts the active segment to what was written.
    drop(store);
    let closed = fs::metadata(dir.path().join("segments").join(&head))
        .unwrap()
        .len();
    assert_eq!(closed, cut);
    let reopened = EmbeddedStore::open(config(dir.path())).await.unwrap();
    assert_eq!(bodies(&peek_all(&reopened, "q").await), expected);
}
