//! The `ferry-bench` binary itself: each subcommand runs briefly as a subprocess against a
//! test broker (or a broker of its own) and prints and writes its figures; errors end in one
//! `ferry-bench: ...` line and exit status 1.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::process::Output;

use ferry_testkit::TestServer;
use serde_json::Value;

use crate::schema;

/// The binary under test, built by cargo for this package's integration tests.
fn ferry_bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ferry-bench"))
}

/// Runs `ferry-bench <args>` (at most 60 s) with the peers' and the broker's variables unset.
async fn ferry_bench(args: &[&str]) -> Output {
    ferry_bench_pid(args).await.1
}

/// The same, with the process id the run had.
async fn ferry_bench_pid(args: &[&str]) -> (u32, Output) {
    let mut cmd = tokio::process::Command::new(ferry_bench_bin());
    cmd.args(args)
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for var in [
        "FERRY_SERVER",
        "FERRY_NAME",
        "FERRY_WORKERS",
        "FERRY_FSYNC",
        "FERRY_BIN",
    ] {
        cmd.env_remove(var);
    }
    let child = cmd.spawn().expect("run ferry-bench");
    let pid = child.id().expect("a process id");
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("ferry-bench finished within 60 s")
        .expect("wait for ferry-bench");
    (pid, out)
}

/// Standard output of a run that must succeed.
fn ok(out: &Output) -> String {
    assert!(out.status.success(), "ferry-bench failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The JSON report at `path`, checked against the schema.
fn report(path: &Path) -> Value {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors = schema::validate(&schema::load(), &json);
    assert!(errors.is_empty(), "{errors:#?}\n{json:#}");
    json
}

/// One subcommand against the test broker: its arguments, what the terminal table must
/// show, and what the JSON report must hold (a JSON pointer and the value there, or `None`
/// for "a positive number").
struct Case {
    args: &'static [&'static str],
    printed: &'static [&'static str],
    json: Vec<(&'static str, Option<Value>)>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            args: &[
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
            ],
            printed: &[
                "sent:",
                "received:",
                "msg/s",
                "send-to-ack latency:",
                "end-to-end latency:",
                "p99.9",
            ],
            json: vec![
                ("/workload", Some(Value::from("throughput"))),
                ("/results/0/target", Some(Value::from("ferry"))),
                ("/results/0/sent", None),
                ("/results/0/received", None),
                ("/results/0/sent_per_s", None),
                ("/results/0/latencies_ms/send_to_ack/p50", None),
                ("/results/0/latencies_ms/end_to_end/count", None),
                ("/results/0/errors/send", Some(Value::from(0))),
                (
                    "/environment/ferry_version",
                    Some(Value::from(env!("CARGO_PKG_VERSION"))),
                ),
                ("/environment/fsync", Some(Value::from("always"))),
                ("/environment/host/cores", None),
                ("/environment/command/1", Some(Value::from("throughput"))),
            ],
        },
        Case {
            args: &[
                "throughput",
                "--messages",
                "500",
                "--batch",
                "10",
                "--in-flight",
                "4",
                "--broker-fsync",
                "interval:10",
            ],
            printed: &["sent:"],
            json: vec![
                ("/results/0/sent", Some(Value::from(500))),
                ("/results/0/received", Some(Value::from(500))),
                ("/params/mode", Some(Value::from("messages"))),
                // What the broker at --server runs with is what the command line says.
                ("/environment/fsync", Some(Value::from("interval:10"))),
            ],
        },
        Case {
            args: &[
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
            printed: &[
                "send-to-ack (CO-corr.):",
                "end-to-end (CO-corr.):",
                "p99.99",
            ],
            json: vec![("/workload", Some(Value::from("latency")))],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_subcommand_prints_and_writes_its_figures() {
    let server = TestServer::start().await;
    let addr = server.addr_string();
    for case in cases() {
        let dir = tempfile::tempdir().unwrap();
        let json_path = dir.path().join("report.json");
        let mut args = case.args.to_vec();
        args.extend(["--server", &addr, "--json", json_path.to_str().unwrap()]);
        let text = ok(&ferry_bench(&args).await);
        for needle in case.printed {
            assert!(
                text.contains(needle),
                "{:?}: missing {needle}: {text}",
                case.args
            );
        }
        let json = report(&json_path);
        for (pointer, want) in &case.json {
            let got = json.pointer(pointer).unwrap_or(&Value::Null);
            match want {
                Some(want) => assert_eq!(got, want, "{pointer} of {:?}: {json:#}", case.args),
                None => assert!(
                    got.as_f64().is_some_and(|v| v > 0.0),
                    "{pointer} of {:?} is not positive: {json:#}",
                    case.args
                ),
            }
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_peer_is_named() {
    let out = ferry_bench(&[
        "throughput",
        "--target",
        "nats",
        "--nats-url",
        "nats://127.0.0.1:1",
        "--duration",
        "1s",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("ferry-bench: cannot connect to NATS at nats://127.0.0.1:1"),
        "{err}"
    );
}

/// A run whose sends fail exits with status 1 and says how many failed (here every send is
/// over the broker's body limit, which the client checks before sending), also as a
/// comparison.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sends_make_the_run_fail_with_their_count() {
    let server = TestServer::start_with(|c| c.limits.max_body_bytes = 100).await;
    let addr = server.addr_string();
    for workload in [
        &["throughput"][..],
        &["compare", "--rounds", "1", "throughput"],
    ] {
        let args: Vec<&str> = workload
            .iter()
            .copied()
            .chain([
                "--server",
                &addr,
                "--quiet",
                "--producers",
                "1",
                "--consumers",
                "1",
                "--size",
                "200",
                "--duration",
                "500ms",
                "--warmup",
                "0s",
            ])
            .collect();
        let out = ferry_bench(&args).await;
        assert_eq!(out.status.code(), Some(1), "{workload:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or_default();
        let count: u64 = last
            .strip_prefix("ferry-bench: ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{workload:?}: no count in {err}"));
        assert!(count > 0, "{workload:?}: {err}");
        assert!(last.contains("sends"), "{workload:?}: {err}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_duration_needs_its_unit() {
    let out = ferry_bench(&["throughput", "--duration", "10"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'10' needs a unit, e.g. 10s or 10ms"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_with_a_broker_of_its_own_reports_its_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let ferry = ferry_testkit::ferry_bin();
    assert!(
        ferry.is_file(),
        "{} is missing: build it first (cargo build -p ferry)",
        ferry.display()
    );
    let out = ferry_bench(&[
        "selector",
        "--own-broker",
        "--ferry-bin",
        ferry.to_str().unwrap(),
        "--broker-fsync",
        "never",
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
    .await;
    let text = ok(&out);
    assert!(text.contains("broker CPU (pid "), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("child process"), "{stderr}");
    assert!(
        stderr.contains("fsync never"),
        "the broker runs with --broker-fsync: {stderr}"
    );
    let json = report(&json_path);
    assert_eq!(json["environment"]["fsync"], "never", "{json}");
    assert!(
        json["results"][0]["durability"]
            .as_str()
            .is_some_and(|d| d.starts_with("broker fsync never")),
        "{json}"
    );
    assert_eq!(json["workload"], "selector", "{json}");
    let r = &json["results"][0];
    assert!(r["sent"].as_u64().unwrap() > 0, "{json}");
    assert!(r["received"].as_u64().unwrap() > 0, "{json}");
    let cpu = &r["broker_cpu"];
    assert_ne!(cpu["pid"], std::process::id(), "{json}");
    assert!(cpu["cpu_s"].as_f64().unwrap() > 0.0, "{json}");
    assert!(cpu["us_per_received"].as_f64().unwrap() > 0.0, "{json}");
}

#[tokio::test]
async fn own_broker_names_a_missing_ferry_binary() {
    let (pid, out) = ferry_bench_pid(&[
        "fanout",
        "--own-broker",
        "--ferry-bin",
        "/nonexistent/ferry",
        "--duration",
        "1s",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start /nonexistent/ferry serve"),
        "{err}"
    );
    // The data directory made for the broker that never started is gone again.
    let leftovers: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("ferry-bench-broker-{pid}-")))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
