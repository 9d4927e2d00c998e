//! The STOMP listener (TCP, and WebSocket at /stomp on the HTTP listener) under attack and
//! misfortune, against the real binary: malformed frames, a missing NUL, headers and bodies
//! over the limits, unknown commands, frames before CONNECT, bad versions, bad destinations,
//! floods of frames and of connections, slow readers, slow-loris frames, silent clients and
//! clients that vanish. Each ends in an ERROR frame with a precise `message` and a closed
//! connection; the broker keeps serving everyone else, with bounded memory, and loses nothing.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry_hostile::rss_bytes;
use ferry_stomp::codec::{self, Command, Frame, Item, Limits, Version};
use ferry_testkit::BinaryServer;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(20);

fn start(extra: &[&str]) -> (BinaryServer, SocketAddr) {
    let server = BinaryServer::start(extra).expect("ferry serve starts (cargo build -p ferry)");
    let stomp = server.stomp_addr().expect("the STOMP listener is on");
    (server, stomp)
}

/// A raw STOMP connection.
struct Raw {
    s: TcpStream,
    buf: BytesMut,
    /// Frames read while waiting for a receipt (a MESSAGE may come before the receipt of
    /// the SEND that caused it), handed out first.
    stash: std::collections::VecDeque<Frame>,
}

impl Raw {
    async fn open(addr: SocketAddr) -> Raw {
        Raw {
            s: TcpStream::connect(addr).await.expect("connect"),
            buf: BytesMut::new(),
            stash: Default::default(),
        }
    }

    /// Connected with STOMP 1.2 (and `extra` CONNECT headers).
    async fn connected(addr: SocketAddr, extra: &str) -> Raw {
        let mut r = Raw::open(addr).await;
        r.write(format!("CONNECT\naccept-version:1.2\nhost:/\n{extra}\n\0").as_bytes())
            .await;
        let f = r.frame().await.expect("CONNECTED");
        assert_eq!(f.command, Command::Connected, "{f:?}");
        r
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.expect("write");
    }

    /// The next frame, or `None` when the server closed the connection first.
    async fn frame(&mut self) -> Option<Frame> {
        if let Some(f) = self.stash.pop_front() {
            return Some(f);
        }
        let limits = Limits::with_body(8 << 20);
        loop {
            match codec::decode(&mut self.buf, Version::V1_2, &limits).expect("server frames parse")
            {
                Some(Item::Frame(f)) => return Some(f),
                Some(Item::Heartbeat) => continue,
                None => {}
            }
            let n = tokio::time::timeout(WAIT, self.s.read_buf(&mut self.buf))
                .await
                .expect("the server answers in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    /// The ERROR frame the server answers with; the connection must then be closed.
    async fn error_then_closed(&mut self) -> Frame {
        let f = loop {
            let f = self.frame().await.expect("an ERROR frame before the close");
            if f.command == Command::Error {
                break f;
            }
        };
        assert!(self.frame().await.is_none(), "closed after the ERROR");
        f
    }

    async fn receipt(&mut self, id: &str) {
        let mut skipped = std::collections::VecDeque::new();
        loop {
            let f = self.frame().await.expect("a RECEIPT");
            assert_ne!(f.command, Command::Error, "{f:?}");
            if f.command == Command::Receipt {
                assert_eq!(f.header("receipt-id"), Some(id));
                skipped.append(&mut self.stash);
                self.stash = skipped;
                return;
            }
            skipped.push_back(f);
        }
    }
}

fn message(f: &Frame) -> &str {
    f.header("message").unwrap_or_default()
}

/// A healthy client still sends and receives (other sessions are unaffected).
async fn still_serves(addr: SocketAddr) {
    let mut c = Raw::connected(addr, "").await;
    c.write(b"SUBSCRIBE\nid:1\ndestination:/queue/healthy\n\n\0SEND\ndestination:/queue/healthy\nreceipt:h\n\nalive\0")
        .await;
    c.receipt("h").await;
    let m = c.frame().await.expect("MESSAGE");
    assert_eq!((m.command, &m.body[..]), (Command::Message, &b"alive"[..]));
    c.write(b"DISCONNECT\nreceipt:bye\n\n\0").await;
    c.receipt("bye").await;
}

#[tokio::test]
async fn malformed_frames_get_an_error_and_a_closed_connection() {
    let (_server, addr) = start(&[]);
    let cases: [(&[u8], &str); 7] = [
        (b"HELLO\n\n\0", "unknown command"),
        (
            b"SEND\ndestination:/queue/q\ncontent-length:2\n\nabc\0",
            "nul",
        ),
        (b"SEND\nno colon here\n\n\0", "header"),
        (b"SEND\ncontent-length:x\n\n\0", "content-length"),
        (b"SUBSCRIBE\nid:1\n\nbody on a subscribe\0", "body"),
        (b"SEND\ndestination:/queue/q\nx:\\t\n\n\0", "escape"),
        (b"MESSAGE\ndestination:/queue/q\n\n\0", "server frame"),
    ];
    for (bytes, expect) in cases {
        let mut c = Raw::connected(addr, "").await;
        c.write(bytes).await;
        let e = c.error_then_closed().await;
        assert!(
            message(&e).to_lowercase().contains(expect),
            "{:?}: {}",
            String::from_utf8_lossy(bytes),
            message(&e)
        );
        assert!(!e.body.is_empty(), "the ERROR has a body");
    }
    still_serves(addr).await;
}

#[tokio::test]
async fn before_connect_only_connect_is_accepted() {
    let (_server, addr) = start(&[]);
    let mut c = Raw::open(addr).await;
    c.write(b"SEND\ndestination:/queue/q\n\nx\0").await;
    assert!(message(&c.error_then_closed().await).contains("expected CONNECT"));
    let mut c = Raw::open(addr).await;
    c.write(b"CONNECT\naccept-version:2.0\n\n\0").await;
    assert!(message(&c.error_then_closed().await).contains("version"));
    let mut c = Raw::open(addr).await;
    c.write(b"CONNECT\naccept-version:1.2\nheart-beat:x\n\n\0")
        .await;
    assert!(message(&c.error_then_closed().await).contains("heart-beat"));
    let mut c = Raw::connected(addr, "").await;
    c.write(b"CONNECT\naccept-version:1.2\n\n\0").await;
    assert!(message(&c.error_then_closed().await).contains("already connected"));
}

#[tokio::test]
async fn oversized_frames_are_refused_before_they_arrive() {
    let (_server, addr) = start(&[]);
    // The broker's 1 MiB body limit, advertised in CONNECTED.
    let mut c = Raw::open(addr).await;
    c.write(b"CONNECT\naccept-version:1.2\n\n\0").await;
    let connected = c.frame().await.expect("CONNECTED");
    assert_eq!(connected.header("ferry-max-body-bytes"), Some("1048576"));
    // Announced: refused before one body byte is sent.
    c.write(b"SEND\ndestination:/queue/big\ncontent-length:1048577\n\n")
        .await;
    assert!(message(&c.error_then_closed().await).contains("body larger"));
    // Found: a body without content-length that grows past the limit.
    let mut c = Raw::connected(addr, "").await;
    c.write(b"SEND\ndestination:/queue/big\n\n").await;
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..40 {
        if c.s.write_all(&chunk).await.is_err() {
            break;
        }
    }
    assert!(message(&c.error_then_closed().await).contains("body larger"));
    // A header line over 16 KiB, and more than 256 headers.
    let mut c = Raw::connected(addr, "").await;
    let long = format!(
        "SEND\ndestination:/queue/q\nx:{}\n\n\0",
        "y".repeat(17 * 1024)
    );
    c.write(long.as_bytes()).await;
    assert!(message(&c.error_then_closed().await).contains("header line"));
    let mut c = Raw::connected(addr, "").await;
    let many: String = (0..300).map(|i| format!("h{i}:v\n")).collect();
    c.write(format!("SEND\ndestination:/queue/q\n{many}\n\0").as_bytes())
        .await;
    assert!(message(&c.error_then_closed().await).contains("headers"));
    still_serves(addr).await;
}

#[tokio::test]
async fn bad_and_missing_destinations_are_errors() {
    let (_server, addr) = start(&["--stomp-auto-create", "false"]);
    for (frame, expect) in [
        ("SEND\ndestination:/exchange/x\n\n\0", "unknown destination"),
        ("SEND\n\nno destination\0", "missing header 'destination'"),
        (
            "SEND\ndestination:/queue/missing\nreceipt:r\n\n\0",
            "does not exist",
        ),
        (
            "SUBSCRIBE\nid:1\ndestination:/topic/missing\n\n\0",
            "does not exist",
        ),
        (
            "SEND\ndestination:/queue/bad name!\n\n\0",
            "invalid queue name",
        ),
        (
            "SUBSCRIBE\nid:1\ndestination:/queue/q\nack:sometimes\n\n\0",
            "ack mode",
        ),
        ("ACK\nid:12345\n\n\0", "no unacknowledged message"),
        ("COMMIT\ntransaction:t\n\n\0", "no open transaction"),
    ] {
        let mut c = Raw::connected(addr, "").await;
        c.write(frame.as_bytes()).await;
        let e = c.error_then_closed().await;
        assert!(message(&e).contains(expect), "{frame:?}: {}", message(&e));
        if frame.contains("receipt:r") {
            assert_eq!(e.header("receipt-id"), Some("r"));
        }
    }
}

#[tokio::test]
async fn a_flood_of_sends_loses_nothing() {
    let (_server, addr) = start(&[]);
    let mut c = Raw::connected(addr, "").await;
    let n = 5000;
    let mut flood = Vec::new();
    for i in 0..n {
        flood.extend_from_slice(format!("SEND\ndestination:/queue/flood\n\nm{i}\0").as_bytes());
    }
    flood.extend_from_slice(b"SEND\ndestination:/queue/flood\nreceipt:last\n\nlast\0");
    c.write(&flood).await;
    c.receipt("last").await;
    let mut r = Raw::connected(addr, "").await;
    r.write(b"SUBSCRIBE\nid:1\ndestination:/queue/flood\nack:client-individual\nactivemq.prefetchSize:10000\n\n\0")
        .await;
    for i in 0..n {
        let m = r.frame().await.expect("every message");
        assert_eq!(m.body, format!("m{i}").as_bytes(), "in order, none lost");
    }
    assert_eq!(&r.frame().await.expect("the last").body[..], b"last");
}

#[tokio::test]
async fn a_flood_of_connections_that_vanish_leaves_the_broker_serving() {
    let (server, addr) = start(&[]);
    let before = rss_bytes(server.pid().expect("pid")).expect("rss");
    for round in 0..10 {
        let mut conns = Vec::new();
        for _ in 0..50 {
            let mut c = Raw::open(addr).await;
            // Half of them vanish mid-frame, the others right after CONNECT.
            if round % 2 == 0 {
                c.write(b"CONNECT\naccept-").await;
            } else {
                c.write(b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:/queue/v\n\nx")
                    .await;
            }
            conns.push(c);
        }
        for c in conns {
            let _ = c.s.set_zero_linger();
            drop(c);
        }
    }
    still_serves(addr).await;
    let after = rss_bytes(server.pid().expect("pid")).expect("rss");
    assert!(
        after < before + 64 * 1024 * 1024,
        "memory grew from {before} to {after}"
    );
}

#[tokio::test]
async fn a_client_that_vanishes_gives_its_unacknowledged_messages_back_at_once() {
    let (_server, addr) = start(&[]);
    let mut p = Raw::connected(addr, "").await;
    for i in 0..10 {
        p.write(format!("SEND\ndestination:/queue/back\n\nm{i}\0").as_bytes())
            .await;
    }
    p.write(b"SEND\ndestination:/queue/back\nreceipt:sent\n\nm10\0")
        .await;
    p.receipt("sent").await;
    let mut c = Raw::connected(addr, "").await;
    c.write(b"SUBSCRIBE\nid:1\ndestination:/queue/back\nack:client\n\n\0")
        .await;
    for _ in 0..11 {
        c.frame().await.expect("a delivery");
    }
    // Gone without a word (a reset): the lease (60 s) does not matter.
    let _ = c.s.set_zero_linger();
    drop(c);
    let started = Instant::now();
    let mut r = Raw::connected(addr, "").await;
    r.write(b"SUBSCRIBE\nid:1\ndestination:/queue/back\nack:client-individual\n\n\0")
        .await;
    for _ in 0..11 {
        let m = r.frame().await.expect("back in the queue");
        assert_eq!(m.header("redelivered"), Some("true"));
    }
    // Well before the 60 s lease would have returned them.
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// Sends `n` messages of 100 KiB of `fill` to `/queue/{queue}` over STOMP and waits for them
/// all to be stored.
async fn fill(addr: SocketAddr, queue: &str, n: usize, fill: u8) {
    let mut p = Raw::connected(addr, "").await;
    let body = String::from_utf8(vec![fill; 100 * 1024]).expect("ASCII");
    for i in 0..n {
        let receipt = if i + 1 == n { "receipt:all\n" } else { "" };
        p.write(format!("SEND\ndestination:/queue/{queue}\n{receipt}\n{body}\0").as_bytes())
            .await;
    }
    p.receipt("all").await;
}

#[tokio::test]
async fn a_slow_reader_costs_bounded_memory_and_loses_nothing() {
    let (server, addr) = start(&[]);
    let pid = server.pid().expect("pid");
    fill(addr, "slow", 300, b'z').await;
    let body = "z".repeat(100 * 1024);
    let before = rss_bytes(pid).expect("rss");
    // Subscribes to 30 MB and reads nothing: the broker holds at most the subscription's
    // prefetch (100 messages, 10 MB) and the writer's short queue for it.
    let mut slow = Raw::connected(addr, "").await;
    slow.write(b"SUBSCRIBE\nid:1\ndestination:/queue/slow\nack:client-individual\nactivemq.prefetchSize:100\n\n\0")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = rss_bytes(pid).expect("rss");
    assert!(
        during < before + 32 * 1024 * 1024,
        "a reader of nothing held {} bytes of the broker's memory",
        during.saturating_sub(before)
    );
    still_serves(addr).await;
    drop(slow);
    // Nothing was lost: all 300 are still there for the next reader.
    let mut r = Raw::connected(addr, "").await;
    r.write(b"SUBSCRIBE\nid:1\ndestination:/queue/slow\nack:auto\n\n\0")
        .await;
    for _ in 0..300 {
        assert_eq!(
            r.frame().await.expect("every message").body.len(),
            body.len()
        );
    }
}

/// An auto-ack subscriber with a huge prefetch that reads nothing: what the broker holds for it
/// is bounded by the session's outbound byte budget (`max_outbound_bytes`), not by the
/// prefetch, and the messages it was never written stay in the queue.
#[tokio::test]
async fn an_auto_ack_reader_of_nothing_is_held_to_the_byte_budget() {
    let (server, addr) = start(&["--max-outbound-bytes", "1048576"]);
    let pid = server.pid().expect("pid");
    fill(addr, "budget", 400, b'y').await;
    let before = rss_bytes(pid).expect("rss");
    let mut slow = Raw::connected(addr, "").await;
    slow.write(
        b"SUBSCRIBE\nid:1\ndestination:/queue/budget\nack:auto\nactivemq.prefetchSize:10000\n\n\0",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = rss_bytes(pid).expect("rss");
    assert!(
        during < before + 16 * 1024 * 1024,
        "an auto-ack reader of nothing held {} bytes of the broker's memory (40 MB queued)",
        during.saturating_sub(before)
    );
    // Most of the 40 MB were never taken: the queue still has them.
    let mut browse = Raw::connected(addr, "").await;
    browse
        .write(b"SUBSCRIBE\nid:b\ndestination:/queue/budget\nack:client-individual\nactivemq.prefetchSize:1000\n\n\0")
        .await;
    let mut seen = 0;
    while seen < 300 {
        let f = browse.frame().await.expect("a MESSAGE");
        assert_eq!(f.command, Command::Message);
        seen += 1;
    }
    still_serves(addr).await;
    drop(slow);
}

#[tokio::test]
async fn silent_and_slow_clients_are_closed_with_a_reason() {
    let (_server, addr) = start(&[
        "--read-timeout-ms",
        "1000",
        "--handshake-timeout-ms",
        "1000",
    ]);
    // No CONNECT.
    let mut c = Raw::open(addr).await;
    assert!(message(&c.error_then_closed().await).contains("CONNECT"));
    // A frame that never ends (slow-loris).
    let mut c = Raw::connected(addr, "").await;
    c.write(b"SEND\ndestination:/queue/q\n").await;
    assert!(message(&c.error_then_closed().await).contains("not completed in time"));
    // Promised heart-beats that never come.
    let mut c = Raw::connected(addr, "heart-beat:1000,0\n").await;
    let started = Instant::now();
    assert!(message(&c.error_then_closed().await).contains("heart-beat"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "closed after about 2 s"
    );
    still_serves(addr).await;
}

/// A page from another origin, or a request naming a host that is not loopback (DNS
/// rebinding), may not open a STOMP WebSocket: 403 before the upgrade. A page of the broker's
/// own address may.
#[tokio::test]
async fn websocket_pages_from_elsewhere_are_refused() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let (server, _) = start(&[]);
    let http = server.http_addr().expect("HTTP on");
    let url = format!("ws://{http}/stomp");
    let with = |name: &'static str, value: String| {
        let mut req = url.as_str().into_client_request().expect("request");
        req.headers_mut()
            .insert(name, value.parse().expect("header value"));
        req
    };
    for (name, value) in [
        ("origin", "https://evil.example".to_owned()),
        ("origin", "null".to_owned()),
        ("host", "evil.example".to_owned()),
    ] {
        match tokio_tungstenite::connect_async(with(name, value.clone())).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), 403, "{name}: {value}")
            }
            other => panic!("{name}: {value}: not refused: {:?}", other.map(|_| ())),
        }
    }
    let own = with("origin", format!("http://{http}"));
    let (mut ws, _) = tokio_tungstenite::connect_async(own)
        .await
        .expect("a page of the broker's own address connects");
    ws.send(Message::text("CONNECT\naccept-version:1.2\n\n\0"))
        .await
        .expect("send");
    let first = tokio::time::timeout(WAIT, ws.next()).await.expect("answer");
    assert!(
        matches!(first, Some(Ok(Message::Text(ref t))) if t.starts_with("CONNECTED")),
        "{first:?}"
    );
}

#[tokio::test]
async fn websocket_frames_are_held_to_the_same_rules() {
    let (server, _) = start(&[]);
    let http = server.http_addr().expect("HTTP on");
    let url = format!("ws://{http}/stomp");
    // Malformed: an ERROR message, then the close.
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("upgrade");
    ws.send(Message::text("CONNECT\naccept-version:1.2\n\n\0"))
        .await
        .expect("send");
    ws.send(Message::text("BOGUS\n\n\0")).await.expect("send");
    let mut saw_error = false;
    while let Ok(Some(Ok(m))) = tokio::time::timeout(WAIT, ws.next()).await {
        if let Message::Text(t) = m {
            if t.starts_with("ERROR") {
                assert!(t.contains("unknown command"), "{t}");
                saw_error = true;
            }
        }
    }
    assert!(saw_error, "an ERROR frame before the close");
    // Oversized: a message over the limit closes the connection.
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("upgrade");
    let big = vec![b'x'; 2 << 20];
    let _ = ws.send(Message::binary(big)).await;
    let closed = tokio::time::timeout(WAIT, async {
        loop {
            match ws.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "closed");
    // A plain GET is refused, not upgraded.
    let mut s = TcpStream::connect(http).await.expect("connect");
    s.write_all(format!("GET /stomp HTTP/1.1\r\nHost: {http}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(WAIT, s.read(&mut buf))
        .await
        .expect("answer")
        .expect("read");
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 4"), "{head}");
    still_serves(server.stomp_addr().expect("stomp")).await;
}

#[tokio::test]
async fn a_websocket_reader_that_pauses_is_held_to_stomps_write_timeout_not_the_apis() {
    let (server, _) = start(&[]);
    let http = server.http_addr().expect("HTTP on");
    // 8 MiB waiting: more than the socket buffers hold for a small receive window.
    let filler = ferry_client::Client::connect(&server.addr().to_string(), "filler")
        .await
        .expect("connect");
    filler.create_queue("paused").await.expect("queue");
    let msgs = (0..2000)
        .map(|_| ferry_protocol::OutgoingMessage::new("paused", vec![b'x'; 4 << 10]))
        .collect();
    for r in filler.send_batch(msgs).await.expect("send") {
        r.expect("sent");
    }
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("buffer");
    let stream = socket.connect(http).await.expect("connect");
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{http}/stomp"), stream)
        .await
        .expect("upgrade");
    ws.send(Message::text(
        "CONNECT\naccept-version:1.2\nhost:/\n\n\0SUBSCRIBE\nid:1\ndestination:/queue/paused\n\n\0",
    ))
    .await
    .expect("send");
    // Read nothing for 15 s: past the HTTP API's write timeout (10 s), short of STOMP's
    // `write_timeout_ms` (30 s). The upgraded connection is STOMP's to bound: it stays open and
    // every message comes once the client reads again.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let mut messages = 0;
    while messages < 2000 {
        match tokio::time::timeout(WAIT, ws.next()).await {
            // A WebSocket message may carry several frames.
            Ok(Some(Ok(Message::Text(t)))) => messages += t.matches("MESSAGE\n").count(),
            Ok(Some(Ok(_))) => {}
            other => panic!("after {messages} messages: {other:?}"),
        }
    }
}

/// An auto-ack reader over WebSocket that reads a few messages and is cut off: what `ack:auto`
/// promises (`docs/stomp.md`) holds there as over TCP. Only what was written to the connection
/// is settled, so the queue keeps what never left the broker, bounded by the session's
/// outbound byte budget (and the socket buffers), and nothing comes twice.
#[tokio::test]
async fn a_websocket_auto_ack_reader_cut_off_loses_only_what_was_written_to_it() {
    let (server, addr) = start(&["--max-outbound-bytes", "1048576"]);
    let http = server.http_addr().expect("HTTP on");
    fill(addr, "wscut", 400, b'w').await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{http}/stomp"))
        .await
        .expect("upgrade");
    ws.send(Message::text("CONNECT\naccept-version:1.2\n\n\0"))
        .await
        .expect("send");
    ws.send(Message::text(
        "SUBSCRIBE\nid:1\ndestination:/queue/wscut\nack:auto\nactivemq.prefetchSize:10000\n\n\0",
    ))
    .await
    .expect("send");
    let mut read = 0u64;
    while read < 5 {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("open")
            .expect("a frame");
        let text = match m {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            _ => continue,
        };
        if text.starts_with("MESSAGE") {
            read += 1;
        }
    }
    // Cut off: no DISCONNECT, no close frame.
    drop(ws);
    let counter = ferry_client::Client::connect(&server.addr().to_string(), "counter")
        .await
        .expect("connect");
    let deadline = Instant::now() + WAIT;
    let left = loop {
        let q = counter
            .list_queues()
            .await
            .expect("list")
            .into_iter()
            .find(|q| q.name == "wscut")
            .expect("the queue");
        // The cut session's unsettled deliveries are back once it is gone.
        if q.in_flight == 0 || Instant::now() > deadline {
            break q.ready + q.in_flight;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(left <= 400 - read, "{left} left after {read} were read");
    assert!(
        left >= 300,
        "{left} of 400 left: the cut reader took more than its budget's worth"
    );
    still_serves(addr).await;
}
