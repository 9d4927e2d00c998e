//! The datagram ingest under attack: malformed and oversized datagrams, datagrams the broker
//! refuses, and floods beyond what the broker can take are counted and dropped, never a
//! panic, with bounded memory; what is accepted reaches a subscriber byte-exact.
//!
//! Counters are read from the broker's stats, so most scenarios run the broker and the
//! gateway in-process; the flood against the real binary watches its resident memory.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_broker::stats::Stats;
use ferry_client::{Client, SubscribeTopic, Subscription};
use ferry_protocol::AckMode;
use ferry_testkit::{BinaryServer, TestServer};
use ferry_udp::{Packer, UdpConfig, UdpGateway, MAX_DATAGRAM};

/// Counters of the ingest: received, malformed, dropped, records published.
fn counters(server: &TestServer) -> [u64; 4] {
    let s = server.broker().stats();
    let u = &s.udp;
    [
        Stats::get(&u.datagrams_received),
        Stats::get(&u.datagrams_malformed),
        Stats::get(&u.datagrams_dropped),
        Stats::get(&u.records_published),
    ]
}

async fn gateway(server: &TestServer, adjust: impl FnOnce(&mut UdpConfig)) -> UdpGateway {
    let mut config = UdpConfig::new("127.0.0.1:0", Some("ingest".into()));
    adjust(&mut config);
    UdpGateway::start(server.broker(), config)
        .await
        .expect("the ingest starts")
}

async fn subscriber(client: &Client, topic: &str) -> Subscription {
    client
        .subscribe_topic(
            SubscribeTopic::new(topic)
                .ack(AckMode::Auto)
                .prefetch(10_000),
        )
        .await
        .expect("subscribe")
}

/// Waits until the counters satisfy `done`, at most 10 s.
async fn wait_for(server: &TestServer, done: impl Fn([u64; 4]) -> bool) -> [u64; 4] {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = counters(server);
        if done(c) {
            return c;
        }
        assert!(Instant::now() < deadline, "counters stuck at {c:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn datagram(topic: Option<&str>, records: &[&[u8]]) -> Vec<u8> {
    let mut p = Packer::new(topic, MAX_DATAGRAM).expect("packer");
    for r in records {
        assert!(p.push(r), "record fits");
    }
    p.datagram().to_vec()
}

async fn next_body(sub: &mut Subscription) -> Bytes {
    let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("a delivery in time")
        .expect("subscription open")
        .expect("delivery");
    d.message.body
}

#[tokio::test]
async fn malformed_datagrams_are_counted_and_dropped_and_a_good_one_still_arrives_byte_exact() {
    let server = TestServer::start().await;
    let gw = gateway(&server, |_| {}).await;
    let client = server.client("watcher").await;
    let mut sub = subscriber(&client, "ingest").await;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let bad: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"F".to_vec(),
        b"XY\x01\x00\x00\x01a".to_vec(),
        b"FD\x07\x00\x00\x01a".to_vec(),
        b"FD\x01\x80\x00\x01a".to_vec(),
        b"FD\x01\x00".to_vec(),
        b"FD\x01\x00\x00\x00".to_vec(),
        b"FD\x01\x00\x00\x09short".to_vec(),
        b"FD\x01\x00\x00\x01a\x00".to_vec(),
        b"FD\x01\x01\x00\x00\x01a".to_vec(),
        b"FD\x01\x01\x03a>b\x00\x01a".to_vec(),
        b"FD\x01\x01\xc8ab".to_vec(),
        // A good record followed by a bad one: the datagram goes whole or not at all.
        b"FD\x01\x00\x00\x01a\x00\x05ab".to_vec(),
        vec![0xff; 1000],
    ];
    for d in &bad {
        sock.send_to(d, gw.local_addr()).unwrap();
    }
    let n = bad.len() as u64;
    // The reader counts a datagram as received before the ingest judges it: wait until every
    // one is accounted for (a malformed one published instead would never be, and time out).
    wait_for(&server, |c| c[0] == n && c[1] + c[2] == n).await;
    assert_eq!(
        counters(&server),
        [n, n, 0, 0],
        "all malformed, none published"
    );

    let records: [&[u8]; 4] = [
        b"\x00",
        &[0, 1, 2, 255, 254, 0],
        b"plain text",
        &[7u8; 3000],
    ];
    sock.send_to(&datagram(None, &records), gw.local_addr())
        .unwrap();
    for want in records {
        assert_eq!(&next_body(&mut sub).await[..], want);
    }
    assert_eq!(counters(&server), [n + 1, n, 0, 4]);
    gw.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn oversized_records_and_missing_topics_are_refused_by_the_broker_and_counted_as_dropped() {
    let server = TestServer::start_with(|c| {
        c.limits.max_body_bytes = 1024;
    })
    .await;
    let client = server.client("watcher").await;
    client.create_topic("other").await.unwrap();
    let gw = gateway(&server, |_| {}).await;
    let mut sub = subscriber(&client, "ingest").await;
    let mut other = subscriber(&client, "other").await;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let big = vec![b'x'; 2000];
    // Over the body limit; a topic that does not exist; then good ones.
    sock.send_to(&datagram(None, &[&big]), gw.local_addr())
        .unwrap();
    wait_for(&server, |c| c[2] == 1).await;
    sock.send_to(&datagram(Some("missing"), &[b"lost"]), gw.local_addr())
        .unwrap();
    wait_for(&server, |c| c[2] == 2).await;
    sock.send_to(&datagram(Some("other"), &[b"to other"]), gw.local_addr())
        .unwrap();
    sock.send_to(&datagram(None, &[&big[..1024]]), gw.local_addr())
        .unwrap();
    assert_eq!(&next_body(&mut other).await[..], b"to other");
    assert_eq!(&next_body(&mut sub).await[..], &big[..1024]);
    assert_eq!(counters(&server), [4, 0, 2, 2]);

    // A datagram longer than UDP carries over IPv4 cannot be sent at all; the largest one
    // that can is taken whole.
    let sock6 = UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(sock6
        .send_to(&vec![0u8; MAX_DATAGRAM + 1], gw.local_addr())
        .is_err());
    let mut p = Packer::new(None, MAX_DATAGRAM).unwrap();
    let mut n = 0u32;
    while p.push(&[n as u8; 1000]) {
        n += 1;
    }
    sock.send_to(p.datagram(), gw.local_addr()).unwrap();
    for i in 0..n {
        assert_eq!(&next_body(&mut sub).await[..], &[i as u8; 1000][..]);
    }
    assert_eq!(counters(&server), [5, 0, 2, 2 + u64::from(n)]);
    gw.stop().await;
    server.shutdown().await;
}

/// Record `seq` of a flood: its sequence number, then a pattern derived from it.
fn flood_record(seq: u64, len: usize) -> Vec<u8> {
    let mut r = seq.to_be_bytes().to_vec();
    r.extend((0..len - 8).map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i) as u8));
    r
}

#[tokio::test]
async fn a_flood_beyond_what_the_broker_takes_is_dropped_and_counted_and_what_is_taken_arrives_intact(
) {
    // Persistent records with an fsync per batch, and room for 4 datagrams (of 50 records of
    // 100 bytes): the reader gets far ahead of the publisher.
    let server = TestServer::start().await;
    let gw = gateway(&server, |c| {
        c.persistent = true;
        c.queue_bytes = 4 * (50 * (100 + 32) + 256);
    })
    .await;
    let client = server.client("watcher").await;
    let mut sub = subscriber(&client, "ingest").await;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    const PER_DATAGRAM: u64 = 50;
    const DATAGRAMS: u64 = 4000;
    let mut p = Packer::new(None, MAX_DATAGRAM).unwrap();
    for d in 0..DATAGRAMS {
        p.clear();
        for i in 0..PER_DATAGRAM {
            assert!(p.push(&flood_record(d * PER_DATAGRAM + i, 100)));
        }
        // Loopback sends do not block; when the kernel's buffer is full it drops them, and
        // they never reach the ingest's counters.
        let _ = sock.send_to(p.datagram(), gw.local_addr());
    }
    // Stopping publishes what was queued.
    tokio::time::sleep(Duration::from_millis(500)).await;
    gw.stop().await;
    let [received, malformed, dropped, published] = counters(&server);
    assert_eq!(malformed, 0);
    assert!(
        dropped > 0,
        "no datagram was dropped: not a flood ({received} received)"
    );
    assert_eq!(
        received,
        dropped + published / PER_DATAGRAM,
        "every datagram received is dropped or published whole"
    );
    assert_eq!(published % PER_DATAGRAM, 0);
    let mut seen = HashSet::new();
    for _ in 0..published {
        let body = next_body(&mut sub).await;
        let seq = u64::from_be_bytes(body[..8].try_into().unwrap());
        assert_eq!(
            &body[..],
            &flood_record(seq, 100)[..],
            "record {seq} intact"
        );
        assert!(seen.insert(seq), "record {seq} twice");
    }
    // Whole datagrams: a record's neighbours in its datagram are there too.
    for seq in &seen {
        let first = seq - seq % PER_DATAGRAM;
        assert!((first..first + PER_DATAGRAM).all(|s| seen.contains(&s)));
    }
    server.shutdown().await;
}

/// A free UDP port on loopback (bound and released: the broker binds it right after).
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_takes_a_flood_of_large_datagrams_with_bounded_memory_and_goes_on() {
    let port = free_udp_port();
    let listen = format!("127.0.0.1:{port}");
    let server = BinaryServer::start(&[
        "--udp-listen",
        &listen,
        "--udp-topic",
        "flood",
        "--udp-persistent",
    ])
    .expect("ferry serve with --udp-listen starts");
    let pid = server.pid().expect("pid");
    let addr: SocketAddr = listen.parse().unwrap();
    // Nobody subscribes during the flood: the records published are dropped by the topic, so
    // what memory grows by is the ingest's own (a subscriber's backlog would be messages
    // accepted, which the broker must keep).
    let before = ferry_hostile::rss_bytes(pid).unwrap();
    // Two senders of the largest datagrams for 2 s (about 1 GiB offered), with malformed
    // ones mixed in; the broker stores what it can and drops the rest.
    let mut senders = Vec::new();
    for t in 0..2u8 {
        senders.push(std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut p = Packer::new(None, MAX_DATAGRAM).unwrap();
            while p.push(&[t; 4000]) {}
            let start = Instant::now();
            let mut i = 0u64;
            while start.elapsed() < Duration::from_secs(2) {
                let d: &[u8] = if i % 10 == 9 {
                    b"FD\x01\x00\x00\xffnot"
                } else {
                    p.datagram()
                };
                let _ = sock.send_to(d, addr);
                i += 1;
            }
        }));
    }
    let mut peak = before;
    while senders.iter().any(|s| !s.is_finished()) {
        peak = peak.max(ferry_hostile::rss_bytes(pid).unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    for s in senders {
        s.join().unwrap();
    }
    peak = peak.max(ferry_hostile::rss_bytes(pid).unwrap());
    // The ingest holds at most 32 MiB of datagrams, queued or being published, and publishes
    // 4 MiB at a time; the socket buffer is the kernel's.
    let growth = peak.saturating_sub(before);
    println!(
        "resident memory grew by {} MiB under the flood",
        growth >> 20
    );
    assert!(
        growth < 96 << 20,
        "resident memory grew by {} MiB under the flood",
        growth >> 20
    );
    // Afterwards the broker still serves: a marked record arrives (after any flood records
    // still queued when the subscription was made). While the ingest is still working through
    // the flood it may drop the marked datagram like any other, so it is sent again every
    // half second until it arrives.
    let client = Client::connect(&server.addr().to_string(), "watcher")
        .await
        .unwrap();
    let mut sub = subscriber(&client, "flood").await;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let marked = datagram(None, &[b"after the flood"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next_send = Instant::now();
    loop {
        if Instant::now() >= next_send {
            sock.send_to(&marked, addr).unwrap();
            next_send = Instant::now() + Duration::from_millis(500);
        }
        assert!(Instant::now() < deadline, "the marked record arrives");
        let Ok(delivery) = tokio::time::timeout_at(next_send.into(), sub.next()).await else {
            continue;
        };
        let body = delivery.expect("open").expect("delivery").message.body;
        if &body[..] == b"after the flood" {
            break;
        }
        assert!(
            body.iter().all(|&b| b == body[0]) && body.len() == 4000,
            "a flood record intact"
        );
    }
    client.disconnect().await.unwrap();
}

#[test]
fn an_ingest_address_already_taken_stops_the_start_before_any_listener_answers() {
    let holder = UdpSocket::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().to_string();
    let err = common::refused_at_start(&["--udp-listen", &taken], &[]);
    assert!(
        err.contains(&format!("cannot receive datagrams on {taken}")),
        "{err}"
    );
    assert_eq!(
        err.matches("Address already in use").count(),
        1,
        "the cause once: {err}"
    );
}
