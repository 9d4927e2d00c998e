//! The HTTP listener (management API, metrics, console) under attack and misfortune, against
//! the real binary: malformed requests, oversized headers, URLs and bodies, slow-loris
//! clients, connection floods, clients that vanish mid-request or mid-response, unknown routes,
//! hostile JSON, DNS rebinding and cross-site requests. Each ends in a precise status (JSON
//! with the protocol's error code where the API answers) or a closed connection; the broker
//! keeps serving, with bounded memory.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::start;
use ferry_hostile::rss_bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back on a raw connection: the bytes read, and whether the server closed it
/// (within `wait`).
struct Answer {
    text: String,
    closed: bool,
}

impl Answer {
    fn status(&self) -> u16 {
        self.text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// The JSON body, if the answer has one.
    fn json(&self) -> serde_json::Value {
        let body = self.text.split("\r\n\r\n").nth(1).unwrap_or("");
        // A chunked body: take the JSON between the first chunk size line and the end.
        let start = body.find('{').unwrap_or(0);
        let end = body.rfind('}').map_or(body.len(), |e| e + 1);
        serde_json::from_str(body.get(start..end).unwrap_or("")).unwrap_or_default()
    }
}

/// Reads from `s` until the server closes it or `wait` passes.
async fn read_answer(s: &mut TcpStream, wait: Duration) -> Answer {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + wait;
    let closed = loop {
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => break false,
        }
    };
    Answer {
        text: String::from_utf8_lossy(&buf).into_owned(),
        closed,
    }
}

/// Sends `bytes` on a new connection and reads the answer.
async fn exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Answer {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // The server may close before reading everything (an oversized head): that is an answer.
    let _ = s.write_all(bytes).await;
    read_answer(&mut s, wait).await
}

/// A complete request with `Connection: close`.
fn request(method: &str, path: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// The broker still answers a plain request.
async fn healthy(addr: SocketAddr) {
    let a = exchange(
        addr,
        &request("GET", "/healthz", "", b""),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(a.status(), 200, "healthz after the attack: {}", a.text);
}

const SHORT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn malformed_requests_get_400_and_a_closed_connection() {
    let (_server, addr) = start();
    let cases: [&[u8]; 6] = [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHo\x00st: 127.0.0.1\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello",
        b"POST /api/queues/q/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 9\r\n\r\nhello",
    ];
    for bytes in cases {
        let a = exchange(addr, bytes, SHORT).await;
        assert!(
            a.closed,
            "{:?}: the connection stays open",
            String::from_utf8_lossy(bytes)
        );
        let status = a.status();
        assert!(
            status == 400 || status == 505 || (status == 0 && a.text.is_empty()),
            "{:?}: {}",
            String::from_utf8_lossy(bytes),
            a.text
        );
    }
    healthy(addr).await;
}

#[tokio::test]
async fn oversized_heads_are_refused_before_they_are_read() {
    let (server, addr) = start();
    let pid = server.pid().unwrap();
    let before = rss_bytes(pid).unwrap();
    // One header of 1 MiB, a thousand headers, a URL of 1 MiB.
    let big = "a".repeat(1 << 20);
    let many: String = (0..1000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases = [
        format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {big}\r\n\r\n"),
        format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{many}\r\n"),
        format!("GET /api/queues/{big} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
    ];
    for case in &cases {
        let a = exchange(addr, case.as_bytes(), SHORT).await;
        assert!(a.closed, "an oversized head leaves the connection open");
        assert!(
            [400, 414, 431].contains(&a.status()) || a.text.is_empty(),
            "oversized head answered: {}",
            a.text.lines().next().unwrap_or("")
        );
    }
    let grown = rss_bytes(pid).unwrap().saturating_sub(before);
    assert!(grown < 32 << 20, "memory grew by {grown} bytes");
    healthy(addr).await;
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_without_being_read() {
    let (server, addr) = start();
    let pid = server.pid().unwrap();
    let before = rss_bytes(pid).unwrap();
    // Announced too large: refused at once, before a byte of the body is sent.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"POST /api/queues/q/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n",
    )
    .await
    .unwrap();
    let a = read_answer(&mut s, SHORT).await;
    assert_eq!(a.status(), 413, "{}", a.text);
    assert_eq!(a.json()["error"], "TooLarge", "{}", a.text);
    // Chunked, with no length announced: refused once the limit is crossed.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"POST /api/definitions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 1 << 20, " ".repeat(1 << 20));
    let mut answer = None;
    for _ in 0..16 {
        if s.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
        let a = read_answer(&mut s, Duration::from_millis(50)).await;
        if !a.text.is_empty() {
            answer = Some(a);
            break;
        }
    }
    let a = match answer {
        Some(a) => a,
        None => read_answer(&mut s, SHORT).await,
    };
    assert_eq!(a.status(), 413, "{}", a.text);
    assert_eq!(a.json()["error"], "TooLarge", "{}", a.text);
    let grown = rss_bytes(pid).unwrap().saturating_sub(before);
    assert!(grown < 32 << 20, "memory grew by {grown} bytes");
    healthy(addr).await;
}

#[tokio::test]
async fn hostile_json_and_paths_get_precise_json_errors() {
    let (_server, addr) = start();
    let json = "Content-Type: application/json\r\n";
    let deep = "[".repeat(100_000);
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (request("GET", "/nope", "", b""), 404, "UnknownRequest"),
        (
            request("BREW", "/api/queues", "", b""),
            405,
            "InvalidArgument",
        ),
        (
            request("GET", "/console/..%2f..%2fetc%2fpasswd", "", b""),
            404,
            "NotFound",
        ),
        (
            request("GET", "/api/queues/%FF%FE", "", b""),
            400,
            "InvalidArgument",
        ),
        (
            request("PUT", "/api/queues/q", json, b"{not json"),
            400,
            "InvalidArgument",
        ),
        (
            request("PUT", "/api/queues/q", json, deep.as_bytes()),
            400,
            "InvalidArgument",
        ),
        (
            request("PUT", "/api/queues/q", json, br#"{"max_deliveries": -1}"#),
            400,
            "InvalidArgument",
        ),
        (
            request("PUT", "/api/queues/q", json, br#"{"surprise": true}"#),
            400,
            "InvalidArgument",
        ),
        (
            request("POST", "/api/queues/q/messages", "", br#"{"body": "x"}"#),
            400,
            "InvalidArgument",
        ),
        (
            request("DELETE", "/api/queues/q/messages/-1", "", b""),
            400,
            "InvalidArgument",
        ),
        (
            request(
                "GET",
                "/api/queues/q/messages?limit=99999999999999999999",
                "",
                b"",
            ),
            400,
            "InvalidArgument",
        ),
        (
            request("GET", &format!("/api/queues/{}", "n".repeat(300)), "", b""),
            404,
            "QueueNotFound",
        ),
        (
            request("PUT", &format!("/api/queues/{}", "n".repeat(300)), "", b""),
            400,
            "InvalidArgument",
        ),
        (
            request("GET", "/api/queues/q/messages?selector=a%20%3D", "", b""),
            400,
            "InvalidArgument",
        ),
    ];
    for (bytes, status, code) in cases {
        let a = exchange(addr, &bytes, SHORT).await;
        let first = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).into_owned();
        assert_eq!(a.status(), status, "{first}: {}", a.text);
        assert_eq!(a.json()["error"], code, "{first}: {}", a.text);
        assert!(
            a.json()["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{first}: {}",
            a.text
        );
    }
    healthy(addr).await;
}

#[tokio::test]
async fn dns_rebinding_and_cross_site_requests_are_refused() {
    let (_server, addr) = start();
    // A page whose name now points at 127.0.0.1 sends its own host name.
    let a = exchange(
        addr,
        b"GET /api/queues HTTP/1.1\r\nHost: evil.example:6731\r\nConnection: close\r\n\r\n",
        SHORT,
    )
    .await;
    assert_eq!(a.status(), 403, "{}", a.text);
    assert_eq!(a.json()["error"], "Unauthorized");
    // A form on another site posting through the browser: Origin names that site.
    let purge = request(
        "PUT",
        "/api/queues/victim",
        "Origin: http://evil.example\r\n",
        b"",
    );
    let a = exchange(addr, &purge, SHORT).await;
    assert_eq!(a.status(), 403, "{}", a.text);
    let a = exchange(
        addr,
        &request(
            "PUT",
            "/api/queues/victim",
            "Sec-Fetch-Site: cross-site\r\n",
            b"",
        ),
        SHORT,
    )
    .await;
    assert_eq!(a.status(), 403, "{}", a.text);
    // The console's own requests (same origin) and tools (no Origin) are served.
    let own = request(
        "PUT",
        "/api/queues/victim",
        "Origin: http://127.0.0.1\r\nSec-Fetch-Site: same-origin\r\n",
        b"",
    );
    assert_eq!(exchange(addr, &own, SHORT).await.status(), 200);
    let a = exchange(addr, &request("GET", "/api/queues/victim", "", b""), SHORT).await;
    assert_eq!(a.status(), 200, "{}", a.text);
}

#[tokio::test]
async fn slow_loris_clients_are_cut_off_and_others_still_served() {
    let (_server, addr) = start();
    // 40 clients trickle a request head, one byte a second: the server hangs up on each after
    // the header timeout (10 s), and serves others meanwhile.
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHo").await.unwrap();
        slow.push(s);
    }
    healthy(addr).await;
    let drip = tokio::spawn(async move {
        let mut closed = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !slow.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut still = Vec::new();
            for mut s in slow {
                let mut b = [0u8; 512];
                let gone =
                    match tokio::time::timeout(Duration::from_millis(1), s.read(&mut b)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => true,
                        Ok(Ok(_)) => true,
                        Err(_) => s.write_all(b"s").await.is_err(),
                    };
                if gone {
                    closed += 1;
                } else {
                    still.push(s);
                }
            }
            slow = still;
        }
        closed
    });
    let closed = drip.await.unwrap();
    assert_eq!(closed, 40, "every slow client was cut off");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(9),
        "cut off after the header timeout, not before ({took:?})"
    );
    healthy(addr).await;
}

#[tokio::test]
async fn connection_floods_are_bounded_and_service_returns() {
    let (server, addr) = start();
    let pid = server.pid().unwrap();
    let before = rss_bytes(pid).unwrap();
    // 400 idle connections against a limit of 256: the ones over the limit are closed at
    // once; the rest are closed by the header timeout.
    let mut flood = Vec::new();
    for _ in 0..400 {
        match TcpStream::connect(addr).await {
            Ok(s) => flood.push(s),
            Err(_) => break,
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut refused = 0;
    for s in &mut flood {
        let mut b = [0u8; 16];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(2), s.read(&mut b)).await {
            refused += 1;
        }
    }
    assert!(
        refused >= 400 - 256,
        "only {refused} of 400 connections were refused at the limit"
    );
    let grown = rss_bytes(pid).unwrap().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "memory grew by {grown} bytes under the flood"
    );
    // The idle ones are let go by the header timeout; then the API serves again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(&request("GET", "/healthz", "", b"")).await;
        if read_answer(&mut s, Duration::from_secs(1)).await.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the API never served again");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(flood);
    healthy(addr).await;
}

#[tokio::test]
async fn clients_vanishing_mid_request_or_mid_response_leak_nothing() {
    let (server, addr) = start();
    let pid = server.pid().unwrap();
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    // Something big to answer: a page of 1000 messages of 4 KiB.
    let mut setup = TcpStream::connect(addr).await.unwrap();
    setup
        .write_all(&request("PUT", "/api/queues/big", "", b""))
        .await
        .unwrap();
    read_answer(&mut setup, SHORT).await;
    let client = ferry_client::Client::connect(&server.addr().to_string(), "filler")
        .await
        .unwrap();
    let body = "x".repeat(4096);
    let msgs: Vec<ferry_protocol::OutgoingMessage> = (0..1000)
        .map(|_| ferry_protocol::OutgoingMessage::new("big", body.clone()))
        .collect();
    client.send_batch(msgs).await.unwrap();
    drop(client);
    let base_fds = fds();
    let before = rss_bytes(pid).unwrap();
    for i in 0..200 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            // Half a body, then gone.
            let _ = s
                .write_all(
                    b"PUT /api/queues/half HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"max_del",
                )
                .await;
        } else {
            // A large answer asked for and never read.
            let _ = s
                .write_all(&request(
                    "GET",
                    "/api/queues/big/messages?limit=1000",
                    "",
                    b"",
                ))
                .await;
            let mut b = [0u8; 10];
            let _ = s.read(&mut b).await;
        }
        drop(s);
    }
    // Their connections end and their slots come back.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fds() > base_fds + 2 {
        assert!(
            Instant::now() < deadline,
            "{} descriptors left open (were {base_fds})",
            fds()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let grown = rss_bytes(pid).unwrap().saturating_sub(before);
    assert!(grown < 64 << 20, "memory grew by {grown} bytes");
    // Nothing half-done took effect, and nothing was consumed by the abandoned browses.
    let a = exchange(addr, &request("GET", "/api/queues/half", "", b""), SHORT).await;
    assert_eq!(a.status(), 404, "{}", a.text);
    let a = exchange(addr, &request("GET", "/api/queues/big", "", b""), SHORT).await;
    assert_eq!(a.json()["ready"], 1000, "{}", a.text);
}
