//! `ferry bench throughput` runs briefly and reports its figures.

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
            "--window",
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
    assert!(report["sent"].as_u64().unwrap() > 0, "{report}");
    assert!(report["received"].as_u64().unwrap() > 0, "{report}");
    assert!(report["sent_per_sec"].as_f64().unwrap() > 0.0, "{report}");
    assert!(
        report["send_to_ack_us"]["p50"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(
        report["end_to_end_us"]["count"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert_eq!(report["send_errors"], 0);
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
            "--window",
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
    assert_eq!(report["sent"], 500, "{report}");
    assert_eq!(report["received"], 500, "{report}");
    assert_eq!(report["config"]["mode"], "messages");
    server.shutdown().await;
}
