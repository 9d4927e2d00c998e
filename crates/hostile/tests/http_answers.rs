//! The HTTP listener's answers under attack and misfortune, against the real binary: pages of
//! large messages, clients that ask for large answers and never read them, many requests at
//! once, and clients that go away while a change runs. Each ends in a bounded answer, a precise
//! error (429 `ServerFull`) or a closed connection; memory stays bounded and nothing is lost or
//! left half done.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_hostile::rss_bytes;
use ferry_protocol::OutgoingMessage;
use ferry_testkit::BinaryServer;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The most bytes of JSON in a page of browsed messages (docs/http-api.md).
const MAX_PAGE_BYTES: usize = 4 << 20;
/// API requests served at once (docs/http-api.md).
const MAX_REQUESTS: usize = 32;
/// The largest body the broker takes by default.
const MAX_BODY: usize = 1 << 20;

fn start() -> (BinaryServer, SocketAddr) {
    let server = BinaryServer::start(&[]).expect("ferry serve starts (cargo build -p ferry)");
    let http = server.http_addr().expect("the HTTP listener is on");
    (server, http)
}

/// An answer read to the end of its connection.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// `method path` with `Connection: close`, read to the end (at most `wait`).
async fn call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut all))
        .await
        .expect("an answer within 30 s")
        .unwrap();
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head,
        body: all[split + 4..].to_vec(),
    }
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    call(addr, "GET", path, b"").await
}

/// Sends `count` messages of `size` bytes to `queues` as `sender`, each body starting with its
/// number; returns their ids in order.
async fn fill(
    server: &BinaryServer,
    sender: &str,
    queues: &[&str],
    count: usize,
    size: usize,
) -> Vec<u64> {
    let client = ferry_client::Client::connect(&server.addr().to_string(), sender)
        .await
        .unwrap();
    let msgs = (0..count)
        .map(|i| {
            let mut body = format!("{i:06}").into_bytes();
            body.resize(size, b'x');
            let mut m = OutgoingMessage::new(queues[0], body);
            m.queues = queues.iter().map(|q| q.to_string()).collect();
            m
        })
        .collect();
    let sent = client.send_batch(msgs).await.unwrap();
    sent.into_iter().map(|r| r.unwrap()).collect()
}

/// Every page of `path` (a browse, with its query but no cursor): each page's message count and
/// the ids of every message shown, in order.
async fn every_page(addr: SocketAddr, path: &str) -> (Vec<usize>, Vec<u64>) {
    let (mut counts, mut ids) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            None => path.to_owned(),
            Some(c) => format!("{path}&cursor={c}"),
        };
        let a = get(addr, &url).await;
        assert_eq!(a.status, 200, "{}", a.head);
        assert!(
            a.body.len() <= MAX_PAGE_BYTES,
            "a page of {} bytes is over the limit of {MAX_PAGE_BYTES}",
            a.body.len()
        );
        let page = a.json();
        let messages = page["messages"].as_array().unwrap();
        counts.push(messages.len());
        ids.extend(messages.iter().map(|m| m["id"].as_u64().unwrap()));
        match page["next"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (counts, ids),
        }
        assert!(counts.len() < 100, "paging never ends: {counts:?}");
    }
}

#[tokio::test]
async fn pages_of_large_messages_are_bounded_in_bytes_and_their_cursors_lose_nothing() {
    let (server, addr) = start();
    assert!(get(addr, "/healthz").await.status == 200);
    assert_eq!(
        call(addr, "PUT", "/api/queues/large", b"").await.status,
        200
    );
    // Twelve bodies of the largest size the broker takes: asked for a thousand to a page,
    // a page of text bodies holds three (a fourth would pass 4 MiB), of base64 bodies (1.33 MiB
    // each) two, of hex bodies (2 MiB each) one.
    assert_eq!(call(addr, "PUT", "/api/queues/copy", b"").await.status, 200);
    let sent = fill(&server, "bulky", &["large", "copy"], 12, MAX_BODY).await;
    for (body, per_page) in [("text", 3), ("hex", 1), ("base64", 2)] {
        let (counts, ids) = every_page(
            addr,
            &format!("/api/queues/large/messages?limit=1000&body={body}"),
        )
        .await;
        assert_eq!(ids, sent, "{body}: every message once, in order");
        assert!(
            counts.iter().all(|&n| n == per_page),
            "{body}: pages of {counts:?}, expected {per_page} each"
        );
    }
    // By sender, each message shows once on each of its queues: a page that stops between
    // the two resumes at the second.
    let (counts, ids) = every_page(addr, "/api/senders/bulky/messages?limit=1000&order=time").await;
    let twice: Vec<u64> = sent.iter().flat_map(|&id| [id, id]).collect();
    assert_eq!(
        ids, twice,
        "by sender: every message once a queue, in order"
    );
    assert_eq!(counts, vec![3; 8], "by sender");
    // Small messages still come a thousand to a page.
    assert_eq!(
        call(addr, "PUT", "/api/queues/small", b"").await.status,
        200
    );
    let small = fill(&server, "chatty", &["small"], 1500, 16).await;
    let (counts, ids) = every_page(addr, "/api/queues/small/messages?limit=1000").await;
    assert_eq!(counts, vec![1000, 500]);
    assert_eq!(ids, small);
    // Browsing took nothing.
    let a = get(addr, "/api/queues/large").await;
    assert_eq!(a.json()["ready"], 12);
}

/// A connection with a small receive window that asks for `requests` answers of `path` at once
/// (pipelined) and never reads them.
async fn never_reads(addr: SocketAddr, path: &str, requests: usize) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(addr).await.unwrap();
    let one = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(one.repeat(requests).as_bytes()).await.unwrap();
    s
}

#[tokio::test]
async fn readers_that_never_read_hold_bounded_slots_and_are_cut_off() {
    let (server, addr) = start();
    let pid = server.pid().unwrap();
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    assert_eq!(call(addr, "PUT", "/api/queues/wide", b"").await.status, 200);
    // A page of 24 messages of 64 KiB: 1.5 MiB of JSON.
    fill(&server, "filler", &["wide"], 24, 64 << 10).await;
    let base_fds = fds();
    let before = rss_bytes(pid).unwrap();
    // More clients than the API serves at once, each asking for eight pages and reading none:
    // the socket buffers fill, and each connection's answer waits with its slot.
    let mut stuck = Vec::new();
    for _ in 0..MAX_REQUESTS + 8 {
        stuck.push(never_reads(addr, "/api/queues/wide/messages?limit=24", 8).await);
    }
    // Every slot is held: another request is refused at once, precisely.
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let a = get(addr, "/api/overview").await;
        if a.status == 429 {
            break a;
        }
        assert_eq!(a.status, 200, "{}", a.head);
        assert!(Instant::now() < deadline, "the API never refused a request");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(refused.json()["error"], "ServerFull");
    assert!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        refused.head
    );
    // The health checks take no slot.
    assert_eq!(get(addr, "/healthz").await.status, 200);
    assert_eq!(get(addr, "/readyz").await.status, 200);
    let grown = rss_bytes(pid).unwrap().saturating_sub(before);
    assert!(grown < 256 << 20, "memory grew by {grown} bytes");
    // After the write timeout (10 s) the broker hangs up on every one of them, and serves again.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fds() > base_fds + 2 {
        assert!(
            Instant::now() < deadline,
            "{} descriptors open (were {base_fds}): readers that never read are kept",
            fds()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let a = get(addr, "/api/overview").await;
    assert_eq!(a.status, 200, "{}", a.head);
    for mut s in stuck {
        // What the broker had sent, then the end of the connection.
        let mut sink = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut sink)).await;
        assert!(end.is_ok(), "a stuck connection is still open");
    }
    // Nothing was taken.
    assert_eq!(get(addr, "/api/queues/wide").await.json()["ready"], 24);
}

#[tokio::test]
async fn a_change_runs_to_its_end_when_its_client_goes_away() {
    let (_server, addr) = start();
    // An import of 1500 queues, and the client gone as soon as it has sent it.
    let queues: Vec<Value> = (0..1500)
        .map(|i| serde_json::json!({"name": format!("imported-{i:04}"), "max_deliveries": 3}))
        .collect();
    let doc = serde_json::json!({"format": 1, "queues": queues, "topics": []}).to_string();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/definitions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        doc.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(doc.as_bytes()).await.unwrap();
    drop(s);
    // Every queue comes, with its settings: the import was not cut short.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = get(addr, "/api/definitions").await;
        assert_eq!(a.status, 200, "{}", a.head);
        let doc = a.json();
        let done: HashSet<&str> = doc["queues"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["max_deliveries"] == 3)
            .map(|q| q["name"].as_str().unwrap())
            .collect();
        if done.len() == 1500 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of 1500 queues imported: the import stopped with its client",
            done.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn bodies_that_never_finish_hold_a_slot_only_so_long() {
    let (_server, addr) = start();
    // More clients than the API serves at once, each sending the start of a change and then
    // nothing.
    let mut slow = Vec::new();
    for i in 0..MAX_REQUESTS + 8 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "PUT /api/queues/slow-{i} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{{\"max_del"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        slow.push(s);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = get(addr, "/api/overview").await;
        if a.status == 429 {
            break;
        }
        assert!(Instant::now() < deadline, "the API never refused a request");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // After the body timeout (30 s) each gets 408 and a closed connection, and the API serves.
    let mut timed_out = 0;
    for mut s in slow {
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(45), s.read_to_end(&mut all))
            .await
            .expect("the slow upload is cut off")
            .unwrap();
        let text = String::from_utf8_lossy(&all);
        // Those beyond the slots were refused at once.
        if text.starts_with("HTTP/1.1 429") {
            continue;
        }
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("\"LimitExceeded\""), "{text}");
        timed_out += 1;
    }
    assert!(
        timed_out >= MAX_REQUESTS,
        "only {timed_out} uploads timed out"
    );
    assert_eq!(get(addr, "/api/overview").await.status, 200);
    // None of the half-sent changes took effect.
    let queues = get(addr, "/api/queues").await.json();
    assert_eq!(queues["queues"].as_array().unwrap().len(), 0, "{queues}");
}
