//! STOMP sessions as operators see them, against the real binary: they are in the session
//! list (`ferry clients`, the HTTP API, `ferry status`) with their protocol, an operator's
//! force-disconnect closes one with an ERROR frame, and `ferry serve` ends them on shutdown
//! before it closes the store. Also what a pattern subscription's MESSAGE frames name.

// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod raw;

use std::net::SocketAddr;
use std::process::Command;

use ferry_stomp::codec::Command as Cmd;
use ferry_testkit::{ferry_bin, BinaryServer};
use raw::{message, Raw};
use serde_json::Value;

fn start() -> (BinaryServer, SocketAddr, String) {
    let server = BinaryServer::start(&[]).expect("ferry serve starts (cargo build -p ferry)");
    let stomp = server.stomp_addr().expect("the STOMP listener is on");
    let http = server
        .http_addr()
        .expect("the HTTP listener is on")
        .to_string();
    (server, stomp, http)
}

/// Runs the CLI against the broker's HTTP API; its standard output.
fn ferry(args: &[&str], http: &str) -> String {
    let out = Command::new(ferry_bin())
        .args(args)
        .args(["--http", http])
        .output()
        .expect("ferry runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ferry {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The online clients, as `ferry clients --online --json` lists them.
fn online(http: &str) -> Vec<Value> {
    let text = ferry(&["clients", "--online", "--json"], http);
    match serde_json::from_str(&text).expect("JSON") {
        Value::Array(v) => v,
        other => panic!("not an array: {other}"),
    }
}

#[tokio::test]
async fn stomp_sessions_are_listed_and_an_operator_closes_them() {
    let (_server, addr, http) = start();
    let (mut shop, name) = Raw::connected(addr, "client-id:shop-1\n").await;
    assert_eq!(name, "shop-1");
    shop.ok(
        "SUBSCRIBE\nid:s\ndestination:/queue/orders\nack:client-individual",
        "sub",
    )
    .await;
    shop.ok("SEND\ndestination:/queue/orders\n\nbook", "sent")
        .await;
    let first = shop.message().await;
    assert_eq!(&first.body[..], b"book");
    let (_anon, made_up) = Raw::connected(addr, "").await;

    let clients = online(&http);
    let entry = clients
        .iter()
        .find(|c| c["name"] == "shop-1")
        .unwrap_or_else(|| panic!("shop-1 listed: {clients:?}"));
    assert_eq!(entry["protocol"], "stomp", "{entry}");
    assert_eq!(entry["in_flight"], 1, "the unacknowledged MESSAGE: {entry}");
    assert_eq!(entry["subscriptions"][0]["queue"], "orders", "{entry}");
    assert!(
        entry["address"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{entry}"
    );
    let listed = |name: &str| clients.iter().any(|c| c["name"] == name);
    assert!(listed(&made_up), "the made-up name {made_up}: {clients:?}");
    let table = ferry(&["clients", "--online"], &http);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("shop-1") && l.contains(" stomp ")),
        "{table}"
    );
    let status = ferry(&["status", "--json"], &http);
    let status: Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(status["sessions"], 2, "{status}");

    let said = ferry(&["client", "disconnect", "shop-1"], &http);
    assert!(said.contains("disconnected client 'shop-1'"), "{said}");
    let err = shop.error_then_closed().await;
    assert_eq!(message(&err), "closed by an operator", "{err:?}");
    assert!(
        !online(&http).iter().any(|c| c["name"] == "shop-1"),
        "gone from the list"
    );

    // Its unacknowledged message went back to the queue.
    let (mut again, _) = Raw::connected(addr, "").await;
    again
        .ok(
            "SUBSCRIBE\nid:s\ndestination:/queue/orders\nack:client-individual",
            "sub",
        )
        .await;
    let back = again.message().await;
    assert_eq!(&back.body[..], b"book");
    assert_eq!(back.header("redelivered"), Some("true"), "{back:?}");
}

#[tokio::test]
async fn shutdown_ends_stomp_sessions_and_gives_their_messages_back() {
    let (mut server, addr, _http) = start();
    let (mut c, _) = Raw::connected(addr, "client-id:worker\n").await;
    c.ok(
        "SUBSCRIBE\nid:s\ndestination:/queue/jobs\nack:client",
        "sub",
    )
    .await;
    c.ok("SEND\ndestination:/queue/jobs\n\njob-1", "sent").await;
    assert_eq!(&c.message().await.body[..], b"job-1");
    // A transaction open at shutdown is rolled back.
    c.ok("BEGIN\ntransaction:t", "begin").await;
    c.ok(
        "SEND\ndestination:/queue/jobs\ntransaction:t\n\nnever",
        "held",
    )
    .await;

    let status = server.terminate().expect("ferry serve exits");
    assert!(status.success(), "{status:?}");
    let err = c.error_then_closed().await;
    assert_eq!(message(&err), "the broker is shutting down", "{err:?}");

    server.restart().expect("ferry serve starts again");
    let addr = server.stomp_addr().expect("the STOMP listener is on");
    let (mut c, _) = Raw::connected(addr, "").await;
    c.ok("SUBSCRIBE\nid:s\ndestination:/queue/jobs\nack:auto", "sub")
        .await;
    let back = c.message().await;
    assert_eq!(&back.body[..], b"job-1");
    assert_eq!(back.header("redelivered"), Some("true"), "{back:?}");
    let f = c.ask("SEND\ndestination:/queue/jobs\n\nlast", "s").await;
    assert_eq!(f.command, Cmd::Receipt);
    let next = c.message().await;
    assert_eq!(&next.body[..], b"last", "the rolled back send is gone");
}

#[tokio::test]
async fn shutdown_waits_for_a_stomp_client_to_hear_why() {
    let (mut server, addr, _http) = start();
    let (mut sender, _) = Raw::connected(addr, "").await;
    let body = "x".repeat(64 << 10);
    for i in 0..160 {
        sender
            .ok(
                &format!("SEND\ndestination:/queue/bulk\n\n{body}"),
                &format!("s{i}"),
            )
            .await;
    }
    // A reader that reads nothing yet: the socket's buffers and its outbound queue fill.
    let (mut reader, _) = Raw::connected(addr, "").await;
    reader
        .ok("SUBSCRIBE\nid:s\ndestination:/queue/bulk\nack:auto", "sub")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let term = tokio::task::spawn_blocking(move || {
        let status = server.terminate();
        (server, status)
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // The broker waits for the gateway to write what it queued, and then why it closes.
    let frames = reader.rest().await;
    let last = frames.last().expect("frames");
    assert_eq!(last.command, Cmd::Error, "{:?}", last.command);
    assert_eq!(message(last), "the broker is shutting down");
    let (_server, status) = term.await.expect("terminate");
    assert!(status.expect("exits").success());
}

#[tokio::test]
async fn a_pattern_subscription_names_the_topic_of_each_message() {
    let (_server, addr, _http) = start();
    let (mut c, _) = Raw::connected(addr, "").await;
    c.ok("SUBSCRIBE\nid:one\ndestination:/topic/orders.*", "p1")
        .await;
    c.ok("SUBSCRIBE\nid:all\ndestination:/topic/orders.>", "p2")
        .await;
    c.ok("SUBSCRIBE\nid:eu\ndestination:/topic/orders.eu", "t")
        .await;
    c.ok("SEND\ndestination:/topic/orders.eu\n\nfrom eu", "s1")
        .await;
    c.ok(
        "SEND\ndestination:/topic/orders.us.west\nferry_topic:forged\n\nfrom us",
        "s2",
    )
    .await;
    let mut got: Vec<(String, String, String)> = Vec::new();
    for _ in 0..4 {
        let m = c.message().await;
        assert_eq!(m.header("ferry_topic"), None, "in destination only: {m:?}");
        got.push((
            m.header("subscription").unwrap().to_owned(),
            m.header("destination").unwrap().to_owned(),
            String::from_utf8_lossy(&m.body).into_owned(),
        ));
    }
    got.sort();
    let want = |s: &str, d: &str, b: &str| (s.to_owned(), d.to_owned(), b.to_owned());
    assert_eq!(
        got,
        vec![
            want("all", "/topic/orders.eu", "from eu"),
            want("all", "/topic/orders.us.west", "from us"),
            want("eu", "/topic/orders.eu", "from eu"),
            want("one", "/topic/orders.eu", "from eu"),
        ]
    );
}
