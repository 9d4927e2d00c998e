//! Opt-in tests of the peer drivers (`nats`, `amqp`, `postgres`) against the brokers
//! `scripts/peers up` starts: with `FERRY_PEERS=1`, a throughput and a latency run of about two
//! seconds against each peer, whose JSON report must validate against the schema and show
//! messages going both ways. Without `FERRY_PEERS=1` each test prints a note and returns.
//!
//! `scripts/test` runs them when `scripts/peers status` finds every peer up; it never starts
//! peers itself. Peer URLs come from the drivers' defaults (the ports `scripts/peers` uses) or
//! `FERRY_NATS_URL`, `FERRY_AMQP_URL`, `FERRY_POSTGRES_URL`.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

#[path = "bench/run.rs"]
mod run;
#[path = "bench/schema.rs"]
mod schema;

use clap::Parser;
use ferry_bench::{LatencyArgs, ThroughputArgs};
use serde_json::Value;

#[derive(Parser)]
struct Throughput {
    #[command(flatten)]
    args: ThroughputArgs,
}

#[derive(Parser)]
struct Latency {
    #[command(flatten)]
    args: LatencyArgs,
}

/// Whether the peers were asked for; prints why the test does nothing otherwise.
fn enabled(test: &str) -> bool {
    let on = std::env::var("FERRY_PEERS").is_ok_and(|v| v == "1");
    if !on {
        println!("{test}: skipped; set FERRY_PEERS=1 with `scripts/peers up` running to run it");
    }
    on
}

fn argv(target: &str, dir: &tempfile::TempDir, rest: &[&str]) -> Vec<String> {
    let mut v = vec!["bench".to_string()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v.extend(
        [
            "--target",
            target,
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--window",
            "500ms",
            "--json",
        ]
        .map(String::from),
    );
    v.push(dir.path().join("out.json").display().to_string());
    v
}

/// The JSON written, after checking it against the schema and the figures every run has.
fn checked(dir: &tempfile::TempDir, workload: &str, target: &str) -> Value {
    let json = run::report(&dir.path().join("out.json"));
    assert_eq!(json["workload"], workload);
    let r = &json["results"][0];
    assert_eq!(r["target"], target, "{r:#}");
    assert!(!r["durability"].as_str().unwrap().is_empty(), "{r:#}");
    assert!(r["sent"].as_u64().unwrap() > 0, "{r:#}");
    assert!(r["received"].as_u64().unwrap() > 0, "{r:#}");
    assert!(r["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{r:#}");
    assert_eq!(r["errors"]["send"], 0, "{r:#}");
    assert_eq!(r["errors"]["ack"], 0, "{r:#}");
    assert!(
        r["windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["phase"] == "measure"),
        "{r:#}"
    );
    json
}

async fn throughput(target: &str) {
    let dir = tempfile::tempdir().unwrap();
    let args = argv(
        target,
        &dir,
        &[
            "--size",
            "128",
            "--in-flight",
            "16",
            "--max-backlog",
            "5000",
        ],
    );
    let parsed = Throughput::try_parse_from(args).unwrap();
    ferry_bench::workloads::run(parsed.args).await.unwrap();
    checked(&dir, "throughput", target);
}

async fn latency(target: &str) {
    let dir = tempfile::tempdir().unwrap();
    let args = argv(target, &dir, &["--rate", "200", "--size", "128"]);
    let parsed = Latency::try_parse_from(args).unwrap();
    ferry_bench::workloads::run(parsed.args).await.unwrap();
    let json = checked(&dir, "latency", target);
    let r = &json["results"][0];
    assert_eq!(r["latency_kind"], "end_to_end_corrected");
    // Senders and consumers count the same messages (those due in the measurement).
    assert_eq!(r["received"], r["sent"], "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_throughput_and_latency() {
    if enabled("nats") {
        throughput("nats").await;
        latency("nats").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_throughput_and_latency() {
    if enabled("amqp") {
        throughput("amqp").await;
        latency("amqp").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_throughput_and_latency() {
    if enabled("postgres") {
        throughput("postgres").await;
        latency("postgres").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_over_rabbitmq_and_core_nats() {
    if !enabled("stream_over_rabbitmq_and_core_nats") {
        return;
    }
    let json = run::stream(&[
        "--transports",
        "amqp,amqp-persistent,nats",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--rate",
        "5000",
    ])
    .await;
    for r in json["results"].as_array().unwrap() {
        assert!(
            r["stream"]["records_per_s"].as_f64().unwrap() > 1000.0,
            "{r:#}"
        );
        if r["target"] != "nats" {
            assert_eq!(r["stream"]["loss"], 0.0, "{r:#}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specjms_on_jetstream_with_the_queue_layout_without_transactions() {
    if !enabled("specjms_on_jetstream_with_the_queue_layout_without_transactions") {
        return;
    }
    let json = run::specjms(&[
        "--target",
        "nats",
        "--transactions",
        "false",
        "--base",
        "2",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--pool",
        "2",
    ])
    .await;
    let t = &json["params"]["specjms"]["trials"][0];
    assert_eq!(t["receipts"], t["receipts_owed"], "{t:#}");
}
