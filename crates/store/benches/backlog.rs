//! A backlog larger than the body cache: the embedded engine's memory, recovery and drain with
//! its bodies in the log. Fills a store on disk with `--messages` messages of `--size` bytes on
//! one queue (batches of 1,000 sends, fsync always, consumers stopped), then reports
//!
//! - the process's resident size with the whole backlog queued, and the engine's index and
//!   cache figures;
//! - the time to reopen the store (recovery replays the log: the same path a restart after
//!   `kill -9` takes, the log being identical), and the resident size after it;
//! - the time to drain the backlog with auto-ack takes of 1,000 (bodies read from the log:
//!   the cache is empty after a reopen), and the read bandwidth that makes.
//!
//! With `--properties`, every message carries two properties (an integer `n`, its number, and
//! a short string), and after the reopen a receive whose selector (`n < 0`) matches nothing
//! walks the whole backlog: the cost of a selector skipping it. `--properties-bytes B` sets the
//! properties budget (`properties_memory_bytes`; 0: every message's properties are read from
//! the log by that walk).
//!
//! With `--drop-caches` (as root) the page cache is dropped before the reopen and again before
//! the drain (recovery reads the whole log, which would leave it cached), so both read the log
//! from the disk; and the disk's own sequential read bandwidth is measured first, in the same
//! sitting, by reading the log's files cold with `dd` (4 MiB blocks), for comparison.
//!
//! Not a test; run it with
//!
//! ```sh
//! cargo bench -p ferry-store --bench backlog -- --messages 1000000 --size 1024 \
//!   [--dir DIR] [--drop-caches] [--properties] [--properties-bytes B] [--json FILE]
//! ```
//!
//! The store lives in a new directory under `DIR` (default: the system's temp dir), removed at
//! the end. The store runs in this process, without a broker around it.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::Instant;

use bytes::Bytes;
use ferry_protocol::{AckMode, Order, PropertyValue, ReceiveMode, Source};
use ferry_store::{EmbeddedConfig, EmbeddedStore, NewMessage, ReceiveSpec, Store};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// The process's resident size in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Drops the page cache (needs root); says whether it could.
fn drop_caches() {
    let ok = std::process::Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .status()
        .is_ok_and(|s| s.success());
    eprintln!("page cache dropped: {ok}");
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn main() {
    let messages: usize = arg("--messages").map_or(1_000_000, |v| v.parse().unwrap());
    let size: usize = arg("--size").map_or(1024, |v| v.parse().unwrap());
    let base = arg("--dir").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(base).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let body = Bytes::from(vec![0x5a; size]);
    let with_properties = flag("--properties");
    let budget: Option<u64> = arg("--properties-bytes").map(|v| v.parse().unwrap());
    let config = || {
        let mut cfg = EmbeddedConfig::new(dir.path());
        if let Some(b) = budget {
            cfg.properties_bytes = b;
        }
        cfg
    };
    let properties = |i: usize| {
        if with_properties {
            vec![
                ("n".to_string(), PropertyValue::Int(i as i64)),
                ("tag".to_string(), PropertyValue::Str("backlog".into())),
            ]
        } else {
            Vec::new()
        }
    };
    let message = |i: usize| NewMessage {
        queues: vec!["q".into()],
        topic: None,
        persistent: true,
        sender: "p".into(),
        receiver: None,
        priority: 4,
        context: 0,
        properties: properties(i),
        body: body.clone(),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    };
    let rss_start = rss();
    let (fill_secs, rss_full, index, cache) = rt.block_on(async {
        let store = EmbeddedStore::open(config()).await.unwrap();
        store.sessions().register_client("p").await.unwrap();
        store.queues().create_queue("q").await.unwrap();
        let started = Instant::now();
        let mut sent = 0;
        while sent < messages {
            let n = (messages - sent).min(1000);
            for r in store
                .queues()
                .send_batch((sent..sent + n).map(message).collect())
                .await
            {
                r.unwrap();
            }
            sent += n;
        }
        let fill = started.elapsed().as_secs_f64();
        let stats = ferry_store::Admin::engine_stats(&*store);
        (
            fill,
            rss(),
            stats.index_bytes.unwrap_or(0),
            stats.cache_bytes.unwrap_or(0),
        )
    });
    let log_bytes: u64 = std::fs::read_dir(dir.path().join("segments"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    eprintln!(
        "filled {messages} x {size} B in {fill_secs:.1} s; RSS {:.0} MB (started at {:.0} MB); \
         index {:.0} MB, cache {:.0} MB; log {:.0} MB",
        mb(rss_full),
        mb(rss_start),
        mb(index),
        mb(cache),
        mb(log_bytes)
    );
    let cold = flag("--drop-caches");
    let mut dd_mb_s = None;
    if cold {
        drop_caches();
        let started = Instant::now();
        let ok = std::process::Command::new("sh")
            .args([
                "-c",
                "for f in \"$0\"/*.log; do dd if=\"$f\" of=/dev/null bs=4M status=none; done",
            ])
            .arg(dir.path().join("segments"))
            .status()
            .is_ok_and(|s| s.success());
        let secs = started.elapsed().as_secs_f64();
        if ok {
            dd_mb_s = Some(mb(log_bytes) / secs);
            eprintln!("dd read the log cold at {:.0} MB/s", mb(log_bytes) / secs);
        }
        drop_caches();
    }
    let (recovery_secs, rss_recovered, select_secs, drain_secs) = rt.block_on(async {
        let started = Instant::now();
        let store = EmbeddedStore::open(config()).await.unwrap();
        let recovery = started.elapsed().as_secs_f64();
        let rss_recovered = rss();
        if cold {
            // Recovery read the whole log: the drain must read it from the disk again.
            drop_caches();
        }
        let spec = ReceiveSpec {
            source: Source::Queue("q".into()),
            order: Order::Time,
            mode: ReceiveMode::Take,
            ack: AckMode::Auto,
            hold: false,
            client: "c".into(),
            session: 1,
            lease_until_ms: 0,
            selector: None,
            now_ms: 1,
        };
        let select = if with_properties {
            let nothing = ReceiveSpec {
                selector: Some(std::sync::Arc::new(
                    ferry_selector::Selector::parse("n < 0").unwrap(),
                )),
                ..spec.clone()
            };
            let started = Instant::now();
            let got = store.queues().receive(&nothing, 1000).await.unwrap();
            assert!(got.is_empty());
            let secs = started.elapsed().as_secs_f64();
            eprintln!("a selector matching nothing walked the backlog in {secs:.2} s");
            Some(secs)
        } else {
            None
        };
        let started = Instant::now();
        let mut n = 0;
        while n < messages {
            let d = store.queues().receive(&spec, 1000).await.unwrap();
            assert!(!d.is_empty(), "the backlog ended early at {n}");
            assert!(d.iter().all(|d| d.message.body.len() == size));
            n += d.len();
        }
        (
            recovery,
            rss_recovered,
            select,
            started.elapsed().as_secs_f64(),
        )
    });
    let drain_rate = messages as f64 / drain_secs;
    let drain_mb_s = mb(log_bytes) / drain_secs;
    eprintln!(
        "recovered in {recovery_secs:.2} s (RSS {:.0} MB); drained in {drain_secs:.1} s: \
         {drain_rate:.0} messages/s, {drain_mb_s:.0} MB/s of log",
        mb(rss_recovered)
    );
    // The command as it is typed (the binary's own path and `--dir` say nothing useful).
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let Some(i) = args.iter().position(|a| a == "--dir") {
        if let Some(v) = args.get_mut(i + 1) {
            *v = "DIR".into();
        }
    }
    let json = serde_json::json!({
        "command": format!("cargo bench -p ferry-store --bench backlog -- {}", args.join(" ")),
        "messages": messages,
        "size": size,
        "fill_seconds": fill_secs,
        "rss_start_bytes": rss_start,
        "rss_full_bytes": rss_full,
        "index_bytes": index,
        "cache_bytes": cache,
        "log_bytes": log_bytes,
        "dropped_page_cache": flag("--drop-caches"),
        "recovery_seconds": recovery_secs,
        "rss_after_recovery_bytes": rss_recovered,
        "properties": with_properties,
        "properties_bytes": budget,
        "select_nothing_seconds": select_secs,
        "drain_seconds": drain_secs,
        "drain_messages_per_second": drain_rate,
        "drain_log_mb_per_second": drain_mb_s,
        "dd_cold_read_mb_per_second": dd_mb_s,
        "drain_over_dd": dd_mb_s.map(|dd| drain_mb_s / dd),
    });
    println!("{json:#}");
    if let Some(file) = arg("--json") {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(file);
        std::fs::write(path, format!("{json:#}\n")).unwrap();
    }
}
