//! `recv` acks only after the message has been printed: a failed print or a killed process
//! loses nothing, because the unacked delivery returns to the queue when the session ends.

use std::process::Stdio;
use std::time::Duration;

use ferry_testkit::TestServer;

use crate::support::{ferry, ferry_path, json_lines, queue_info, wait_for_depth};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_messages_are_acked() {
    let server = TestServer::start().await;
    ferry(&server, &["queue", "create", "q"]).run().await.ok();
    ferry(&server, &["send", "--queue", "q", "x"])
        .run()
        .await
        .ok();
    ferry(&server, &["recv", "--queue", "q"]).run().await.ok();
    // Acked before the process exited: nothing ready, nothing in flight, right away.
    let q = queue_info(&server, "q").await.unwrap();
    assert_eq!((q.ready, q.in_flight), (0, 0));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_print_returns_the_message() {
    let server = TestServer::start().await;
    ferry(&server, &["queue", "create", "q"]).run().await.ok();
    ferry(&server, &["send", "--queue", "q", "precious"])
        .run()
        .await
        .ok();
    // Writing to /dev/full fails with "no space left on device".
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = ferry(&server, &["recv", "--queue", "q"])
        .stdout_to(full)
        .run()
        .await;
    let line = out.failed();
    assert!(line.contains("cannot write to standard output"), "{line}");
    wait_for_depth(&server, "q", 1, 0).await;
    let msgs = json_lines(
        ferry(&server, &["recv", "--queue", "q", "--json"])
            .run()
            .await
            .ok(),
    );
    assert_eq!(msgs[0]["body"], "precious");
    assert_eq!(msgs[0]["redelivered"], true);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_printing_returns_the_message() {
    let server = TestServer::start().await;
    ferry(&server, &["queue", "create", "q"]).run().await.ok();
    // A body larger than a pipe's buffer: the print blocks while nobody reads the pipe.
    let body = "y".repeat(512 * 1024);
    ferry(&server, &["send", "--queue", "q"])
        .stdin(body.clone())
        .run()
        .await
        .ok();
    let mut child = tokio::process::Command::new(ferry_path())
        .args(["recv", "--queue", "q", "--server", &server.addr_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Taken (in flight), stuck in the print, not acked.
    wait_for_depth(&server, "q", 0, 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    child.kill().await.unwrap();
    wait_for_depth(&server, "q", 1, 0).await;
    let out = ferry(&server, &["recv", "--queue", "q", "--json"])
        .run()
        .await;
    let msgs = json_lines(out.ok());
    assert_eq!(msgs[0]["body"].as_str().unwrap().len(), body.len());
    assert_eq!(msgs[0]["redelivered"], true);
    server.shutdown().await;
}
