//! The HTTP listener's answers under attack and misfortune, against the real binary: pages of
//! large messages, clients that ask for large answers and never read them, many requests at
//! once, one client taking more than its share of them, and clients that go away while a change
//! runs. Each ends in a bounded answer, a precise error (429 `ServerFull`) or a closed
//! connection; memory stays bounded and nothing is lost or left half done. The listener's
//! bounds follow the command line, and absurd ones are refused at start.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{refused_at_start, start, start_with};
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

/// A connection to `addr` from the loopback address `source` (any of 127/8 is this machine's),
/// so that one test can be several clients to the broker.
async fn connect_from(source: [u8; 4], addr: SocketAddr, recv_buffer: Option<u32>) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size).unwrap();
    }
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(addr).await.unwrap()
}

/// `method path` with `Connection: close`, read to the end (at most `wait`).
async fn call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Answer {
    call_from([127, 0, 0, 1], addr, method, path, body).await
}

/// [`call`] from the loopback address `source`.
async fn call_from(
    source: [u8; 4],
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> Answer {
    let mut s = connect_from(source, addr, None).await;
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

/// A connection from the loopback address `source` with a small receive window that asks for
/// `requests` answers of `path` at once
/// (pipelined) and never reads them.
async fn never_reads_from(
    source: [u8; 4],
    addr: SocketAddr,
    path: &str,
    requests: usize,
) -> TcpStream {
    let mut s = connect_from(source, addr, Some(4096)).await;
    let one = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(one.repeat(requests).as_bytes()).await.unwrap();
    s
}

/// Queue `wide` with 24 messages of 64 KiB, and the path of a page of all of them (1.5 MiB of
/// JSON): an answer large enough to fill a reader's socket buffers.
async fn wide_queue(server: &BinaryServer, addr: SocketAddr) -> &'static str {
    assert_eq!(call(addr, "PUT", "/api/queues/wide", b"").await.status, 200);
    fill(server, "filler", &["wide"], 24, 64 << 10).await;
    "/api/queues/wide/messages?limit=24"
}

/// Waits until a request from `source` is served again, failing after `within`.
async fn served_within(source: [u8; 4], addr: SocketAddr, within: Duration, why: &str) {
    let deadline = Instant::now() + within;
    loop {
        let a = call_from(source, addr, "GET", "/api/overview", b"").await;
        if a.status == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{why}: {}", a.head);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn readers_that_never_read_hold_bounded_slots_and_are_cut_off() {
    // The default bounds but a write timeout of 30 s (not 10), which leaves time to fill every
    // slot on a busy machine before the first reader is cut off.
    let (server, addr) = start_with(&["--http-write-timeout-ms", "30000"]);
    let pid = server.pid().unwrap();
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let page = wide_queue(&server, addr).await;
    let base_fds = fds();
    let before = rss_bytes(pid).unwrap();
    // More connections than the API serves at once, from three clients (whose shares
    // together are more than every slot), each asking for eight pages and reading none: the
    // socket buffers fill, and each connection's answer waits with its slot.
    let mut stuck = Vec::new();
    for i in 0..MAX_REQUESTS + 8 {
        stuck.push(never_reads_from(one_of_three(i), addr, page, 8).await);
    }
    // Every slot is held: a fourth client is refused at once, precisely.
    let refused = refused_from(
        [127, 0, 0, 9],
        addr,
        Duration::from_secs(25),
        "every slot held",
    )
    .await;
    assert_eq!(refused.json()["error"], "ServerFull");
    let message = refused.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(&format!("serving {MAX_REQUESTS} requests already")),
        "{message}"
    );
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
    // After the write timeout (30 s) the broker hangs up on every one of them, and serves again.
    let deadline = Instant::now() + Duration::from_secs(60);
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
        // What the broker had sent, then the end of the connection (a straggler that got its
        // slot late is cut off one write timeout later).
        let mut sink = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(35), s.read_to_end(&mut sink)).await;
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
    // More connections than the API serves at once, from three clients (whose shares together
    // are more than every slot), each sending the start of a change and then nothing.
    let mut slow = Vec::new();
    for i in 0..MAX_REQUESTS + 8 {
        let mut s = connect_from(one_of_three(i), addr, None).await;
        let head = format!(
            "PUT /api/queues/slow-{i} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{{\"max_del"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        slow.push(s);
    }
    refused_from(
        [127, 0, 0, 9],
        addr,
        Duration::from_secs(10),
        "every slot held by a slow upload",
    )
    .await;
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

/// The source address of the `i`th of connections spread over three clients.
fn one_of_three(i: usize) -> [u8; 4] {
    [127, 0, 0, 1 + (i % 3) as u8]
}

/// Asks for the console's page from `source` until it is refused (429), for at most `within`; the
/// refusal. The page takes a slot like any API request but reads nothing from the store, so a
/// probe that gets a slot gives it back at once rather than waiting behind the browses that
/// hold the others.
async fn refused_from(source: [u8; 4], addr: SocketAddr, within: Duration, why: &str) -> Answer {
    let deadline = Instant::now() + within;
    loop {
        let a = call_from(source, addr, "GET", "/", b"").await;
        if a.status == 429 {
            return a;
        }
        assert_eq!(a.status, 200, "{}", a.head);
        assert!(Instant::now() < deadline, "never refused: {why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn one_address_over_its_share_is_refused_while_other_addresses_are_served() {
    // Four slots from the command line, so half of them (the default share) is two; answers
    // that wait for their readers hold their slots for a minute.
    let (server, addr) = start_with(&[
        "--http-max-requests",
        "4",
        "--http-write-timeout-ms",
        "60000",
    ]);
    let page = wide_queue(&server, addr).await;
    // One client (127.0.0.1) asks for large answers on two connections and reads none.
    let mut stuck = Vec::new();
    for _ in 0..2 {
        stuck.push(never_reads_from([127, 0, 0, 1], addr, page, 8).await);
    }
    // Its next request is refused, saying that its own share is full...
    let own = refused_from(
        [127, 0, 0, 1],
        addr,
        Duration::from_secs(10),
        "a client holding its share",
    )
    .await;
    let body = own.json();
    assert_eq!(body["error"], "ServerFull", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("127.0.0.1")
            && message.contains("share")
            && message.contains("of the HTTP API's 4"),
        "{message}"
    );
    assert!(
        own.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        own.head
    );
    // ... while another client (127.0.0.2) is served, and so are the health checks.
    let other = call_from([127, 0, 0, 2], addr, "GET", "/api/overview", b"").await;
    assert_eq!(other.status, 200, "{}", other.head);
    assert_eq!(get(addr, "/healthz").await.status, 200);
    // The second client takes its share too: every one of the 4 slots is held, and a third
    // client is refused because the API is full, not because of its share.
    for _ in 0..2 {
        stuck.push(never_reads_from([127, 0, 0, 2], addr, page, 8).await);
    }
    let full = refused_from(
        [127, 0, 0, 3],
        addr,
        Duration::from_secs(10),
        "every slot held",
    )
    .await;
    let message = full.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("serving 4 requests already") && !message.contains("share"),
        "{message}"
    );
    // Gone, the stuck clients give their slots and shares back.
    drop(stuck);
    served_within(
        [127, 0, 0, 1],
        addr,
        Duration::from_secs(10),
        "the share is never given back",
    )
    .await;
    assert_eq!(get(addr, "/api/queues/wide").await.json()["ready"], 24);
}

#[tokio::test]
async fn slots_and_timeouts_follow_the_command_line() {
    // Two slots, both of which one address may take (clients behind one proxy); answers and
    // bodies wait a second, not the default 10 and 30.
    let (server, addr) = start_with(&[
        "--http-max-requests",
        "2",
        "--http-max-requests-per-address",
        "2",
        "--http-write-timeout-ms",
        "1000",
        "--http-body-timeout-ms",
        "1000",
    ]);
    let page = wide_queue(&server, addr).await;
    let mut stuck = Vec::new();
    for _ in 0..2 {
        stuck.push(never_reads_from([127, 0, 0, 1], addr, page, 8).await);
    }
    let full = refused_from(
        [127, 0, 0, 2],
        addr,
        Duration::from_secs(10),
        "two slots held by one address",
    )
    .await;
    let message = full.json()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("serving 2 requests already"), "{message}");
    // The readers that never read are cut off after a second, and the API serves again.
    served_within(
        [127, 0, 0, 2],
        addr,
        Duration::from_secs(6),
        "readers that never read still hold the slots",
    )
    .await;
    // A body that stops half way is answered 408 after a second.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(
        b"PUT /api/queues/slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\
          Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"max_del",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut all))
        .await
        .expect("the slow upload is cut off")
        .unwrap();
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "408 after {:?}",
        started.elapsed()
    );
    assert_eq!(get(addr, "/api/queues/slow").await.status, 404);
}

#[tokio::test]
async fn the_page_size_follows_the_command_line() {
    let (server, addr) = start_with(&["--http-max-page-bytes", "150000"]);
    assert_eq!(call(addr, "PUT", "/api/queues/wide", b"").await.status, 200);
    let sent = fill(&server, "filler", &["wide"], 24, 64 << 10).await;
    // A page holds at most 150,000 bytes of JSON: two of the 64 KiB messages (about 66 KB each
    // as JSON), not 24.
    let (counts, ids) = every_page(addr, "/api/queues/wide/messages?limit=24").await;
    assert_eq!(counts, vec![2; 12]);
    assert_eq!(ids, sent);
}

#[test]
fn zero_and_absurd_http_bounds_refuse_to_start_naming_the_setting() {
    for (flags, env, want) in [
        (
            &["--http-max-requests", "0"][..],
            &[][..],
            "invalid http_max_requests = '0' (from command line): must be between 1 and 100000",
        ),
        (
            &["--http-max-requests", "4", "--http-max-requests-per-address", "5"][..],
            &[][..],
            "invalid http_max_requests_per_address = '5' (from command line): must be between 1 and http_max_requests (4)",
        ),
        (
            &["--http-max-requests-per-address", "0"][..],
            &[][..],
            "invalid http_max_requests_per_address = '0'",
        ),
        (
            &[][..],
            &[("FERRY_HTTP_WRITE_TIMEOUT_MS", "0")][..],
            "invalid http_write_timeout_ms = '0' (from environment): must be between 100 and 3600000",
        ),
        (
            &["--http-body-timeout-ms", "86400000"][..],
            &[][..],
            "invalid http_body_timeout_ms = '86400000'",
        ),
        (
            &["--http-max-page-bytes", "100"][..],
            &[][..],
            "invalid http_max_page_bytes = '100' (from command line): must be between 65536 and 1073741824",
        ),
    ] {
        let err = refused_at_start(flags, env);
        assert!(err.contains(want), "{flags:?} {env:?}: {err}");
    }
}
