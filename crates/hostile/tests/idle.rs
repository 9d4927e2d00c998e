//! Idle and slow peers: a silent session is closed after 1.5 keep-alive intervals, a frame sent
//! a byte at a time after the read timeout, a connection that never connects after the
//! handshake timeout; the Rust client's and the CLI's sessions stay alive by pinging. And the
//! door: connections per address, new client names per address, old protocol versions.

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry_client::{AckMode, Client, ClientError, ConnectOptions, ErrorCode, Order, ReceiveMode};
use ferry_protocol::requests::{Connect, Receive};
use ferry_protocol::{Request, Response, Source, PROTOCOL_VERSION};
use ferry_testkit::{ferry_bin, BinaryServer, RawConn};

/// The broker's keep-alive maximum and timeouts in these tests.
const KEEPALIVE_MS: u64 = 1000;
const READ_TIMEOUT_MS: u64 = 1000;

fn broker(extra: &[&str]) -> BinaryServer {
    let keepalive = KEEPALIVE_MS.to_string();
    let timeout = READ_TIMEOUT_MS.to_string();
    let mut args = vec![
        "--fsync",
        "never",
        "--keepalive-ms",
        &keepalive,
        "--read-timeout-ms",
        &timeout,
        "--handshake-timeout-ms",
        &timeout,
    ];
    args.extend_from_slice(extra);
    BinaryServer::start(&args).expect("ferry serve starts")
}

fn connect(name: &str, keepalive_ms: u32) -> Connect {
    Connect {
        version: PROTOCOL_VERSION,
        client: name.into(),
        mechanism: String::new(),
        credentials: String::new(),
        keepalive_ms,
        flags: 0,
    }
}

/// Waits for the broker to close `raw` (reading and dropping what it sends); how long after
/// `since` it did.
async fn closed_after(raw: RawConn, since: Instant) -> Duration {
    let mut raw = raw;
    assert!(raw.closed_by_peer().await, "still open after 10 s");
    since.elapsed()
}

#[tokio::test]
async fn a_silent_session_is_closed_after_one_and_a_half_keepalive_intervals() {
    let b = broker(&[]);
    let mut raw = RawConn::open(&b.addr().to_string()).await.expect("opens");
    let reply = raw
        .handshake(connect("silent", 0))
        .await
        .expect("handshake");
    let Response::Connected(c) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(
        u64::from(c.keepalive_ms),
        KEEPALIVE_MS,
        "0 asks for the broker's"
    );
    let after = closed_after(raw, Instant::now()).await;
    assert!(
        after >= Duration::from_millis(KEEPALIVE_MS * 3 / 2 - 100)
            && after < Duration::from_millis(KEEPALIVE_MS * 3 / 2 + 1000),
        "closed after {after:?}"
    );
    // The session ended: its name is free.
    Client::connect(&b.addr().to_string(), "silent")
        .await
        .expect("the name is free");
}

#[tokio::test]
async fn a_session_that_pings_within_its_interval_stays_open() {
    let b = broker(&[]);
    let mut raw = RawConn::open(&b.addr().to_string()).await.expect("opens");
    let reply = raw
        .handshake(connect("pinger", 400))
        .await
        .expect("handshake");
    assert!(
        matches!(reply, Response::Connected(ref c) if c.keepalive_ms == 400),
        "{reply:?}"
    );
    for i in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        raw.send(100 + i, &Request::Ping).await.expect("sent");
        assert_eq!(raw.recv().await.expect("pong").1, Response::Pong);
    }
}

#[tokio::test]
async fn a_frame_sent_a_byte_at_a_time_is_closed_after_the_read_timeout() {
    let b = broker(&[]);
    let mut raw = RawConn::open(&b.addr().to_string()).await.expect("opens");
    // Asks for the longest keep-alive: the read timeout alone must close it.
    let reply = raw
        .handshake(connect("slowloris", 0))
        .await
        .expect("handshake");
    assert!(matches!(reply, Response::Connected(_)));
    let mut frame = BytesMut::new();
    Request::Ping.encode(5, &mut frame);
    let started = Instant::now();
    for byte in frame.iter().take(frame.len() - 1) {
        if raw.send_bytes(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = closed_after(raw, started).await;
    assert!(
        after < Duration::from_millis(READ_TIMEOUT_MS + 1000),
        "closed after {after:?}"
    );
}

#[tokio::test]
async fn a_connection_that_never_connects_is_closed_after_the_handshake_timeout() {
    let b = broker(&[]);
    let mut raw = RawConn::open(&b.addr().to_string()).await.expect("opens");
    let started = Instant::now();
    // Half a connect, then nothing.
    let mut frame = BytesMut::new();
    Request::Connect(connect("never", 0)).encode(1, &mut frame);
    raw.send_bytes(&frame[..frame.len() / 2])
        .await
        .expect("sent");
    let after = closed_after(raw, started).await;
    assert!(
        after < Duration::from_millis(READ_TIMEOUT_MS + 1000),
        "closed after {after:?}"
    );
}

/// The Rust client pings by itself: an idle client and one waiting on a long poll longer than
/// the keep-alive both keep their sessions.
#[tokio::test]
async fn the_rust_client_keeps_an_idle_session_alive() {
    let b = broker(&[]);
    let addr = b.addr().to_string();
    let c = Client::connect_with(ConnectOptions::new(addr.clone(), "idle"))
        .await
        .expect("connects");
    assert_eq!(c.keepalive(), Duration::from_millis(KEEPALIVE_MS));
    c.create_queue("q").await.expect("created");
    tokio::time::sleep(Duration::from_millis(KEEPALIVE_MS * 3)).await;
    c.ping()
        .await
        .expect("still connected after 3 intervals of silence");
    let producer = Client::connect(&addr, "producer").await.expect("connects");
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(KEEPALIVE_MS * 3)).await;
        producer
            .send(ferry_client::OutgoingMessage {
                queues: vec!["q".into()],
                topic: None,
                persistent: true,
                receiver: None,
                priority: 5,
                context: 0,
                properties: Default::default(),
                body: bytes::Bytes::from_static(b"late"),
                ttl_ms: 0,
                delay_ms: 0,
            })
            .await
            .expect("sent");
    });
    let got = c
        .receive(Receive {
            source: Source::Queue("q".into()),
            order: Order::Time,
            mode: ReceiveMode::Take,
            ack: AckMode::Auto,
            wait_ms: 10_000,
            selector: String::new(),
        })
        .await
        .expect("a long poll outlives the keep-alive");
    assert_eq!(got.expect("the message").message.body, "late");
    later.await.expect("producer");
}

/// `ferry recv --wait` longer than the keep-alive: the CLI's session pings while it waits.
#[tokio::test]
async fn the_cli_keeps_its_session_alive_while_it_waits() {
    let b = broker(&[]);
    let addr = b.addr().to_string();
    let admin = Client::connect(&addr, "admin").await.expect("connects");
    admin.create_queue("q").await.expect("created");
    let producer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(KEEPALIVE_MS * 3)).await;
        let out = Command::new(ferry_bin())
            .args(["send", "--server", &addr, "--queue", "q", "hello"])
            .output()
            .expect("ferry send runs");
        assert!(out.status.success(), "{out:?}");
    });
    let recv_addr = b.addr().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(ferry_bin())
            .args([
                "recv", "--server", &recv_addr, "--queue", "q", "--wait", "10s",
            ])
            .output()
            .expect("ferry recv runs")
    })
    .await
    .expect("joined");
    producer.await.expect("producer");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello"),
        "{out:?}"
    );
}

#[tokio::test]
async fn connections_per_address_are_limited() {
    let b = broker(&["--max-connections-per-address", "3"]);
    let addr = b.addr().to_string();
    let mut open = Vec::new();
    for i in 0..3 {
        open.push(
            Client::connect(&addr, &format!("c{i}"))
                .await
                .expect("within the limit"),
        );
    }
    match Client::connect(&addr, "c3").await {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::ServerFull);
            assert!(e.message.contains("127.0.0.1"), "{}", e.message);
        }
        other => panic!("a fourth connection from one address: {other:?}"),
    }
    drop(open.pop());
    // The slot is given back once the broker sees the connection end.
    let started = Instant::now();
    loop {
        match Client::connect(&addr, "c3").await {
            Ok(_) => break,
            Err(e) => assert!(started.elapsed() < Duration::from_secs(2), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn new_client_names_per_address_are_rate_limited_and_known_names_are_not() {
    // One a second, in bursts of ten.
    let b = broker(&["--max-new-clients-per-sec", "1"]);
    let addr = b.addr().to_string();
    for i in 0..10 {
        let c = Client::connect(&addr, &format!("new{i}"))
            .await
            .expect("within the burst");
        c.disconnect().await.expect("disconnects");
    }
    match Client::connect(&addr, "new10").await {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::LimitExceeded);
            assert!(e.message.contains("new client names"), "{}", e.message);
        }
        other => panic!("an eleventh new name: {other:?}"),
    }
    Client::connect(&addr, "new3")
        .await
        .expect("a known name is never refused");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    Client::connect(&addr, "new10")
        .await
        .expect("a token a second");
}

/// A version 2 client (its `Connect` has no keep-alive or flags) is refused clearly, and the
/// connection closed.
#[tokio::test]
async fn a_version_2_connect_is_refused_with_unsupported_version() {
    let b = broker(&[]);
    let mut raw = RawConn::open(&b.addr().to_string()).await.expect("opens");
    // Connect v2 'app', no credentials: the layout version 2 clients send.
    raw.send_bytes(&[
        0x0f, 0, 0, 0, 0x01, 0, 1, 0, 0, 0, 2, 0, 3, 0, b'a', b'p', b'p', 0, 0,
    ])
    .await
    .expect("sent");
    let (rid, reply) = raw.recv().await.expect("an answer");
    assert_eq!(rid, 1);
    let Response::Error(e) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(e.code, ErrorCode::UnsupportedVersion);
    assert!(e.message.contains("version 2"), "{}", e.message);
    assert!(e.message.contains("version 4"), "{}", e.message);
    assert!(raw.closed_by_peer().await);
}

/// Unknown connect flags are refused (a later version's flags must not be half understood).
#[tokio::test]
async fn unknown_connect_flags_are_refused() {
    let b = broker(&[]);
    let mut raw = RawConn::open(&b.addr().to_string()).await.expect("opens");
    let mut c = connect("flags", 0);
    c.flags = 0b10;
    match raw.handshake(c).await.expect("an answer") {
        Response::Error(e) => assert_eq!(e.code, ErrorCode::InvalidArgument),
        other => panic!("{other:?}"),
    }
    let mut c = connect("flags", 0);
    c.flags = ferry_protocol::requests::CONNECT_EPHEMERAL;
    assert!(matches!(
        raw.handshake(c).await.expect("an answer"),
        Response::Connected(_)
    ));
}
