//! The ftab workload and `compare` run for about two seconds against a real broker and write
//! a JSON report valid against the schema, with per-operation results.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use clap::Parser;
use ferry_bench::workloads::compare::broker::{BoxFuture, BrokerLauncher, OwnBroker};
use ferry_bench::{CompareArgs, FtabArgs};
use ferry_testkit::TestServer;
use serde_json::Value;

use crate::schema;

#[derive(Parser)]
struct Ftab {
    #[command(flatten)]
    args: FtabArgs,
}

#[derive(Parser)]
struct Compare {
    #[command(flatten)]
    args: CompareArgs,
}

/// A small mix of every archetype.
const MIX: &[&str] = &[
    "--alice",
    "2",
    "--bob",
    "2",
    "--larry",
    "3",
    "--tola",
    "1",
    "--maruja",
    "1",
    "--carl",
    "1",
    "--rick",
    "1",
    "--queues",
    "4",
    "--size",
    "300",
    "--targets-per-send",
    "2",
    "--priority",
    "random",
    "--duration",
    "2s",
    "--warmup",
    "500ms",
    "--cooldown",
    "200ms",
    "--window",
    "500ms",
];

/// Small messages and a one-second run, for the workloads `compare` runs here.
const SHORT_RUN: &[&str] = &[
    "--size",
    "64",
    "--duration",
    "1s",
    "--warmup",
    "300ms",
    "--window",
    "250ms",
];

/// `--server` for `server` and `--json` to `out`.
fn server_and_json(server: &TestServer, out: &std::path::Path) -> [String; 4] {
    [
        "--server".into(),
        server.addr_string(),
        "--json".into(),
        out.display().to_string(),
    ]
}

fn json(path: &std::path::Path) -> Value {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors = schema::validate(&schema::load(), &json);
    assert!(errors.is_empty(), "{errors:#?}\n{json:#}");
    json
}

/// The per-operation results every archetype of [`MIX`] produces.
fn check_operations(r: &Value) {
    assert_eq!(r["target"], "ferry");
    assert_eq!(r["errors"]["send"], 0, "{r:#}");
    assert_eq!(r["errors"]["ack"], 0, "{r:#}");
    let ops = &r["operations"];
    for op in ["send", "read", "query_found", "request_reply"] {
        assert!(ops[op]["count"].as_u64().unwrap() > 0, "{op}: {ops:#}");
        assert!(ops[op]["per_s"].as_f64().unwrap() > 0.0, "{op}");
        assert!(
            ops[op]["response_ms"]["p99"].as_f64().unwrap() > 0.0,
            "{op}"
        );
        let stats = &ops[op]["window_stats"];
        assert!(
            stats["per_s"]["n"].as_u64().unwrap() >= 2,
            "{op}: {stats:#}"
        );
        assert!(stats["per_s"]["ci999"].is_array(), "{op}: {stats:#}");
        assert!(stats["response_mean_ms"]["ci95"].is_array(), "{op}");
        let windows = ops[op]["windows"].as_array().unwrap();
        assert!(windows.iter().any(|w| w["phase"] == "warmup"), "{op}");
        assert!(r["percentile_curves_ms"][op].as_array().unwrap().len() > 5);
    }
    assert_eq!(r["latency_kind"], "send");
    assert!(r["sent"].as_u64().unwrap() > 0);
    assert!(r["received"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftab_mix_runs_and_reports() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ftab.json");
    let mut argv = vec!["ftab".to_string()];
    argv.extend(MIX.iter().map(|s| s.to_string()));
    argv.extend(server_and_json(&server, &out));
    let parsed = Ftab::try_parse_from(argv).unwrap();
    ferry_bench::workloads::run(parsed.args).await.unwrap();
    let json = json(&out);
    assert_eq!(json["workload"], "ftab");
    assert_eq!(json["params"]["mix"]["larry"], 3);
    assert_eq!(json["params"]["priority"], "random");
    check_operations(&json["results"][0]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftab_clients_not_found_by_name_share_the_connections_asked_for() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ftab.json");
    let flags = [
        "ftab",
        "--alice",
        "3",
        "--bob",
        "3",
        "--larry",
        "2",
        "--queues",
        "2",
        "--ferry-connections",
        "2",
    ];
    let mut argv: Vec<String> = flags
        .iter()
        .chain(SHORT_RUN)
        .map(|s| s.to_string())
        .collect();
    argv.extend(server_and_json(&server, &out));
    ferry_bench::workloads::run(Ftab::try_parse_from(argv).unwrap().args)
        .await
        .unwrap();
    let json = json(&out);
    assert_eq!(json["params"]["ferry_connections"], 2);
    let r = &json["results"][0];
    assert_eq!(r["errors"]["send"], 0, "{r:#}");
    for op in ["send", "read", "query_found"] {
        assert!(
            r["operations"][op]["count"].as_u64().unwrap() > 0,
            "{op}: {r:#}"
        );
    }
    // The set-up connection, two shared by the three Alices and three Bobs, one for each
    // Larry, who is found by name, and the one that removes the queues at the end: 6 instead
    // of 10.
    let stats = server.broker().stats();
    let accepted = stats
        .connections_accepted
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(accepted, 6);
    server.shutdown().await;
}

#[test]
fn ftab_refuses_zero_shared_connections() {
    let e = Ftab::try_parse_from(["ftab", "--alice", "1", "--ferry-connections", "0"])
        .err()
        .unwrap();
    assert!(e.to_string().contains("--ferry-connections"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftab_refuses_unpaired_and_empty_mixes() {
    let parse = |flags: &[&str]| {
        let mut argv = vec!["ftab"];
        argv.extend_from_slice(flags);
        Ftab::try_parse_from(argv).unwrap().args
    };
    let e = ferry_bench::workloads::ftab::measure(&parse(&["--tola", "2", "--maruja", "1"]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("pairs"), "{e}");
    let e = ferry_bench::workloads::ftab::measure(&parse(&[]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no clients"), "{e}");
}

/// Starts test servers as the comparison's own broker.
struct TestLauncher;

struct Started(TestServer);

impl BrokerLauncher for TestLauncher {
    fn start(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn OwnBroker>>> {
        Box::pin(async { Ok(Box::new(Started(TestServer::start().await)) as Box<dyn OwnBroker>) })
    }
}

impl OwnBroker for Started {
    fn addr(&self) -> String {
        self.0.addr_string()
    }
    fn describe(&self) -> String {
        "test server".into()
    }
    fn stop(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.0.shutdown())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_ftab_on_its_own_broker() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("compare.json");
    let mut argv = vec![
        "compare".to_string(),
        "ftab".into(),
        "--targets".into(),
        "ferry".into(),
        "--rounds".into(),
        "1".into(),
        "--ferry-connections".into(),
        "2".into(),
    ];
    argv.extend(MIX.iter().map(|s| s.to_string()));
    let html = dir.path().join("compare.html");
    argv.extend([
        "--json".into(),
        out.display().to_string(),
        "--report".into(),
        html.display().to_string(),
    ]);
    let parsed = Compare::try_parse_from(argv).unwrap();
    assert!(!parsed.args.server_given);
    ferry_bench::workloads::compare::run(parsed.args, &TestLauncher)
        .await
        .unwrap();
    let json = json(&out);
    assert_eq!(json["workload"], "compare/ftab");
    assert_eq!(json["params"]["rounds"], 1);
    assert_eq!(json["params"]["own_broker"], true);
    assert_eq!(json["params"]["ferry_connections"], 2);
    check_operations(&json["results"][0]);
    let figures = json["compare"]["figures"].as_array().unwrap();
    let sent = figures.iter().find(|f| f["name"] == "sent_per_s").unwrap();
    assert_eq!(sent["targets"]["ferry"]["ratio_to_ferry"], 1.0);
    assert_eq!(
        sent["targets"]["ferry"]["rounds"].as_array().unwrap().len(),
        1
    );
    let page = std::fs::read_to_string(&html).unwrap();
    // Bar charts of the targets, then the traces and curves of each target.
    assert!(page.matches("<svg").count() >= 5, "{page}");
    assert!(page.contains("Targets compared"));
    assert!(page.contains("Response time (lower is better)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_throughput_on_a_given_server() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("compare.json");
    let argv = [
        "compare",
        "throughput",
        "--targets",
        "ferry",
        "--rounds",
        "1",
        "--max-backlog",
        "2000",
    ];
    let mut argv: Vec<String> = argv
        .iter()
        .chain(SHORT_RUN)
        .map(|s| s.to_string())
        .collect();
    argv.extend(server_and_json(&server, &out));
    let mut parsed = Compare::try_parse_from(argv).unwrap();
    parsed.args.server_given = true;
    ferry_bench::workloads::compare::run(parsed.args, &ferry_bench::workloads::compare::NoLauncher)
        .await
        .unwrap();
    let json = json(&out);
    assert_eq!(json["workload"], "compare/throughput");
    assert_eq!(json["params"]["own_broker"], false);
    assert!(json["results"][0]["received_per_s"].as_f64().unwrap() > 0.0);
    let figures = json["compare"]["figures"].as_array().unwrap();
    assert!(
        figures.iter().any(|f| f["name"] == "end_to_end_p99_ms"),
        "{figures:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_names_a_target_that_cannot_run_the_mix_before_anything_runs() {
    let argv = ["compare", "ftab", "--targets", "ferry,nats", "--larry", "1"];
    let parsed = Compare::try_parse_from(argv).unwrap();
    // NATS has no addressed messages: the mix is refused before a broker is started (the
    // launcher here cannot start one, and would fail with a different message) and before
    // any peer is contacted, so the outcome does not depend on the peers being up.
    let e = ferry_bench::workloads::compare::run(
        parsed.args,
        &ferry_bench::workloads::compare::NoLauncher,
    )
    .await
    .expect_err("larry cannot run on nats");
    let e = e.to_string();
    assert!(
        e.contains("'nats' cannot run larry") && e.contains("addressed messages"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_fanout_on_its_own_broker() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("compare.json");
    let argv = [
        "compare",
        "fanout",
        "--targets",
        "ferry",
        "--rounds",
        "1",
        "--subscribers",
        "2",
        "--persistent",
        "false",
        "--ack",
        "auto",
    ];
    let mut argv: Vec<String> = argv
        .iter()
        .chain(SHORT_RUN)
        .map(|s| s.to_string())
        .collect();
    argv.extend(["--json".into(), out.display().to_string()]);
    let parsed = Compare::try_parse_from(argv).unwrap();
    ferry_bench::workloads::compare::run(parsed.args, &TestLauncher)
        .await
        .unwrap();
    let json = json(&out);
    assert_eq!(json["workload"], "compare/fanout");
    assert_eq!(json["params"]["own_broker"], true);
    let r = &json["results"][0];
    let (sent, received) = (r["sent"].as_u64().unwrap(), r["received"].as_u64().unwrap());
    // Every published message reaches both subscriptions (both counted over the measured
    // window, whose edges cut a few batches differently).
    assert!(sent > 0, "{r:#}");
    let per_message = received as f64 / sent as f64;
    assert!((1.8..=2.2).contains(&per_message), "{per_message}: {r:#}");
}

#[tokio::test]
async fn compare_fanout_refuses_targets_without_topics_and_a_broker_of_its_own() {
    for (argv, expected) in [
        (
            vec!["compare", "fanout", "--targets", "ferry,amqp"],
            "the amqp driver has no topics",
        ),
        (
            vec!["compare", "fanout", "--targets", "ferry,postgres"],
            "the postgres driver has no topics",
        ),
        (
            vec!["compare", "fanout", "--targets", "ferry", "--own-broker"],
            "drop --own-broker",
        ),
    ] {
        let parsed = Compare::try_parse_from(&argv).unwrap();
        let e = ferry_bench::workloads::compare::run(
            parsed.args,
            &ferry_bench::workloads::compare::NoLauncher,
        )
        .await
        .expect_err("refused");
        assert!(e.to_string().contains(expected), "{argv:?}: {e}");
    }
}
