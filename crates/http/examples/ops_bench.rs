//! Benchmarks of the HTTP listener (benchmarks, not timed tests: docs/benchmarks.md shows the
//! figures, docs/benchmarks/results/ holds the JSON):
//!
//! - `scrape`: one `/metrics` scrape on a broker with 10,000 queues and 1,000 connections;
//! - `overhead`: 1-producer/1-consumer throughput (`ferry-bench throughput`) with and without
//!   a scrape every second, in alternating rounds, medians;
//! - `browse`: a page of 100 messages deep in a 1,000,000-message queue, both orders.
//!
//! Each starts its own broker from `FERRY_BIN` (build it with `cargo build --release -p ferry
//! -p ferry-bench` and point `FERRY_BIN` at `target/release/ferry`; `overhead` runs the
//! `ferry-bench` beside it):
//!
//! ```sh
//! FERRY_BIN=$PWD/target/release/ferry cargo run -p ferry-http --example ops_bench -- \
//!     scrape --json docs/benchmarks/results/ops-scrape.json
//! ```
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_client::Client;
use ferry_protocol::OutgoingMessage;
use ferry_testkit::{ferry_bin, BinaryServer};
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn usage() -> ! {
    eprintln!(
        "usage: ops_bench scrape [--queues N] [--connections N] [--scrapes N] [--json FILE]\n       \
         ops_bench overhead [--rounds N] [--duration SECS] [--queues N] [--json FILE]\n       \
         ops_bench browse [--messages N] [--samples N] [--json FILE]"
    );
    std::process::exit(2)
}

/// `--name value` options.
struct Args(Vec<String>);

impl Args {
    fn get(&self, name: &str, default: u64) -> u64 {
        self.0
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.0.get(i + 1))
            .map(|v| v.parse().unwrap_or_else(|_| usage()))
            .unwrap_or(default)
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        let i = self.0.iter().position(|a| a == name)?;
        self.0.get(i + 1).map(PathBuf::from)
    }
}

/// Sorted copy's value at quantile `q`.
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

fn summary(ms: &[f64]) -> Value {
    json!({
        "samples": ms.len(),
        "min": quantile(ms, 0.0),
        "median": quantile(ms, 0.5),
        "p90": quantile(ms, 0.9),
        "p99": quantile(ms, 0.99),
        "max": quantile(ms, 1.0),
    })
}

/// Where and what the run was, for the results file.
fn environment(command: &str) -> Value {
    let out = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    json!({
        "command": command,
        "git_commit": out("git", &["rev-parse", "--short", "HEAD"]),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": out("uname", &["-r"]),
        "date": out("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        "broker": ferry_bin().display().to_string(),
    })
}

fn write(args: &Args, mut result: Value) -> Result<(), Error> {
    // Results files not written by ferry-bench name their command at the top.
    let command = format!(
        "FERRY_BIN={} cargo run -p ferry-http --example ops_bench -- {}",
        ferry_bin().display(),
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    if let Some(m) = result.as_object_mut() {
        m.insert("command".into(), Value::String(command));
    }
    let text = serde_json::to_string_pretty(&result)?;
    println!("{text}");
    if let Some(path) = args.path("--json") {
        std::fs::write(path, text + "\n")?;
    }
    Ok(())
}

async fn create_queues(c: &Client, n: u64, prefix: &str) -> Result<(), Error> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i:05}")).collect();
    for chunk in names.chunks(500) {
        let done = futures::future::join_all(chunk.iter().map(|q| c.create_queue(q))).await;
        for r in done {
            r?;
        }
    }
    // A message on every tenth queue, so the gauges are not all zero.
    let msgs: Vec<OutgoingMessage> = names
        .iter()
        .step_by(10)
        .map(|q| OutgoingMessage::new(q.as_str(), "x"))
        .collect();
    for chunk in msgs.chunks(1000) {
        for r in c.send_batch(chunk.to_vec()).await? {
            r?;
        }
    }
    Ok(())
}

async fn scrape_once(http: &reqwest::Client, url: &str) -> Result<(f64, usize), Error> {
    let t = Instant::now();
    let body = http
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    Ok((t.elapsed().as_secs_f64() * 1000.0, body.len()))
}

async fn scrape(args: &Args) -> Result<(), Error> {
    let (queues, connections, scrapes) = (
        args.get("--queues", 10_000),
        args.get("--connections", 1_000),
        args.get("--scrapes", 40),
    );
    let server = BinaryServer::start(&["--max-connections", "4096"])?;
    let addr = server.addr().to_string();
    let url = format!("http://{}/metrics", server.http_addr().ok_or("HTTP off")?);
    let setup = Client::connect(&addr, "setup").await?;
    create_queues(&setup, queues, "q-").await?;
    let mut clients = Vec::new();
    for chunk in (0..connections).collect::<Vec<_>>().chunks(100) {
        let names: Vec<String> = chunk.iter().map(|i| format!("c-{i}")).collect();
        let made = futures::future::join_all(names.iter().map(|n| Client::connect(&addr, n))).await;
        for c in made {
            clients.push(c?);
        }
    }
    let http = reqwest::Client::new();
    for _ in 0..3 {
        scrape_once(&http, &url).await?;
    }
    let mut ms = Vec::new();
    let mut bytes = 0;
    for _ in 0..scrapes {
        let (t, n) = scrape_once(&http, &url).await?;
        ms.push(t);
        bytes = n;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let result = json!({
        "benchmark": "metrics-scrape",
        "queues": queues,
        "connections": connections + 1,
        "exposition_bytes": bytes,
        "scrape_ms": summary(&ms),
        "target_ms": 50,
        "environment": environment(&format!(
            "ops_bench scrape --queues {queues} --connections {connections} --scrapes {scrapes}"
        )),
    });
    drop(clients);
    write(args, result)
}

/// One `ferry-bench throughput` round against `server` (the harness binary beside
/// `FERRY_BIN`): received messages per second.
fn throughput_round(server: &str, secs: u64) -> Result<f64, Error> {
    let out = tempfile::NamedTempFile::new()?;
    let harness =
        ferry_bin().with_file_name(format!("ferry-bench{}", std::env::consts::EXE_SUFFIX));
    let status = Command::new(harness)
        .args([
            "throughput",
            "--server",
            server,
            "--size",
            "128",
            "--in-flight",
            "64",
            "--max-backlog",
            "20000",
            "--prefetch",
            "4000",
            "--warmup",
            "2s",
            "--duration",
            &format!("{secs}s"),
            "--quiet",
            "--json",
        ])
        .arg(out.path())
        .status()?;
    if !status.success() {
        return Err("ferry-bench throughput failed".into());
    }
    let v: Value = serde_json::from_slice(&std::fs::read(out.path())?)?;
    find_number(&v, "received_per_s").ok_or_else(|| "no received_per_s in the result".into())
}

/// CPU time process `pid` has used so far, in seconds (user and system, from /proc).
fn cpu_secs(pid: u32) -> f64 {
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // After the command: the state, then numbers from ppid on; utime and stime are
            // fields 14 and 15 of the line, the 12th and 13th after the command.
            let fields: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0);
    let hz: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0);
    ticks as f64 / hz
}

/// The first number under key `key`, anywhere in `v`.
fn find_number(v: &Value, key: &str) -> Option<f64> {
    match v {
        Value::Object(m) => m
            .get(key)
            .and_then(Value::as_f64)
            .or_else(|| m.values().find_map(|x| find_number(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_number(x, key)),
        _ => None,
    }
}

async fn overhead(args: &Args) -> Result<(), Error> {
    let (rounds, secs, queues) = (
        args.get("--rounds", 8),
        args.get("--duration", 10),
        args.get("--queues", 10_000),
    );
    let server = BinaryServer::start(&[])?;
    let addr = server.addr().to_string();
    let url = format!("http://{}/metrics", server.http_addr().ok_or("HTTP off")?);
    let setup = Client::connect(&addr, "setup").await?;
    create_queues(&setup, queues, "idle-").await?;
    drop(setup);
    let pid = server.pid().ok_or("no broker process")?;
    // The broker's CPU per scrape, on its own (robust to the machine's noise, unlike the
    // rates): set against the CPU the broker uses per second under the load, it bounds what a
    // scrape a second can cost a CPU-bound broker.
    let http = reqwest::Client::new();
    let before = cpu_secs(pid);
    let n_scrapes = 50;
    for _ in 0..n_scrapes {
        scrape_once(&http, &url).await?;
    }
    let scrape_cpu_ms = (cpu_secs(pid) - before) * 1000.0 / f64::from(n_scrapes);
    let mut broker_cores = Vec::new();
    let (mut plain, mut scraped, mut scrape_ms) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // A B B A A B ...: each pair in both orders.
        let with_scrapes = (round % 4 == 1) || (round % 4 == 2);
        let stop = tokio_util::sync::CancellationToken::new();
        let scraper = with_scrapes.then(|| {
            let (url, stop) = (url.clone(), stop.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                let mut ms = Vec::new();
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            if let Ok((t, _)) = scrape_once(&http, &url).await {
                                ms.push(t);
                            }
                        }
                        _ = stop.cancelled() => return ms,
                    }
                }
            })
        });
        let a = addr.clone();
        let (cpu0, wall0) = (cpu_secs(pid), Instant::now());
        let rate = tokio::task::spawn_blocking(move || throughput_round(&a, secs)).await??;
        let cores = (cpu_secs(pid) - cpu0) / wall0.elapsed().as_secs_f64();
        stop.cancel();
        if let Some(s) = scraper {
            scrape_ms.extend(s.await?);
            scraped.push(rate);
        } else {
            plain.push(rate);
            broker_cores.push(cores);
        }
        eprintln!(
            "round {round}: {} {rate:.0} received/s",
            if with_scrapes { "scraped" } else { "plain  " }
        );
    }
    // The first round warms a fresh broker up (its log grows its first segments): left out.
    let plain_counted = plain.get(1..).unwrap_or_default();
    let (p, s) = (quantile(plain_counted, 0.5), quantile(&scraped, 0.5));
    let cores = quantile(&broker_cores, 0.5);
    let result = json!({
        "benchmark": "metrics-scrape-overhead",
        "queues": queues,
        "round_secs": secs,
        "plain_received_per_s": plain,
        "scraped_received_per_s": scraped,
        "plain_median": p,
        "scraped_median": s,
        "cost_percent": (1.0 - s / p) * 100.0,
        "scrape_cpu_ms_idle": scrape_cpu_ms,
        "broker_cpu_cores_under_load": cores,
        "cpu_share_of_one_scrape_a_second_percent": scrape_cpu_ms / 1000.0 / cores * 100.0,
        "note": "the first round (plain) warms the broker up and is left out of plain_median",
        "scrape_ms_under_load": summary(&scrape_ms),
        "target_cost_percent": 3,
        "environment": environment(&format!(
            "ops_bench overhead --rounds {rounds} --duration {secs} --queues {queues}"
        )),
    });
    write(args, result)
}

/// The `next` cursor of a browse page, found at the end of the text without parsing the
/// messages (the keys are sorted, `next` comes last).
fn next_cursor(page: &str) -> Option<String> {
    let at = page.rfind("\"next\":")?;
    let rest = page.get(at + 7..)?.trim_start();
    let rest = rest.strip_prefix('"')?;
    Some(rest.split('"').next()?.to_owned())
}

async fn browse(args: &Args) -> Result<(), Error> {
    let (messages, samples) = (args.get("--messages", 1_000_000), args.get("--samples", 60));
    let server = BinaryServer::start(&[])?;
    let addr = server.addr().to_string();
    let base = format!("http://{}", server.http_addr().ok_or("HTTP off")?);
    // Fill bench-0 with the release harness: batches of 1000, priorities 1 to 10.
    let filled = Instant::now();
    let c = Client::connect(&addr, "filler").await?;
    c.create_queue("deep").await?;
    let mut sent = 0u64;
    while sent < messages {
        let batch: Vec<OutgoingMessage> = (0..1000.min(messages - sent))
            .map(|i| {
                let mut m = OutgoingMessage::new("deep", format!("message {}", sent + i));
                m.priority = 1 + ((sent + i) % 10) as u8;
                m
            })
            .collect();
        let n = batch.len() as u64;
        let sends: Vec<_> = batch
            .chunks(250)
            .map(|b| c.send_batch(b.to_vec()))
            .collect();
        for r in futures::future::join_all(sends).await {
            for id in r? {
                id?;
            }
        }
        sent += n;
    }
    let fill_secs = filled.elapsed().as_secs_f64();
    let http = reqwest::Client::new();
    let mut out = serde_json::Map::new();
    for order in ["priority", "time"] {
        // Walk the backlog in pages of 1000, keeping a cursor every 10,000 messages.
        let mut cursors: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut walked = 0u64;
        let walk = Instant::now();
        loop {
            let mut url = format!("{base}/api/queues/deep/messages?order={order}&limit=1000");
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let page = http
                .get(&url)
                .send()
                .await?
                .error_for_status()?
                .text()
                .await?;
            walked += 1000;
            match next_cursor(&page) {
                Some(n) => {
                    if walked.is_multiple_of(10_000) {
                        cursors.push(n.clone());
                    }
                    cursor = Some(n);
                }
                None => break,
            }
        }
        let walk_secs = walk.elapsed().as_secs_f64();
        // Pages of 100 from cursors spread over the whole depth.
        let step = (cursors.len() / samples as usize).max(1);
        let mut ms = Vec::new();
        for c in cursors.iter().step_by(step) {
            let url = format!("{base}/api/queues/deep/messages?order={order}&limit=100&cursor={c}");
            let t = Instant::now();
            let page = http
                .get(&url)
                .send()
                .await?
                .error_for_status()?
                .text()
                .await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if !page.contains("\"id\"") {
                return Err("an empty page deep in the queue".into());
            }
        }
        out.insert(
            order.to_owned(),
            json!({"page_of_100_ms": summary(&ms), "walk_of_all_pages_of_1000_secs": walk_secs}),
        );
    }
    let result = json!({
        "benchmark": "browse-deep",
        "messages": messages,
        "fill_secs": fill_secs,
        "orders": out,
        "target_ms": 20,
        "environment": environment(&format!("ops_bench browse --messages {messages} --samples {samples}")),
    });
    write(args, result)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        usage();
    }
    let which = argv.remove(0);
    let args = Args(argv);
    match which.as_str() {
        "scrape" => scrape(&args).await,
        "overhead" => overhead(&args).await,
        "browse" => browse(&args).await,
        _ => usage(),
    }
}
