//! A full disk. The broker keeps a space reserve that only operations freeing space may use:
//! on a full disk sends and publishes are refused with `ResourceExhausted` (nothing of them is
//! stored: a refused send never appears, also after a restart), known names connect, consumers
//! drain, the broker restarts on the full disk after `kill -9`, and sends work again once
//! space is back.
//!
//! The real binary runs on a small tmpfs (mounting one needs root: without the right, the
//! scenario says why and is skipped); the same scenario runs in process on the store's
//! fault-injecting backend with a capacity, which needs nothing.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_client::{Client, ClientError};
use ferry_hostile::fs::Tmpfs;
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{AckMode, ErrorCode, Order, OutgoingMessage};
use ferry_store::embedded::FaultyBackend;
use ferry_store::{EmbeddedConfig, EmbeddedStore};
use ferry_testkit::{BinaryServer, TestServer};

/// Body size: a few thousand messages fill the disk.
const BODY: usize = 4000;
/// The whole scenario's bound.
const BOUND: Duration = Duration::from_secs(120);
/// The id of the message sent once space is back.
const AFTER: u64 = 9_999_999_999;

fn body(i: u64) -> Bytes {
    let mut b = format!("{i:010}").into_bytes();
    b.resize(BODY, b'.');
    Bytes::from(b)
}

fn id_of(body: &[u8]) -> u64 {
    std::str::from_utf8(body.get(..10).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

fn code(e: &ClientError) -> Option<ErrorCode> {
    e.code()
}

/// Sends batches of 64 until a whole batch is refused; returns the ids acknowledged and those
/// refused. Every refusal must be `ResourceExhausted` naming the full disk.
async fn fill(client: &Client) -> (Vec<u64>, Vec<u64>) {
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    let mut next = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while refused.len() < 64 {
        assert!(Instant::now() < deadline, "the disk never filled");
        let ids: Vec<u64> = (next..next + 64).collect();
        next += 64;
        let msgs = ids
            .iter()
            .map(|&i| OutgoingMessage::new("q", body(i)))
            .collect();
        // A request refused as a whole comes back as one error.
        let results: Vec<Result<(), (Option<ErrorCode>, String)>> =
            match client.send_batch(msgs).await {
                Ok(rs) => rs
                    .into_iter()
                    .map(|r| r.map(|_| ()).map_err(|e| (code(&e), e.to_string())))
                    .collect(),
                Err(e) => ids.iter().map(|_| Err((code(&e), e.to_string()))).collect(),
            };
        for (i, r) in ids.iter().zip(results) {
            match r {
                Ok(()) if refused.is_empty() => acked.push(*i),
                Ok(()) => panic!("message {i} was stored after a refusal"),
                Err((Some(ErrorCode::ResourceExhausted), why)) => {
                    assert!(why.contains("disk is full"), "{why}");
                    refused.push(*i);
                }
                Err((c, why)) => panic!("message {i}: {why} ({c:?}), not ResourceExhausted"),
            }
        }
    }
    (acked, refused)
}

/// Receives with auto ack until `n` messages arrived (or the bound passed); returns their ids.
async fn drain(client: &Client, n: usize) -> Vec<u64> {
    let mut sub = client
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 1000,
            selector: String::new(),
        })
        .await
        .expect("subscribe on a full disk");
    let mut got = Vec::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, sub.next()).await {
            Ok(Some(Ok(d))) => got.push(id_of(&d.message.body)),
            Ok(Some(Err(e))) => panic!("delivery failed: {e}"),
            Ok(None) => panic!("the subscription ended after {} messages", got.len()),
            Err(_) => panic!("drained {} of {n} messages in time", got.len()),
        }
    }
    sub.cancel().await;
    got
}

/// Whether anything is left on "q", by a peek.
async fn left_on_queue(client: &Client) -> Vec<u64> {
    let mut ids = Vec::new();
    // One peek sees the head; take client-ack leases to walk further, then give them back.
    let mut leased = Vec::new();
    while let Some(d) = client
        .receive(ferry_protocol::requests::Receive {
            source: ferry_protocol::Source::Queue("q".into()),
            order: Order::Time,
            mode: ferry_protocol::ReceiveMode::Take,
            ack: AckMode::Client,
            wait_ms: 0,
            selector: String::new(),
        })
        .await
        .expect("receive")
    {
        ids.push(id_of(&d.message.body));
        leased.push(d.delivery_id);
    }
    client.nack(&leased, true).await.expect("nack");
    ids
}

/// Waits until a send succeeds again (compaction gave the drained space back and the reserve
/// was made again); returns its id.
async fn send_once_space_returns(client: &Client, id: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.send(OutgoingMessage::new("q", body(id))).await {
            Ok(_) => return,
            Err(e) if code(&e) == Some(ErrorCode::ResourceExhausted) => {
                assert!(
                    Instant::now() < deadline,
                    "sends stay refused after the drain"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("send after the drain: {e}"),
        }
    }
}

/// The checks on a full broker that are the same in process and for the binary.
async fn refuses_growth_but_lets_known_names_in(addr: &str) {
    let stranger = Client::connect(addr, "stranger").await;
    assert_eq!(
        stranger.err().and_then(|e| code(&e)),
        Some(ErrorCode::ResourceExhausted),
        "a new permanent name is refused on a full disk"
    );
    let known = Client::connect(addr, "consumer")
        .await
        .expect("a known name connects on a full disk");
    let e = known.create_queue("other").await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::ResourceExhausted), "{e}");
    known.disconnect().await.expect("disconnect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_on_a_full_tmpfs_refuses_only_sends_and_restarts() {
    let tmpfs = match Tmpfs::mount("40m") {
        Ok(t) => t,
        Err(why) => {
            eprintln!("SKIPPED the_binary_on_a_full_tmpfs_refuses_only_sends_and_restarts: {why}");
            return;
        }
    };
    let args = ["--segment-bytes", "1048576", "--spare-segments", "2"];
    let mut server = BinaryServer::start_in(tmpfs.path(), &args).expect("ferry serve starts");
    tokio::time::timeout(BOUND, async {
        let addr = server.addr().to_string();
        // The consumer's name is known before the disk fills.
        Client::connect(&addr, "consumer")
            .await
            .expect("connect")
            .disconnect()
            .await
            .expect("disconnect");
        let producer = Client::connect(&addr, "producer").await.expect("connect");
        producer.create_queue("q").await.expect("create");
        let (acked, refused) = fill(&producer).await;
        assert!(
            acked.len() > 1000,
            "{} messages before the disk filled",
            acked.len()
        );
        refuses_growth_but_lets_known_names_in(&addr).await;
        drop(producer);

        // kill -9 on the full disk, and a restart there.
        server.kill9();
        server
            .restart()
            .expect("ferry serve restarts on the full disk");
        let addr = server.addr().to_string();
        let consumer = Client::connect(&addr, "consumer").await.expect("connect");
        let got = drain(&consumer, acked.len()).await;
        assert_eq!(
            got, acked,
            "every acknowledged message, in order, nothing refused"
        );
        send_once_space_returns(&consumer, AFTER).await;
        consumer.disconnect().await.expect("disconnect");

        server.kill9();
        server.restart().expect("ferry serve restarts");
        let client = Client::connect(&server.addr().to_string(), "consumer")
            .await
            .expect("connect");
        let left = left_on_queue(&client).await;
        assert_eq!(left, [AFTER], "a refused send never appears");
        let refused: BTreeSet<u64> = refused.into_iter().collect();
        assert!(left.iter().all(|i| !refused.contains(i)));
    })
    .await
    .expect("the scenario finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_fault_injecting_disk_refuses_only_sends_over_the_wire() {
    let disk = FaultyBackend::new();
    disk.set_capacity(Some(24 << 20));
    let open = |disk: &FaultyBackend| {
        let mut cfg = EmbeddedConfig::new("/data");
        cfg.backend = Arc::new(disk.clone());
        cfg.segment_bytes = 1 << 20;
        cfg.spare_segments = 2;
        EmbeddedStore::open(cfg)
    };
    tokio::time::timeout(BOUND, async {
        let store = open(&disk).await.expect("store opens");
        let server = TestServer::start_with_store(store, |_| {}).await;
        let addr = server.addr_string();
        Client::connect(&addr, "consumer")
            .await
            .expect("connect")
            .disconnect()
            .await
            .expect("disconnect");
        let producer = Client::connect(&addr, "producer").await.expect("connect");
        producer.create_queue("q").await.expect("create");
        let (acked, refused) = fill(&producer).await;
        refuses_growth_but_lets_known_names_in(&addr).await;
        producer.disconnect().await.expect("disconnect");
        server.shutdown().await;

        // A restart on the full disk (a crash image: what kill -9 leaves).
        let image = disk.crash(ferry_store::embedded::CrashMode::Process);
        let store = open(&image).await.expect("opens on the full disk");
        assert!(store.is_full(), "the disk is still full");
        let server = TestServer::start_with_store(store, |_| {}).await;
        let consumer = server.client("consumer").await;
        assert_eq!(drain(&consumer, acked.len()).await, acked);
        send_once_space_returns(&consumer, AFTER).await;
        let left = left_on_queue(&consumer).await;
        assert_eq!(left, [AFTER]);
        assert!(left.iter().all(|i| !refused.contains(i)));
        consumer.disconnect().await.expect("disconnect");
        server.shutdown().await;
    })
    .await
    .expect("the scenario finished in time");
}
