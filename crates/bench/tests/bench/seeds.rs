//! The workloads of the seed documents, each for a few seconds against a real broker, their
//! JSON checked against the schema: `stream` (Ferry, TCP and the datagram ingest; the peers'
//! transports run in tests/peers.rs).
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use clap::Parser;
use serde_json::Value;

use crate::run;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_runs_over_ferry_tcp_and_the_datagram_ingest() {
    let json = run::stream(&[
        "--transports",
        "ferry,ferry-persistent,tcp,udp",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--window",
        "500ms",
        "--rate",
        "20000",
        "--broker-fsync",
        "always",
    ])
    .await;
    assert_eq!(json["workload"], "stream");
    let results = json["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ferry", "ferry-persistent", "tcp", "udp"]);
    for r in results {
        let s = &r["stream"];
        let per_s = s["records_per_s"].as_f64().unwrap();
        // Paced at 20,000/s: well below every transport's ceiling, even in a debug build.
        assert!(per_s > 5_000.0, "{r:#}");
        assert!((s["records_per_min"].as_f64().unwrap() - 60.0 * per_s).abs() < 1.0);
        assert_eq!(s["record_bytes"], 150);
        assert_eq!(s["duplicates"], 0, "{r:#}");
        assert!(s["sent_total"].as_u64().unwrap() >= r["sent"].as_u64().unwrap());
        let loss = s["loss"].as_f64().unwrap();
        if r["target"] == "udp" {
            // Datagrams may be lost; at a tenth of the ingest's rate, hardly any are.
            assert!(loss < 0.5, "{r:#}");
            // Where the datagrams went: every one sent was read or dropped by the kernel.
            let i = &s["ingest"];
            let sent = i["datagrams_sent"].as_u64().unwrap();
            assert!(sent > 0, "{r:#}");
            let read = i["received"].as_u64().unwrap();
            let kernel = i["kernel_drops"].as_u64().unwrap();
            assert_eq!(read + kernel, sent, "{r:#}");
            assert_eq!(i["malformed"], 0, "{r:#}");
        } else {
            assert!(s.get("ingest").is_none(), "{r:#}");
            assert_eq!(loss, 0.0, "{r:#}");
            assert_eq!(s["sent_total"], s["received_total"], "{r:#}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_packs_records_into_messages_and_counts_each_record() {
    // 7 records a message: a batch of 256 ends in a message of 4.
    let json = run::stream(&[
        "--transports",
        "ferry,ferry-persistent",
        "--records-per-message",
        "7",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--rate",
        "20000",
    ])
    .await;
    assert_eq!(json["params"]["records_per_message"], 7);
    for r in json["results"].as_array().unwrap() {
        let s = &r["stream"];
        assert_eq!(s["records_per_message"], 7, "{r:#}");
        assert!(s["records_per_s"].as_f64().unwrap() > 5_000.0, "{r:#}");
        assert_eq!(s["loss"], 0.0, "{r:#}");
        assert_eq!(s["duplicates"], 0, "{r:#}");
        assert_eq!(s["sent_total"], s["received_total"], "{r:#}");
        assert_eq!(s["sent_total"].as_u64().unwrap() % 256, 0, "{r:#}");
    }
}

/// A short `specjms` run against `server`, with `rest` added.
fn specjms_flags<'a>(server: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--server",
        server,
        "--base",
        "2",
        "--duration",
        "3s",
        "--ramp",
        "1s",
        "--warmup",
        "1s",
        "--drain",
        "5s",
    ];
    flags.extend_from_slice(rest);
    flags
}

/// Checks what every specjms report has, and returns its last trial (of `runs`).
fn specjms_trial(json: &Value, runs: usize) -> Value {
    assert_eq!(json["workload"], "specjms");
    assert_eq!(
        json["params"]["name"],
        "specjms2007-like (not SPECjms2007 results)"
    );
    let trials = json["params"]["specjms"]["trials"].as_array().unwrap();
    assert_eq!(trials.len(), runs);
    let t = trials[runs - 1].clone();
    let rules: Vec<&str> = t["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "input rate",
            "message counts",
            "pacing",
            "delivery time",
            "drain"
        ]
    );
    assert_eq!(t["interactions"].as_array().unwrap().len(), 7);
    // Whatever the machine's load, every message reaches every subscriber.
    assert!(t["receipts_owed"].as_u64().unwrap() > 100, "{t:#}");
    assert_eq!(t["receipts"], t["receipts_owed"], "{t:#}");
    let drain = &t["rules"][4];
    assert_eq!(drain["passed"], true, "{drain:#}");
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specjms_runs_the_queue_layout_with_the_model_and_cleans_up() {
    let server = ferry_testkit::TestServer::start().await;
    let pid = std::process::id().to_string();
    let addr = server.addr_string();
    let json = run::specjms(&specjms_flags(
        &addr,
        &["--model", "--broker-pid", &pid, "--calibrate", "1"],
    ))
    .await;
    let t = specjms_trial(&json, 2);
    assert!(t["broker_cpu_utilization"].as_f64().unwrap() > 0.0, "{t:#}");
    // Each location that starts interactions (2 SM, 1 DC, 1 HQ) opened its start pool's two
    // connections before the run; and every late start is put down to a phase.
    assert!(t["start_connections"].as_u64().unwrap() >= 8, "{t:#}");
    for i in t["interactions"].as_array().unwrap() {
        let by_phase: u64 = ["timer", "dispatch", "connection"]
            .iter()
            .map(|p| i["pacing_misses_by_phase"][p].as_u64().unwrap())
            .sum();
        assert_eq!(by_phase, i["pacing_misses"].as_u64().unwrap(), "{i:#}");
        assert!(
            i["start_mean_ms_by_phase"]["timer"].as_f64().is_some(),
            "{i:#}"
        );
    }
    assert_eq!(
        json["params"]["specjms"]["trials"][0]["calibration_run"],
        true
    );
    // Prediction beside measurement, per resource and per interaction.
    let measured = t["measured_utilization"]["broker_cpu"].as_f64().unwrap();
    let predicted = t["predicted_utilization"]["broker_cpu"].as_f64().unwrap();
    assert!(measured > 0.0 && predicted > 0.0, "{t:#}");
    let i = &t["interactions"][0];
    assert!(
        i["predicted_delivery_mean_ms"].as_f64().unwrap() > 0.0,
        "{i:#}"
    );
    let model = &json["params"]["specjms"]["model"];
    assert_eq!(model["calibrated_on"], "the --calibrate runs", "{model:#}");
    assert_eq!(
        model["calibrated_on_bases"],
        serde_json::json!([1.0]),
        "{model:#}"
    );
    let cpu = &model["resources"][0];
    assert_eq!(cpu["resource"], "broker_cpu", "{model:#}");
    assert!(cpu["per_message_us"].as_f64().unwrap() > 0.0, "{model:#}");
    assert!(
        model["predicted_max_base"].as_f64().unwrap() > 0.0,
        "{model:#}"
    );
    assert!(
        model["fsyncs_per_commit"].as_f64().unwrap() > 0.0,
        "{model:#}"
    );
    // The run removed its queues and topics.
    let client = server.client("inspector").await;
    let queues = client.list_queues().await.unwrap();
    assert!(
        queues.iter().all(|q| !q.name.starts_with("bench-spec.")),
        "{queues:?}"
    );
    let topics = client.list_topics().await.unwrap();
    assert!(
        topics.iter().all(|t| !t.name.starts_with("bench-spec.")),
        "{topics:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specjms_runs_the_central_topic_with_selectors_and_in_selectors() {
    let server = ferry_testkit::TestServer::start().await;
    let addr = server.addr_string();
    let json = run::specjms(&specjms_flags(
        &addr,
        &[
            "--layout",
            "central",
            "--cfo",
            "in-selector",
            "--keep",
            "--pool",
            "2",
        ],
    ))
    .await;
    specjms_trial(&json, 1);
    assert_eq!(json["params"]["layout"], "central");
    // --keep leaves the central topic and its subscriptions.
    let client = server.client("inspector").await;
    let topics = client.list_topics().await.unwrap();
    assert!(
        topics.iter().any(|t| t.name == "bench-spec.central"),
        "{topics:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn specjms_refuses_what_a_peer_cannot_express_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    for (rest, why) in [
        (
            &["--target", "nats", "--layout", "type-topics"][..],
            "NATS has no message selectors",
        ),
        (
            &["--target", "nats", "--cfo", "in-selector"][..],
            "one filter subject per consumer",
        ),
        (&["--target", "nats"][..], "target nats has no transactions"),
        (&["--model"][..], "--model needs the broker's process"),
    ] {
        let args = run::specjms_args(&specjms_flags("127.0.0.1:1", rest), &out);
        let e = ferry_bench::workloads::run(args).await.unwrap_err();
        assert!(format!("{e:#}").contains(why), "{rest:?}: {e:#}");
    }
}

#[derive(Parser)]
struct Slowlink {
    #[command(flatten)]
    args: ferry_bench::SlowlinkArgs,
}

fn slowlink_args(out: &std::path::Path, rest: &[&str]) -> ferry_bench::SlowlinkArgs {
    let mut argv = vec!["slowlink", "-q", "--json", out.to_str().unwrap()];
    argv.extend_from_slice(rest);
    let mut args = Slowlink::try_parse_from(argv).unwrap().args.with_common();
    args.bench_binary = Some(env!("CARGO_BIN_EXE_ferry-bench").into());
    args
}

/// The slowlink tests one at a time: each checks that no namespace of this process is left.
static SLOWLINK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// No namespace and no server data directory of this process is left behind.
fn no_namespaces_left() {
    let data = format!(
        "{}-{}-",
        ferry_bench::workloads::slowlink::DATA_PREFIX,
        std::process::id()
    );
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&data))
        .collect();
    assert!(left.is_empty(), "data left behind: {left:?}");
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output();
    if let Ok(out) = out {
        let mine = format!("ferrysl-{}-", std::process::id());
        let list = String::from_utf8_lossy(&out.stdout);
        assert!(!list.contains(&mine), "left behind: {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowlink_runs_every_mode_over_namespaces_and_removes_them() {
    let _one_at_a_time = SLOWLINK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("slowlink.json");
    let args = slowlink_args(
        &out,
        &["--link", "none", "--messages", "50", "--bundle", "10"],
    );
    if let Some(why) = ferry_bench::workloads::slowlink::unavailable(&args) {
        println!("slowlink_runs_every_mode_over_namespaces_and_removes_them: skipped: {why}");
        return;
    }
    ferry_bench::workloads::run(args).await.unwrap();
    no_namespaces_left();
    let json = run::report(&out);
    assert_eq!(json["workload"], "slowlink");
    let modes = json["params"]["slowlink"]["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["per-call", "sync", "pipelined", "bundled"]);
    for m in modes {
        assert_eq!(m["answers"], 50, "{m:#}");
        assert_eq!(m["out_of_order"], 0, "{m:#}");
        assert_eq!(m["payload_bytes_per_message"], 50.0);
        let wire = m["wire_bytes_per_message"].as_f64().unwrap();
        let parts = m["payload_bytes_per_message"].as_f64().unwrap()
            + m["ferry_bytes_per_message"].as_f64().unwrap()
            + m["tcp_ip_bytes_per_message"].as_f64().unwrap();
        assert!((wire - parts).abs() < 1e-6, "{m:#}");
    }
    // A connection per call costs handshakes: more packets per message than bundling.
    assert!(
        modes[0]["packets_per_message"].as_f64().unwrap()
            > modes[3]["packets_per_message"].as_f64().unwrap(),
        "{modes:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowlink_over_a_gprs_like_link_or_the_reason_it_cannot() {
    let _one_at_a_time = SLOWLINK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gprs.json");
    let args = slowlink_args(
        &out,
        &[
            "--link",
            "gprs",
            "--messages",
            "40",
            "--modes",
            "bundled",
            "--bundle",
            "20",
        ],
    );
    if let Some(why) = ferry_bench::workloads::slowlink::unavailable(&args) {
        println!("slowlink_over_a_gprs_like_link_or_the_reason_it_cannot: skipped: {why}");
        // The workload itself refuses with the same reason, before making anything.
        let e = ferry_bench::workloads::run(args).await.unwrap_err();
        assert!(
            format!("{e:#}").contains("slowlink cannot run here"),
            "{e:#}"
        );
        no_namespaces_left();
        return;
    }
    ferry_bench::workloads::run(args).await.unwrap();
    no_namespaces_left();
    let json = run::report(&out);
    let m = &json["params"]["slowlink"]["modes"][0];
    assert_eq!(m["answers"], 40);
    // At least one round trip of 300 ms.
    assert!(m["total_s"].as_f64().unwrap() > 0.3, "{m:#}");
}

#[derive(Parser)]
struct Throughput {
    #[command(flatten)]
    args: ferry_bench::ThroughputArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_removes_its_queues_unless_kept() {
    let server = ferry_testkit::TestServer::start().await;
    let client = server.client("inspector").await;
    for keep in [false, true] {
        let mut argv = vec![
            "throughput".to_string(),
            "--server".into(),
            server.addr_string(),
            "--queues".into(),
            "3".into(),
            "--duration".into(),
            "500ms".into(),
            "--warmup".into(),
            "0s".into(),
            "-q".into(),
        ];
        if keep {
            argv.push("--keep".into());
        }
        let args = Throughput::try_parse_from(argv).unwrap().args;
        ferry_bench::workloads::run(args).await.unwrap();
        let names: Vec<String> = client
            .list_queues()
            .await
            .unwrap()
            .into_iter()
            .map(|q| q.name)
            .filter(|n| n.starts_with("bench-"))
            .collect();
        if keep {
            assert_eq!(names, ["bench-0", "bench-1", "bench-2"]);
        } else {
            assert!(names.is_empty(), "{names:?}");
        }
    }
    server.shutdown().await;
}

/// The namespaces `ip netns list` shows for the slowlink run of process `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip runs");
    let mine = format!("ferrysl-{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&mine))
        .map(str::to_owned)
        .collect()
}

/// The processes whose parent is `pid`, with their command lines (arguments joined by spaces).
fn children_of(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the name may hold spaces and parentheses.
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let ppid = after_name.split_whitespace().nth(1);
        if ppid == Some(pid.to_string().as_str()) {
            found.push((child, command_line(child)));
        }
    }
    found
}

/// The command line of `pid`, empty when it has ended (a zombie's is empty too).
fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowlink_interrupted_by_a_signal_removes_its_namespaces_and_ends_its_children() {
    let _one_at_a_time = SLOWLINK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("interrupted.json");
    // Long enough to be interrupted mid-run: a thousand synchronous calls over 300 ms.
    let rest = ["--link", "gprs", "--modes", "sync", "--messages", "1000"];
    let args = slowlink_args(&out, &rest);
    if let Some(why) = ferry_bench::workloads::slowlink::unavailable(&args) {
        println!("slowlink_interrupted_by_a_signal_removes_its_namespaces: skipped: {why}");
        return;
    }
    for signal in ["TERM", "INT"] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
            .args(["slowlink", "-q", "--json", out.to_str().unwrap()])
            .args(rest)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("ferry-bench starts");
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while namespaces_of(pid).len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the run made no namespaces in 30 s"
            );
            assert!(child.try_wait().unwrap().is_none(), "the run ended early");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        // Let the calls start, then interrupt.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let children = children_of(pid);
        assert!(
            children
                .iter()
                .any(|(_, cmd)| cmd.contains("slowlink-client")),
            "SIG{signal}: no client end running to interrupt: {children:?}"
        );
        let killed = std::process::Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "SIG{signal}: an interrupted run fails");
        assert_eq!(
            namespaces_of(pid),
            Vec::<String>::new(),
            "SIG{signal}: namespaces left behind"
        );
        assert!(
            !out.exists(),
            "SIG{signal}: no result for an interrupted run"
        );
        // Killed children are reaped by whoever inherits them: give that a moment. A pid
        // reused since has another command line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let left = loop {
            let left: Vec<_> = children
                .iter()
                .filter(|(child, cmd)| command_line(*child) == *cmd)
                .collect();
            if left.is_empty() || std::time::Instant::now() > deadline {
                break format!("{left:?}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        assert_eq!(left, "[]", "SIG{signal}: children left running");
    }
}
