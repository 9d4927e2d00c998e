//! Dead sessions: a connection that ends (reset, end of stream, `Disconnect`) while its session
//! waits (long-poll receives, subscriptions with credit; auto and client ack) takes nothing
//! for it: every message sent afterwards is still there. Its name is free at once, and a
//! `Disconnect` is answered at once even with 30 s waits pending.
//!
//! The one window auto ack cannot close (bytes already in the kernel's buffers of a connection
//! that dies) is bounded by the last test: what the broker had queued for a reset connection
//! beyond those buffers goes back to the queue.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_client::{AckMode, Client, Order, OutgoingMessage, ReceiveMode, Source};
use ferry_protocol::requests::{Receive, Subscribe};
use ferry_protocol::{Request, Response};
use ferry_testkit::{BinaryServer, RawConn};

/// The long polls' wait: far longer than any test.
const WAIT_MS: u32 = 30_000;
/// Pipelined waits per dead session.
const WAITS: u32 = 50;
/// Messages sent once the session is dead.
const SENT: u64 = 100;

fn broker() -> BinaryServer {
    BinaryServer::start(&["--fsync", "never"]).expect("ferry serve starts")
}

fn addr(b: &BinaryServer) -> String {
    b.addr().to_string()
}

/// A connected client that created `queue`.
async fn admin(b: &BinaryServer, queue: &str) -> Client {
    let c = Client::connect(&addr(b), "admin")
        .await
        .expect("admin connects");
    c.create_queue(queue).await.expect("queue created");
    c
}

fn receive(queue: &str, ack: AckMode) -> Request {
    Request::Receive(Receive {
        source: Source::Queue(queue.into()),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack,
        wait_ms: WAIT_MS,
        selector: String::new(),
    })
}

fn subscribe(queue: &str, ack: AckMode) -> Request {
    Request::Subscribe(Subscribe {
        queue: queue.into(),
        order: Order::Time,
        ack,
        prefetch: 100,
        selector: String::new(),
    })
}

fn message(queue: &str, body: String) -> OutgoingMessage {
    OutgoingMessage {
        queues: vec![queue.into()],
        topic: None,
        persistent: true,
        receiver: None,
        priority: 5,
        context: 0,
        properties: Default::default(),
        body: Bytes::from(body),
        ttl_ms: 0,
        delay_ms: 0,
    }
}

/// A session named `name` whose `requests` are all in progress in the broker (a ping sent
/// behind them has been answered, and the broker starts requests in order).
async fn waiting_session(b: &BinaryServer, name: &str, requests: &[Request]) -> RawConn {
    let (mut raw, reply) = RawConn::connect(&addr(b), name).await.expect("connects");
    assert!(matches!(reply, Response::Connected(_)), "{reply:?}");
    for (i, r) in requests.iter().enumerate() {
        raw.send(10 + i as u32, r).await.expect("request sent");
    }
    raw.send(9, &Request::Ping).await.expect("ping sent");
    loop {
        let (rid, resp) = raw.recv().await.expect("the ping is answered");
        if rid == 9 {
            assert_eq!(resp, Response::Pong);
            return raw;
        }
        // Subscribed replies come first.
        assert!(matches!(resp, Response::Subscribed { .. }), "{resp:?}");
    }
}

/// Connects as `name` as soon as the broker lets it; how long that took.
async fn reconnect(b: &BinaryServer, name: &str) -> Duration {
    let started = Instant::now();
    loop {
        match Client::connect(&addr(b), name).await {
            Ok(c) => {
                let _ = c.disconnect().await;
                return started.elapsed();
            }
            Err(e) => {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{name} still cannot connect: {e}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// How a dead session goes.
#[derive(Clone, Copy, Debug)]
enum Death {
    Reset,
    EndOfStream,
}

/// The scenario of issue 21: a session waits with `requests`, dies; then `SENT` messages are
/// sent and acknowledged, half of them at once (while the broker learns of the death), half
/// once the name is free again: all of them must still be on the queue, none taken or leased.
async fn nothing_lost_to(death: Death, requests: impl Fn(&str) -> Vec<Request>) {
    let b = broker();
    let admin = admin(&b, "q").await;
    let raw = waiting_session(&b, "dead", &requests("q")).await;
    match death {
        Death::Reset => raw.reset(),
        Death::EndOfStream => drop(raw),
    }
    for i in 0..SENT / 2 {
        admin
            .send(message("q", format!("m{i}")))
            .await
            .expect("send acknowledged");
    }
    let free_after = reconnect(&b, "dead").await;
    assert!(
        free_after < Duration::from_secs(1),
        "the dead session's name was free only after {free_after:?}"
    );
    for i in SENT / 2..SENT {
        admin
            .send(message("q", format!("m{i}")))
            .await
            .expect("send acknowledged");
    }
    let q = admin.list_queues().await.expect("listed");
    assert_eq!(
        (q[0].ready, q[0].in_flight),
        (SENT, 0),
        "{death:?}: messages went to the dead session"
    );
}

fn waits(ack: AckMode) -> impl Fn(&str) -> Vec<Request> {
    move |q| (0..WAITS).map(|_| receive(q, ack)).collect()
}

#[tokio::test]
async fn a_reset_session_with_auto_ack_waits_takes_nothing() {
    nothing_lost_to(Death::Reset, waits(AckMode::Auto)).await;
}

#[tokio::test]
async fn a_closed_session_with_auto_ack_waits_takes_nothing() {
    nothing_lost_to(Death::EndOfStream, waits(AckMode::Auto)).await;
}

#[tokio::test]
async fn a_reset_session_with_client_ack_waits_leases_nothing() {
    nothing_lost_to(Death::Reset, waits(AckMode::Client)).await;
}

#[tokio::test]
async fn a_reset_auto_ack_subscriber_takes_nothing() {
    nothing_lost_to(Death::Reset, |q| vec![subscribe(q, AckMode::Auto)]).await;
}

#[tokio::test]
async fn a_closed_client_ack_subscriber_leases_nothing() {
    nothing_lost_to(Death::EndOfStream, |q| vec![subscribe(q, AckMode::Client)]).await;
}

/// `Disconnect` with 30 s waits pending: answered at once, the waits answered "no message"
/// before it, the name free, and nothing taken afterwards.
#[tokio::test]
async fn disconnect_answers_at_once_and_cancels_pending_waits() {
    let b = broker();
    let admin = admin(&b, "q").await;
    let mut requests = waits(AckMode::Auto)("q");
    requests.push(subscribe("q", AckMode::Auto));
    let mut raw = waiting_session(&b, "leaving", &requests).await;
    let started = Instant::now();
    raw.send(1000, &Request::Disconnect).await.expect("sent");
    let mut nothing = 0;
    loop {
        let (rid, resp) = raw.recv().await.expect("an answer, not a 30 s wait");
        if rid == 1000 {
            assert_eq!(resp, Response::Ok);
            break;
        }
        assert_eq!(resp, Response::Received(None), "request {rid}");
        nothing += 1;
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "disconnect took {took:?}");
    assert_eq!(nothing, WAITS, "every pending wait was answered first");
    assert!(raw.closed_by_peer().await);
    assert!(reconnect(&b, "leaving").await < Duration::from_secs(1));
    admin
        .send(message("q", "after".into()))
        .await
        .expect("sent");
    let q = admin.list_queues().await.expect("listed");
    assert_eq!((q[0].ready, q[0].in_flight), (1, 0));
}

/// A `Disconnect` behind more waits than the connection may have in progress is still found
/// and answered at once.
#[tokio::test]
async fn disconnect_behind_requests_held_back_is_answered_at_once() {
    let b = broker_with_config("max_pipelined = 8\nfsync = \"never\"\n");
    let _admin = admin(&b, "q").await;
    let (mut raw, _) = RawConn::connect(&addr(&b), "held").await.expect("connects");
    for i in 0..40 {
        raw.send(10 + i, &receive("q", AckMode::Auto))
            .await
            .expect("sent");
    }
    let started = Instant::now();
    raw.send(1000, &Request::Disconnect).await.expect("sent");
    loop {
        let (rid, resp) = raw.recv().await.expect("an answer, not a 30 s wait");
        if rid == 1000 {
            assert_eq!(resp, Response::Ok);
            break;
        }
        assert_eq!(resp, Response::Received(None));
    }
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// A broker started with `config` as its configuration file (for settings without a flag).
fn broker_with_config(config: &str) -> BinaryServer {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ferry.toml");
    std::fs::write(&path, config).expect("config written");
    // Read once, at start.
    BinaryServer::start(&["--config", &path.to_string_lossy()]).expect("ferry serve starts")
}

/// The most a socket's send buffer grows to (`tcp_wmem`'s maximum), 4 MiB if unknown.
fn max_send_buffer() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|t| t.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(4 << 20)
}

/// An auto-ack subscriber that reads nothing and then resets: what the broker had pushed into
/// the kernel's buffers is lost with the connection (the one window auto ack cannot close),
/// but everything it had taken beyond that — pushes queued in the broker, held — goes back.
#[tokio::test]
async fn pushes_queued_for_a_connection_that_resets_go_back() {
    const COUNT: u64 = 4000;
    const BODY: usize = 4096;
    let b = broker();
    let admin = admin(&b, "q").await;
    let batch: Vec<OutgoingMessage> = (0..COUNT)
        .map(|i| {
            let mut m = message("q", String::new());
            m.body = Bytes::from(vec![b'x'; BODY]);
            m.context = i;
            m
        })
        .collect();
    for chunk in batch.chunks(500) {
        for r in admin.send_batch(chunk.to_vec()).await.expect("batch") {
            r.expect("sent");
        }
    }
    // A small receive buffer keeps the kernel's share small.
    let mut raw = RawConn::open_with_receive_buffer(&addr(&b), 16 * 1024)
        .await
        .expect("connects");
    let hello = ferry_protocol::requests::Connect {
        version: ferry_protocol::PROTOCOL_VERSION,
        client: "slow".into(),
        mechanism: String::new(),
        credentials: String::new(),
        keepalive_ms: 0,
        flags: 0,
    };
    assert!(matches!(
        raw.handshake(hello).await.expect("handshake"),
        Response::Connected(_)
    ));
    let mut sub = subscribe("q", AckMode::Auto);
    if let Request::Subscribe(s) = &mut sub {
        s.prefetch = COUNT as u32;
    }
    raw.send(2, &sub).await.expect("subscribed");
    // Let the broker push until its outbound budget is full and the socket takes no more.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    raw.reset();
    assert!(reconnect(&b, "slow").await < Duration::from_secs(1));
    let q = admin.list_queues().await.expect("listed");
    let lost = COUNT - q[0].ready;
    assert_eq!(q[0].in_flight, 0);
    // Lost: what was in the kernel's buffers (the broker's send buffer at its largest, the
    // client's small receive buffer) and the write in progress (a writer batch of up to 1 MiB
    // and a push batch of about 1 MiB). The broker pushed up to 8 MiB more than that (its
    // outbound budget), which must have come back.
    let window = max_send_buffer() + (2 << 20) + (64 << 10);
    let lost_bytes = lost * BODY as u64;
    assert!(
        lost_bytes <= window,
        "lost {lost} messages ({lost_bytes} bytes) to a reset, more than the kernel's \
         buffers and one write hold ({window} bytes): queued pushes did not come back"
    );
    assert!(lost < COUNT, "the test pushed too little to tell");
}

/// A name connected as ephemeral (`Connect` flag bit 0, as the CLI's generated names are) is
/// forgotten when its session ends: a message can no longer be addressed to it. A name
/// connected without the flag stays known.
#[tokio::test]
async fn an_ephemeral_name_is_forgotten_when_its_session_ends() {
    let b = broker();
    let admin = admin(&b, "q").await;
    for (name, flags) in [
        ("passing", ferry_protocol::requests::CONNECT_EPHEMERAL),
        ("staying", 0),
    ] {
        let mut raw = RawConn::open(&addr(&b)).await.expect("opens");
        let hello = ferry_protocol::requests::Connect {
            version: ferry_protocol::PROTOCOL_VERSION,
            client: name.into(),
            mechanism: String::new(),
            credentials: String::new(),
            keepalive_ms: 0,
            flags,
        };
        assert!(matches!(
            raw.handshake(hello).await.expect("handshake"),
            Response::Connected(_)
        ));
        raw.send(2, &Request::Disconnect).await.expect("sent");
        assert_eq!(raw.recv().await.expect("answered").1, Response::Ok);
    }
    let addressed = |to: &str| {
        let mut m = message("q", "for you".into());
        m.receiver = Some(to.into());
        m
    };
    admin
        .send(addressed("staying"))
        .await
        .expect("a permanent name stays known");
    match admin.send(addressed("passing")).await {
        Err(ferry_client::ClientError::Server(e)) => {
            assert_eq!(e.code, ferry_client::ErrorCode::ClientNotFound, "{e}")
        }
        other => panic!("an ephemeral name outlived its session: {other:?}"),
    }
}
