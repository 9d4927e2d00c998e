//! A backlog larger than the body cache: the embedded engine's memory, recovery and drain with
//! its bodies in the log. Fills a store on disk with `--messages` messages of `--size` bytes on
//! one queue (batches of 1,000 sends, fsync always, consumers stopped), then reports
//!
//! - the process's resident size with the whole backlog queued, and the engine's index and
//!   cache figures;
//! - the time to reopen the store (recovery replays the log: the same path a restart after
//!   `kill -9` takes, the log being identical), and the resident size after it; with
//!   `--kill-9`, the store is filled by a child process that is killed with `kill -9` at full
//!   backlog, and this process recovers what it left;
//! - the time to drain the backlog with auto-ack takes of 1,000 (bodies read from the log:
//!   the cache is empty after a reopen), and the read bandwidth that makes; by one consumer,
//!   or by `--consumers N` taking from the queue at once.
//!
//! With `--properties`, every message carries two properties (an integer `n`, its number, and
//! a short string), and after the reopen a receive whose selector (`n < 0`) matches nothing
//! walks the whole backlog: the cost of a selector skipping it. `--properties-bytes B` sets the
//! properties budget (`properties_memory_bytes`; 0: every message's properties are read from
//! the log by that walk).
//!
//! With `--drop-caches` (as root) the page cache is dropped before the reopen and again before
//! the drain (recovery reads the whole log, which would leave it cached), so both read the log
//! from the disk; and the disk's own sequential read bandwidth is measured in the same sitting,
//! before the reopen and again right before the drain, by reading the log's files cold with
//! `dd` (4 MiB blocks); the drain is compared with the faster of the two.
//!
//! Not a test; run it with
//!
//! ```sh
//! cargo bench -p ferry-store --bench backlog -- --messages 1000000 --size 1024 \
//!   [--dir DIR] [--drop-caches] [--properties] [--properties-bytes B] [--json FILE]
//!   [--store DIR] [--no-drain] [--consumers N] [--kill-9]
//! ```
//!
//! The store lives in a new directory under `DIR` (default: the system's temp dir), removed at
//! the end. With `--store DIR` it lives in `DIR` itself and is kept; a store already there is
//! reused without filling it again (it must hold `--messages` messages), so that recovery can
//! be measured (and profiled) again and again with `--no-drain`, which skips the drain. The
//! store runs in this process, without a broker around it.
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

/// Reads the log's files (in `segments`, `log_bytes` in all) from a cold page cache with `dd`,
/// 4 MiB at a time; returns the bandwidth in MB/s.
fn dd_cold(segments: &std::path::Path, log_bytes: u64) -> Option<f64> {
    drop_caches();
    let started = Instant::now();
    let ok = std::process::Command::new("sh")
        .args([
            "-c",
            "for f in \"$0\"/*.log; do dd if=\"$f\" of=/dev/null bs=4M status=none; done",
        ])
        .arg(segments)
        .status()
        .is_ok_and(|s| s.success());
    let secs = started.elapsed().as_secs_f64();
    let bandwidth = mb(log_bytes) / secs;
    eprintln!("dd read the log cold at {bandwidth:.0} MB/s");
    ok.then_some(bandwidth)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Fills the store in `dir` in a child process (this benchmark with `--fill-only`), which is
/// killed with `kill -9` once the backlog is full; returns the fill's time, the child's
/// resident size at full backlog, and its index and cache figures.
fn fill_in_a_child(dir: &std::path::Path) -> (f64, u64, u64, u64) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(&args)
        .arg("--store")
        .arg(dir)
        .arg("--fill-only")
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9),
        "the filling child was to die of kill -9"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    (
        f[0].parse().unwrap(),
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
    )
}

fn main() {
    let messages: usize = arg("--messages").map_or(1_000_000, |v| v.parse().unwrap());
    let size: usize = arg("--size").map_or(1024, |v| v.parse().unwrap());
    let consumer_count: usize = arg("--consumers").map_or(1, |v| v.parse().unwrap());
    let base = arg("--dir").map_or_else(std::env::temp_dir, Into::into);
    let temp;
    let kept = arg("--store").map(std::path::PathBuf::from);
    let dir: &std::path::Path = match &kept {
        Some(path) => path,
        None => {
            temp = tempfile::tempdir_in(base).unwrap();
            temp.path()
        }
    };
    let reused = dir.join("segments").is_dir();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let body = Bytes::from(vec![0x5a; size]);
    let with_properties = flag("--properties");
    let budget: Option<u64> = arg("--properties-bytes").map(|v| v.parse().unwrap());
    let config = || {
        let mut cfg = EmbeddedConfig::new(dir);
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
        properties: properties(i).into(),
        body: body.clone(),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    };
    let rss_start = rss();
    let kill_9 = flag("--kill-9");
    let (fill_secs, rss_full, index, cache) = rt.block_on(async {
        if kill_9 && !reused && !flag("--fill-only") {
            return fill_in_a_child(dir);
        }
        if reused {
            // Filled by an earlier run: only its recovery is measured.
            return (0.0, rss(), 0, 0);
        }
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
    if flag("--fill-only") {
        // The child of `--kill-9`: says what the fill took, then dies at full backlog.
        println!("{fill_secs} {rss_full} {index} {cache}");
        use std::io::Write;
        std::io::stdout().flush().unwrap();
        let me = std::process::id().to_string();
        std::process::Command::new("kill")
            .args(["-9", &me])
            .status()
            .unwrap();
        unreachable!("still alive after kill -9");
    }
    let log_bytes: u64 = std::fs::read_dir(dir.join("segments"))
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
    let segments = dir.join("segments");
    // The disk's own bandwidth, before recovery and again right before the drain.
    let mut dd_mb_s = Vec::new();
    if cold {
        dd_mb_s.extend(dd_cold(&segments, log_bytes));
        drop_caches();
    }
    let (recovery_secs, rss_recovered, select_secs, drain_secs) = rt.block_on(async {
        let started = Instant::now();
        let store = EmbeddedStore::open(config()).await.unwrap();
        let recovery = started.elapsed().as_secs_f64();
        let rss_recovered = rss();
        if cold {
            // Recovery read the whole log: the drain must read it from the disk again.
            dd_mb_s.extend(dd_cold(&segments, log_bytes));
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
            max_bytes: None,
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
        let drained = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut consumers = Vec::new();
        for _ in 0..if flag("--no-drain") {
            0
        } else {
            consumer_count
        } {
            let (store, spec, drained) = (store.clone(), spec.clone(), drained.clone());
            consumers.push(tokio::spawn(async move {
                use std::sync::atomic::Ordering;
                while drained.load(Ordering::Relaxed) < messages {
                    let d = store.queues().receive(&spec, 1000).await.unwrap();
                    if d.is_empty() {
                        break;
                    }
                    assert!(d.iter().all(|d| d.message.body.len() == size));
                    drained.fetch_add(d.len(), Ordering::Relaxed);
                }
            }));
        }
        for consumer in consumers {
            consumer.await.unwrap();
        }
        let n = drained.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            flag("--no-drain") || n == messages,
            "the backlog ended early at {n}"
        );
        (
            recovery,
            rss_recovered,
            select,
            started.elapsed().as_secs_f64(),
        )
    });
    eprintln!(
        "recovered in {recovery_secs:.2} s (RSS {:.0} MB)",
        mb(rss_recovered)
    );
    // No drain figures without a drain.
    let drained = !flag("--no-drain");
    let drain_secs = Some(drain_secs).filter(|_| drained);
    let drain_rate = drain_secs.map(|s| messages as f64 / s);
    let drain_mb_s = drain_secs.map(|s| mb(log_bytes) / s);
    if let (Some(secs), Some(rate), Some(bw)) = (drain_secs, drain_rate, drain_mb_s) {
        eprintln!("drained in {secs:.1} s: {rate:.0} messages/s, {bw:.0} MB/s of log");
    }
    // The command as it is typed (the binary's own path and the directories say nothing useful).
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    for option in ["--dir", "--store"] {
        if let Some(i) = args.iter().position(|a| a == option) {
            if let Some(v) = args.get_mut(i + 1) {
                *v = "DIR".into();
            }
        }
    }
    // A store filled by an earlier run: its fill was not measured here.
    let filled = !reused;
    let json = serde_json::json!({
        "command": format!("cargo bench -p ferry-store --bench backlog -- {}", args.join(" ")),
        "messages": messages,
        "size": size,
        "fill_seconds": filled.then_some(fill_secs),
        "rss_start_bytes": rss_start,
        "rss_full_bytes": filled.then_some(rss_full),
        "index_bytes": filled.then_some(index),
        "cache_bytes": filled.then_some(cache),
        "log_bytes": log_bytes,
        "dropped_page_cache": flag("--drop-caches"),
        "recovered_after_kill_9": kill_9,
        "recovery_seconds": recovery_secs,
        "rss_after_recovery_bytes": rss_recovered,
        "properties": with_properties,
        "properties_bytes": budget,
        "select_nothing_seconds": select_secs,
        "drain_consumers": consumer_count,
        "drain_seconds": drain_secs,
        "drain_messages_per_second": drain_rate,
        "drain_log_mb_per_second": drain_mb_s,
        "dd_cold_read_mb_per_second": dd_mb_s,
        // How busy the machine was (1, 5 and 15 minutes), at the end.
        "load_average": std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        // Against the faster of the two `dd` reads of the sitting.
        "drain_over_dd": dd_mb_s
            .iter()
            .copied()
            .reduce(f64::max)
            .zip(drain_mb_s)
            .map(|(dd, drain)| drain / dd),
    });
    println!("{json:#}");
    if let Some(file) = arg("--json") {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(file);
        std::fs::write(path, format!("{json:#}\n")).unwrap();
    }
}
