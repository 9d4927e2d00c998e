//! Each workload runs for about two seconds against a real broker and writes a JSON report
//! that validates against the schema and a CSV of its windows.

use clap::Parser;
use ferry_bench::{LatencyArgs, ThroughputArgs};
use ferry_testkit::TestServer;
use serde_json::Value;

use crate::schema;

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
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out.json")).unwrap())
            .unwrap();
    let errors = schema::validate(&schema::load(), &json);
    assert!(errors.is_empty(), "{errors:#?}\n{json:#}");
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
    ferry_bench::workloads::throughput::run(parsed.args)
        .await
        .unwrap();
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
    ferry_bench::workloads::latency::run(parsed.args)
        .await
        .unwrap();
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
    let e = ferry_bench::workloads::throughput::run(parsed.args)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot connect to PostgreSQL at"), "{e}");
    assert!(e.contains("scripts/peers up"), "{e}");
    server.shutdown().await;
}
