//! Each workload runs for about two seconds against a real broker and writes a JSON report
//! that validates against the schema and a CSV of its windows.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use clap::Parser;
use ferry_bench::{FanoutArgs, LatencyArgs, SelectorArgs, ThroughputArgs};
use ferry_testkit::TestServer;
use serde_json::Value;

#[derive(Parser)]
struct Throughput {
    #[command(flatten)]
    args: ThroughputArgs,
}

#[derive(Parser)]
struct Fanout {
    #[command(flatten)]
    args: FanoutArgs,
}

#[derive(Parser)]
struct Selector {
    #[command(flatten)]
    args: SelectorArgs,
}

#[derive(Parser)]
struct Latency {
    #[command(flatten)]
    args: LatencyArgs,
}

fn argv<'a>(server: &'a TestServer, dir: &'a tempfile::TempDir, rest: &[&'a str]) -> Vec<String> {
    let mut v = vec!["bench".to_string()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v.extend([
        "--server".to_string(),
        server.addr_string(),
        "--json".to_string(),
        dir.path().join("out.json").display().to_string(),
        "--csv".to_string(),
        dir.path().join("out.csv").display().to_string(),
    ]);
    v
}

/// The JSON and CSV written, after checking the JSON against the schema and the figures
/// every run must have.
fn outputs(dir: &tempfile::TempDir, workload: &str) -> (Value, String) {
    let json = crate::run::report(&dir.path().join("out.json"));
    assert_eq!(json["workload"], workload);
    let r = &json["results"][0];
    assert_eq!(r["target"], "ferry");
    assert!(r["sent"].as_u64().unwrap() > 0, "{r:#}");
    assert!(r["received"].as_u64().unwrap() > 0, "{r:#}");
    assert!(r["sent_per_s"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(r["received_per_s"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(r["latency_ms"]["count"].as_u64().unwrap() > 0, "{r:#}");
    assert!(r["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(r["latency_ms"]["max"].as_f64().unwrap() >= r["latency_ms"]["p99"].as_f64().unwrap());
    assert_eq!(r["errors"]["send"], 0, "{r:#}");
    assert_eq!(r["errors"]["ack"], 0, "{r:#}");
    let windows = r["windows"].as_array().unwrap();
    let measured = windows.iter().filter(|w| w["phase"] == "measure").count();
    assert!(measured >= 2, "{windows:#?}");
    assert!(
        windows.iter().any(|w| w["phase"] == "warmup"),
        "{windows:#?}"
    );
    assert_eq!(r["window_stats"]["sent_per_s"]["n"], measured);
    assert!(r["window_stats"]["sent_per_s"]["mean"].as_f64().unwrap() > 0.0);
    assert!(
        r["window_stats"]["received_per_s"]["ci95"].is_array(),
        "{r:#}"
    );
    let csv = std::fs::read_to_string(dir.path().join("out.csv")).unwrap();
    assert_eq!(csv.lines().count(), windows.len() + 1, "{csv}");
    assert!(csv.starts_with("target,index,phase,"), "{csv}");
    (json, csv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_runs_and_reports() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let args = argv(
        &server,
        &dir,
        &[
            "--producers",
            "2",
            "--consumers",
            "1",
            "--queues",
            "2",
            "--size",
            "64",
            "--in-flight",
            "8",
            "--batch",
            "4",
            "--max-backlog",
            "5000",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--cooldown",
            "200ms",
            "--window",
            "500ms",
        ],
    );
    let parsed = Throughput::try_parse_from(args).unwrap();
    ferry_bench::workloads::run(parsed.args).await.unwrap();
    let (json, _) = outputs(&dir, "throughput");
    let r = &json["results"][0];
    assert_eq!(r["latency_kind"], "end_to_end");
    assert!(r["latencies_ms"]["send_to_ack"]["count"].as_u64().unwrap() > 0);
    assert_eq!(json["params"]["in_flight"], 8);
    assert_eq!(json["params"]["cooldown_s"], 0.2);
    assert_eq!(json["params"]["window_s"], 0.5);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_with_non_persistent_messages() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let args = argv(
        &server,
        &dir,
        &[
            "--persistent",
            "false",
            "--batch",
            "16",
            "--in-flight",
            "4",
            "--max-backlog",
            "5000",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--window",
            "500ms",
        ],
    );
    let parsed = Throughput::try_parse_from(args).unwrap();
    ferry_bench::workloads::run(parsed.args).await.unwrap();
    let (json, _) = outputs(&dir, "throughput");
    assert_eq!(json["params"]["persistent"], false);
    let durability = json["results"][0]["durability"].as_str().unwrap();
    assert!(durability.contains("memory"), "{durability}");
    server.shutdown().await;
}

/// The arguments of a short pub/sub run with the broker's CPU read from this process (the test
/// broker runs in it).
fn pubsub_argv<'a>(
    server: &'a TestServer,
    dir: &'a tempfile::TempDir,
    pid: &'a str,
    rest: &[&'a str],
) -> Vec<String> {
    let mut v = argv(server, dir, rest);
    v.extend(
        [
            "--size",
            "64",
            "--batch",
            "16",
            "--in-flight",
            "4",
            "--prefetch",
            "500",
            "--max-backlog",
            "20000",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--cooldown",
            "200ms",
            "--window",
            "500ms",
            "--broker-pid",
            pid,
        ]
        .map(String::from),
    );
    v
}

fn check_broker_cpu(r: &Value) {
    let cpu = &r["broker_cpu"];
    assert_eq!(cpu["pid"], std::process::id(), "{r:#}");
    assert!(cpu["us_per_sent"].as_f64().unwrap() >= 0.0, "{r:#}");
    assert!(cpu["cores"].as_f64().unwrap() >= 0.0, "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_runs_and_reports() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = std::process::id().to_string();
    for (extra, persistent) in [
        (&["--ack", "client"][..], true),
        (
            &["--persistent", "false", "--durable", "--ack", "auto"][..],
            false,
        ),
    ] {
        let mut rest = vec!["--subscribers", "3"];
        rest.extend_from_slice(extra);
        let parsed = Fanout::try_parse_from(pubsub_argv(&server, &dir, &pid, &rest)).unwrap();
        ferry_bench::workloads::run(parsed.args).await.unwrap();
        let (json, _) = outputs(&dir, "fanout");
        assert_eq!(json["params"]["subscriptions"], 3);
        assert_eq!(json["params"]["persistent"], persistent);
        assert_eq!(json["params"]["deliveries_per_message"], 3.0);
        let r = &json["results"][0];
        assert_eq!(r["latency_kind"], "end_to_end");
        assert!(r["latencies_ms"]["send_to_ack"]["count"].as_u64().unwrap() > 0);
        // Every published message reaches the three subscriptions: about three deliveries
        // each in the measurement (not exactly: its edges cut through batches in flight).
        let (sent, received) = (r["sent"].as_f64().unwrap(), r["received"].as_f64().unwrap());
        assert!(received > sent * 1.5 && received < sent * 4.5, "{r:#}");
        check_broker_cpu(r);
    }
    // Durable subscriptions are removed at the end, and the run's topic with them.
    let c = server.client("probe-fanout").await;
    let topics = c.list_topics().await.unwrap();
    assert!(
        topics.iter().all(|t| t.name != "bench-fanout"),
        "{topics:?}"
    );
    let _ = c.disconnect().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_runs_and_reports() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = std::process::id().to_string();
    for selectors in ["true", "false"] {
        let rest = [
            "--subscriptions",
            "8",
            "--selectors",
            selectors,
            "--regions",
            "4",
            "--min-amount",
            "10",
        ];
        let parsed = Selector::try_parse_from(pubsub_argv(&server, &dir, &pid, &rest)).unwrap();
        ferry_bench::workloads::run(parsed.args).await.unwrap();
        let (json, _) = outputs(&dir, "selector");
        let p = &json["params"];
        assert_eq!(p["subscriptions"], 8);
        let fraction = p["match_fraction"].as_f64().unwrap();
        if selectors == "true" {
            assert!((fraction - 0.89 / 4.0).abs() < 1e-9, "{p:#}");
        } else {
            assert_eq!(fraction, 1.0, "{p:#}");
        }
        let r = &json["results"][0];
        let (sent, received) = (r["sent"].as_f64().unwrap(), r["received"].as_f64().unwrap());
        let per = received / sent;
        let want = fraction * 8.0;
        assert!(
            per > want * 0.5 && per < want * 1.5,
            "{per} vs {want}: {r:#}"
        );
        check_broker_cpu(r);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_broker_needs_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start().await;
    let mut args = argv(&server, &dir, &["--duration", "1s"]);
    args.push("--own-broker".to_string());
    let parsed = Selector::try_parse_from(args).unwrap();
    let e = ferry_bench::workloads::run(parsed.args)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot start a broker"), "{e}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_runs_and_reports() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let args = argv(
        &server,
        &dir,
        &[
            "--rate",
            "500",
            "--producers",
            "2",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--cooldown",
            "200ms",
            "--window",
            "500ms",
        ],
    );
    let parsed = Latency::try_parse_from(args).unwrap();
    ferry_bench::workloads::run(parsed.args).await.unwrap();
    let (json, _) = outputs(&dir, "latency");
    let r = &json["results"][0];
    assert_eq!(r["latency_kind"], "end_to_end_corrected");
    for kind in [
        "send_to_ack",
        "send_to_ack_corrected",
        "end_to_end_corrected",
    ] {
        let l = &r["latencies_ms"][kind];
        assert!(l["count"].as_u64().unwrap() > 0, "{kind}: {r:#}");
        assert!(l["p9999"].as_f64().unwrap() > 0.0, "{kind}: {r:#}");
    }
    // Open loop: about rate x duration sends are due in the measurement, all counted.
    let sent = r["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent <= 1001, "{sent}");
    // Consumers count the same messages as the senders (by intended send time), not those that
    // happen to arrive while the measurement lasts: every counted send is received, no other.
    assert_eq!(r["received"].as_u64().unwrap(), sent, "{r:#}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_peer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start().await;
    let mut args = argv(&server, &dir, &["--duration", "1s"]);
    args.extend(
        [
            "--target",
            "postgres",
            "--postgres-url",
            "postgres://postgres@127.0.0.1:1/ferrybench",
        ]
        .map(String::from),
    );
    let parsed = Throughput::try_parse_from(args).unwrap();
    let e = ferry_bench::workloads::run(parsed.args)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot connect to PostgreSQL at"), "{e}");
    assert!(e.contains("scripts/peers up"), "{e}");
    server.shutdown().await;
}
