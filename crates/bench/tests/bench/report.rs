//! `--report FILE.html`: a real ftab run and a compare run produce a page with their plots.

use clap::Parser;
use ferry_bench::FtabArgs;
use ferry_testkit::TestServer;

#[derive(Parser)]
struct Ftab {
    #[command(flatten)]
    args: FtabArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftab_report_has_plots() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let argv = [
        "ftab",
        "--alice",
        "2",
        "--bob",
        "2",
        "--larry",
        "2",
        "--queues",
        "3",
        "--size",
        "200",
        "--duration",
        "1500ms",
        "--warmup",
        "500ms",
        "--window",
        "250ms",
    ];
    let mut argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    argv.extend([
        "--server".into(),
        server.addr_string(),
        "--report".into(),
        html.display().to_string(),
    ]);
    ferry_bench::workloads::run(Ftab::try_parse_from(argv).unwrap().args)
        .await
        .unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    // Throughput trace, response-time trace and percentile curves.
    assert_eq!(page.matches("<svg").count(), 3, "{page}");
    assert_eq!(page.matches("class=\"x-label\"").count(), 3);
    assert!(page.contains("operations/s"));
    assert!(page.contains("mean response time (ms)"));
    assert!(page.contains("percentile"));
    assert!(page.contains(">warm-up</text>"));
    for op in ["send", "read", "query found"] {
        assert!(page.contains(&format!(">{op}</text>")), "{op}");
    }
    assert!(!page.contains("<script") && !page.contains("http://") || page.contains("xmlns"));
    server.shutdown().await;
}
