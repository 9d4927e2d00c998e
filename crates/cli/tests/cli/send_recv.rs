//! `ferry send` and `ferry recv`: bodies from every source, properties, output formats, order,
//! selection by sender, addressing, and multi-queue sends.

use std::time::{Duration, Instant};

use ferry_testkit::TestServer;
use serde_json::json;

use crate::support::{ferry, json_lines, queue_info};

async fn server_with(queues: &[&str]) -> TestServer {
    let server = TestServer::start().await;
    for q in queues {
        ferry(&server, &["queue", "create", q]).run().await.ok();
    }
    server
}

/// Sends with `args` and returns the printed id.
async fn send(server: &TestServer, args: &[&str]) -> u64 {
    let mut full = vec!["send"];
    full.extend_from_slice(args);
    let out = ferry(server, &full).run().await;
    out.ok()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("an id: {out:?}"))
}

/// `recv --json` with `args`, one JSON value per message.
async fn recv_json(server: &TestServer, args: &[&str]) -> Vec<serde_json::Value> {
    let mut full = vec!["recv", "--json"];
    full.extend_from_slice(args);
    json_lines(ferry(server, &full).run().await.ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn properties_are_typed_in_json() {
    let server = server_with(&["q"]).await;
    let id = send(
        &server,
        &[
            "--queue",
            "q",
            "--priority",
            "8",
            "--context",
            "77",
            "-p",
            "n=42",
            "-p",
            "f=1.5",
            "-p",
            "yes=true",
            "-p",
            "s=hello",
            "-p",
            "zip:str=007",
            "--property",
            "neg=-3",
            "hi there",
        ],
    )
    .await;
    let msgs = recv_json(&server, &["--queue", "q", "--name", "reader"]).await;
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!(m["id"], id);
    assert_eq!(m["queue"], "q");
    assert!(
        m["sender"].as_str().unwrap().starts_with("ferry-cli-"),
        "{m}"
    );
    assert_eq!(m["receiver"], serde_json::Value::Null);
    assert_eq!(m["priority"], 8);
    assert_eq!(m["context"], 77);
    assert_eq!(
        m["properties"],
        json!({"n": 42, "f": 1.5, "yes": true, "s": "hello", "zip": "007", "neg": -3})
    );
    assert_eq!(m["body"], "hi there");
    assert_eq!(m["redelivered"], false);
    let created = m["created_at"].as_str().unwrap();
    assert_eq!(created.len(), "2024-01-01T00:00:00.000Z".len(), "{created}");
    assert!(
        created.ends_with('Z') && created.as_bytes()[10] == b'T',
        "{created}"
    );
    let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
    let mut expected = [
        "id",
        "queue",
        "sender",
        "receiver",
        "priority",
        "context",
        "properties",
        "body",
        "created_at",
        "redelivered",
    ];
    expected.sort();
    let mut keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, expected);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_malformed_properties_are_rejected_before_sending() {
    let server = server_with(&["q"]).await;
    let out = ferry(
        &server,
        &["send", "--queue", "q", "-p", "a=1", "-p", "a:str=2", "x"],
    )
    .run()
    .await;
    assert_eq!(out.failed(), "ferry: property 'a' is given more than once");
    let out = ferry(&server, &["send", "--queue", "q", "-p", "novalue", "x"])
        .run()
        .await;
    assert!(out.failed().contains("NAME=VALUE"));
    assert_eq!(queue_info(&server, "q").await.unwrap().ready, 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_from_stdin_and_from_file() {
    let server = server_with(&["q"]).await;
    let out = ferry(&server, &["send", "--queue", "q"])
        .stdin("line one\nline two\n")
        .run()
        .await;
    out.ok();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("body.bin");
    std::fs::write(&path, [0xff, 0x00, 0x01, 0xfe]).unwrap();
    send(&server, &["--queue", "q", "--file", path.to_str().unwrap()]).await;
    let text = dir.path().join("body.txt");
    std::fs::write(&text, "from a file").unwrap();
    send(&server, &["--queue", "q", "--file", text.to_str().unwrap()]).await;

    let msgs = recv_json(
        &server,
        &["--queue", "q", "--order", "time", "--count", "10"],
    )
    .await;
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0]["body"], "line one\nline two\n");
    assert!(msgs[1].get("body").is_none(), "{}", msgs[1]);
    assert_eq!(msgs[1]["body_base64"], "/wAB/g==");
    assert_eq!(msgs[2]["body"], "from a file");

    let out = ferry(
        &server,
        &["send", "--queue", "q", "--file", "/no/such/file"],
    )
    .run()
    .await;
    assert!(out.failed().contains("/no/such/file"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_output_block() {
    let server = server_with(&["q"]).await;
    let id = send(
        &server,
        &[
            "--queue",
            "q",
            "-p",
            "color=red",
            "--name",
            "alice",
            "hello",
        ],
    )
    .await;
    let out = ferry(&server, &["recv", "--queue", "q"]).run().await;
    let text = out.ok();
    assert!(text.starts_with(&format!("id:          {id}\n")), "{text}");
    for line in [
        "queue:       q\n",
        "sender:      alice\n",
        "receiver:    (none)\n",
        "priority:    5\n",
        "context:     0\n",
        "properties:  color=\"red\"\n",
        "redelivered: false\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in {text}");
    }
    assert!(text.contains("created_at:  20"), "{text}");
    assert!(text.ends_with("\n\nhello\n"), "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_and_wait() {
    let server = server_with(&["q"]).await;
    // Nothing there: nothing printed, success, at once.
    let out = ferry(&server, &["recv", "--queue", "q", "--count", "3"])
        .run()
        .await;
    assert_eq!(out.ok(), "");
    let out = ferry(&server, &["recv", "--queue", "q"]).run().await;
    assert_eq!(out.ok(), "");

    for body in ["one", "two"] {
        send(&server, &["--queue", "q", body]).await;
    }
    let start = Instant::now();
    let msgs = recv_json(
        &server,
        &["--queue", "q", "--count", "5", "--wait", "500ms"],
    )
    .await;
    let took = start.elapsed();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["body"], "one");
    assert_eq!(msgs[1]["body"], "two");
    // It waited once for a third message, then stopped early instead of waiting 3 more times.
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Taken and acked: gone.
    let q = queue_info(&server, "q").await.unwrap();
    assert_eq!((q.ready, q.in_flight), (0, 0));

    // --count stops at N even when more are there.
    for body in ["a", "b", "c"] {
        send(&server, &["--queue", "q", body]).await;
    }
    let msgs = recv_json(&server, &["--queue", "q", "--count", "2"]).await;
    assert_eq!(msgs.len(), 2);
    assert_eq!(queue_info(&server, "q").await.unwrap().ready, 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_a_message_sent_meanwhile() {
    let server = server_with(&["q"]).await;
    let reader = tokio::spawn({
        let cmd = ferry(
            &server,
            &["recv", "--queue", "q", "--wait", "10s", "--json"],
        );
        async move { cmd.run().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    send(&server, &["--queue", "q", "late"]).await;
    let out = reader.await.unwrap();
    assert_eq!(json_lines(out.ok())[0]["body"], "late");
    assert!(start.elapsed() < Duration::from_secs(8));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_leaves_the_message() {
    let server = server_with(&["q"]).await;
    let id = send(&server, &["--queue", "q", "keep me"]).await;
    let msgs = recv_json(&server, &["--queue", "q", "--peek", "--count", "5"]).await;
    assert_eq!(msgs.len(), 1, "a peek sees the head once");
    assert_eq!(msgs[0]["id"], id);
    let q = queue_info(&server, "q").await.unwrap();
    assert_eq!((q.ready, q.in_flight), (1, 0));
    let msgs = recv_json(&server, &["--queue", "q"]).await;
    assert_eq!(msgs[0]["id"], id);
    assert_eq!(msgs[0]["redelivered"], false);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_priority_and_time() {
    let server = server_with(&["q"]).await;
    send(&server, &["--queue", "q", "--priority", "1", "low"]).await;
    send(&server, &["--queue", "q", "--priority", "9", "high"]).await;
    send(&server, &["--queue", "q", "--priority", "1", "low2"]).await;
    let first = recv_json(&server, &["--queue", "q", "--order", "time", "--peek"]).await;
    assert_eq!(first[0]["body"], "low");
    let all = recv_json(&server, &["--queue", "q", "--count", "3"]).await;
    let bodies: Vec<&str> = all.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["high", "low", "low2"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_sender_and_addressed_messages() {
    let server = server_with(&["a", "b"]).await;
    send(&server, &["--queue", "a", "--name", "alice", "from alice"]).await;
    send(&server, &["--queue", "b", "--name", "carol", "from carol"]).await;
    let msgs = recv_json(&server, &["--from", "alice", "--count", "5"]).await;
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["body"], "from alice");
    assert_eq!(msgs[0]["sender"], "alice");

    // Only bob sees a message addressed to bob.
    ferry(&server, &["waiting", "--name", "bob"])
        .run()
        .await
        .ok();
    send(&server, &["--queue", "a", "--to", "bob", "secret"]).await;
    let msgs = recv_json(&server, &["--queue", "a", "--name", "eve"]).await;
    assert!(msgs.is_empty(), "{msgs:?}");
    let msgs = recv_json(&server, &["--queue", "a", "--name", "bob"]).await;
    assert_eq!(msgs[0]["body"], "secret");
    assert_eq!(msgs[0]["receiver"], "bob");

    // An unknown receiver is refused with the broker's message.
    let out = ferry(&server, &["send", "--queue", "a", "--to", "nobody", "x"])
        .run()
        .await;
    assert!(out.failed().contains("nobody"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_queue_send_is_all_or_nothing() {
    let server = server_with(&["a", "b", "c"]).await;
    send(&server, &["--queue", "a", "--queue", "b", "both"]).await;
    send(&server, &["--queue", "c,a", "comma"]).await;
    assert_eq!(queue_info(&server, "a").await.unwrap().ready, 2);
    assert_eq!(queue_info(&server, "b").await.unwrap().ready, 1);
    assert_eq!(queue_info(&server, "c").await.unwrap().ready, 1);

    let out = ferry(
        &server,
        &["send", "--queue", "a", "--queue", "missing", "x"],
    )
    .run()
    .await;
    assert_eq!(out.failed(), "ferry: queue 'missing' does not exist");
    assert_eq!(queue_info(&server, "a").await.unwrap().ready, 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_with_a_selector_filters_and_a_bad_one_names_its_position() {
    let server = server_with(&["orders"]).await;
    for (region, total, priority) in [("eu", "10", "5"), ("us", "99", "9"), ("eu", "150", "8")] {
        send(
            &server,
            &[
                "--queue",
                "orders",
                "--priority",
                priority,
                "-p",
                &format!("region={region}"),
                "-p",
                &format!("total={total}"),
                &format!("{region} {total}"),
            ],
        )
        .await;
    }
    // Peeks and takes see only what the selector selects, in the usual order.
    let selector = ["--selector", "region = 'eu' AND total > 50"];
    let peeked = recv_json(
        &server,
        &[&["--queue", "orders", "--peek"][..], &selector].concat(),
    )
    .await;
    assert_eq!(peeked.len(), 1);
    assert_eq!(peeked[0]["body"], "eu 150");
    let eu = recv_json(
        &server,
        &[
            "--queue",
            "orders",
            "--count",
            "10",
            "--selector",
            "region = 'eu'",
        ],
    )
    .await;
    let bodies: Vec<_> = eu.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["eu 150", "eu 10"]);
    // The message passed over is still there for a plain receive.
    assert_eq!(queue_info(&server, "orders").await.unwrap().ready, 1);
    let rest = recv_json(&server, &["--queue", "orders", "--count", "10"]).await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["body"], "us 99");

    // A selector that does not parse: the broker's message, with the position, exit 1.
    let out = ferry(
        &server,
        &["recv", "--queue", "orders", "--selector", "total > (1 + 2"],
    )
    .run()
    .await;
    assert_eq!(
        out.failed(),
        "ferry: invalid selector: expected ')', found end of input at position 14"
    );
    server.shutdown().await;
}
