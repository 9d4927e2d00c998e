//! `ferry bench throughput` and `ferry bench latency` run briefly and report their figures.

use ferry_testkit::TestServer;

use crate::support::ferry;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_mode_prints_and_writes_figures() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let out = ferry(
        &server,
        &[
            "bench",
            "throughput",
            "--producers",
            "2",
            "--consumers",
            "2",
            "--queues",
            "2",
            "--size",
            "64",
            "--in-flight",
            "8",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--persistent",
            "true",
            "--json",
            json_path.to_str().unwrap(),
        ],
    )
    .run()
    .await;
    let text = out.ok();
    println!("{text}");
    for needle in [
        "sent:",
        "received:",
        "msg/s",
        "send-to-ack latency:",
        "end-to-end latency:",
        "p99.9",
    ] {
        assert!(text.contains(needle), "missing {needle}: {text}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["workload"], "throughput", "{report}");
    let r = &report["results"][0];
    assert_eq!(r["target"], "ferry", "{report}");
    assert!(r["sent"].as_u64().unwrap() > 0, "{report}");
    assert!(r["received"].as_u64().unwrap() > 0, "{report}");
    assert!(r["sent_per_s"].as_f64().unwrap() > 0.0, "{report}");
    assert!(
        r["latencies_ms"]["send_to_ack"]["p50"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(
        r["latencies_ms"]["end_to_end"]["count"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert_eq!(r["errors"]["send"], 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_count_mode_with_batches() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let out = ferry(
        &server,
        &[
            "bench",
            "throughput",
            "--messages",
            "500",
            "--batch",
            "10",
            "--in-flight",
            "4",
            "--json",
            json_path.to_str().unwrap(),
        ],
    )
    .run()
    .await;
    out.ok();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["results"][0]["sent"], 500, "{report}");
    assert_eq!(report["results"][0]["received"], 500, "{report}");
    assert_eq!(report["params"]["mode"], "messages");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_prints_corrected_percentiles() {
    let server = TestServer::start().await;
    let out = ferry(
        &server,
        &[
            "bench",
            "latency",
            "--rate",
            "200",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--window",
            "500ms",
        ],
    )
    .run()
    .await;
    let text = out.ok();
    println!("{text}");
    for needle in [
        "send-to-ack (CO-corr.):",
        "end-to-end (CO-corr.):",
        "p99.99",
    ] {
        assert!(text.contains(needle), "missing {needle}: {text}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_peer_is_named() {
    let server = TestServer::start().await;
    let out = ferry(
        &server,
        &[
            "bench",
            "throughput",
            "--target",
            "nats",
            "--nats-url",
            "nats://127.0.0.1:1",
            "--duration",
            "1s",
        ],
    )
    .run()
    .await;
    let err = out.failed();
    assert!(
        err.contains("cannot connect to NATS at nats://127.0.0.1:1"),
        "{err}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_with_a_broker_of_its_own_reports_its_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let out = crate::support::ferry_raw(&[
        "bench",
        "selector",
        "--own-broker",
        "--subscriptions",
        "4",
        "--size",
        "64",
        "--batch",
        "16",
        "--in-flight",
        "2",
        "--duration",
        "1s",
        "--warmup",
        "300ms",
        "--window",
        "500ms",
        "--json",
        json_path.to_str().unwrap(),
    ])
    .run()
    .await;
    let text = out.ok();
    println!("{text}");
    assert!(text.contains("broker CPU (pid "), "{text}");
    assert!(out.stderr.contains("child process"), "{out:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["workload"], "selector", "{report}");
    let r = &report["results"][0];
    assert!(r["sent"].as_u64().unwrap() > 0, "{report}");
    assert!(r["received"].as_u64().unwrap() > 0, "{report}");
    let cpu = &r["broker_cpu"];
    assert_ne!(cpu["pid"], std::process::id(), "{report}");
    assert!(cpu["cpu_s"].as_f64().unwrap() > 0.0, "{report}");
    assert!(cpu["us_per_received"].as_f64().unwrap() > 0.0, "{report}");
}
