//! The workloads of the seed documents, each for a few seconds against a real broker, their
//! JSON checked against the schema: `stream` (Ferry, TCP and the datagram ingest; the peers'
//! transports run in tests/peers.rs).

use clap::Parser;
use ferry_bench::StreamArgs;
use serde_json::Value;

use crate::schema;

#[derive(Parser)]
struct Stream {
    #[command(flatten)]
    args: StreamArgs,
}

fn json_of(path: &std::path::Path) -> Value {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors = schema::validate(&schema::load(), &json);
    assert!(errors.is_empty(), "{errors:#?}\n{json:#}");
    json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_runs_over_ferry_tcp_and_the_datagram_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stream.json");
    let parsed = Stream::try_parse_from([
        "stream",
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
        "-q",
        "--json",
        out.to_str().unwrap(),
    ])
    .unwrap();
    ferry_bench::workloads::run(parsed.args.with_common())
        .await
        .unwrap();
    let json = json_of(&out);
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
        } else {
            assert_eq!(loss, 0.0, "{r:#}");
            assert_eq!(s["sent_total"], s["received_total"], "{r:#}");
        }
    }
}
