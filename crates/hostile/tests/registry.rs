//! The client registry cannot flood the log: registrations are records of their own (a segment
//! header does not grow with them), an idle broker writes nothing, and names that hold nothing
//! expire after `client_expiry_secs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_client::Client;
use ferry_hostile::fs::{bytes_of, fingerprint};
use ferry_protocol::{ErrorCode, OutgoingMessage, Response};
use ferry_testkit::{BinaryServer, RawConn};
use tokio::sync::Semaphore;

/// The smallest segments the broker takes: the log rolls often, so that anything a segment
/// header copies would show. No fsync per registration: the scenario is about bytes, not
/// durability, and must stay short. No limit on new names per address: all of them come from
/// loopback (the limit has its scenario in `idle.rs`).
const ARGS: [&str; 6] = [
    "--segment-bytes",
    "65536",
    "--fsync",
    "never",
    "--max-new-clients-per-sec",
    "0",
];

/// Connects (registering `name`) and disconnects.
async fn visit(addr: &str, name: &str) {
    let c = Client::connect(addr, name).await.expect("connect");
    c.disconnect().await.expect("disconnect");
}

/// Registers `names` over `parallel` connections at a time, each a bare handshake (the
/// lightest client there is) closed at once.
async fn register_all(addr: &str, names: Vec<String>, parallel: usize) {
    let gate = Arc::new(Semaphore::new(parallel));
    let mut tasks = Vec::new();
    for name in names {
        let permit = gate.clone().acquire_owned().await.expect("semaphore");
        let addr = addr.to_owned();
        tasks.push(tokio::spawn(async move {
            let (conn, reply) = RawConn::connect(&addr, &name).await.expect("connect");
            assert!(matches!(reply, Response::Connected(_)), "{name}: {reply:?}");
            drop(conn);
            drop(permit);
        }));
    }
    for t in tasks {
        t.await.expect("registration task");
    }
}

/// Waits until the data directory stays the same for `quiet` (compaction after a burst comes
/// to rest), at most `bound`.
async fn settle(dir: &std::path::Path, quiet: Duration, bound: Duration) {
    let deadline = Instant::now() + bound;
    let mut last = fingerprint(dir).expect("fingerprint");
    let mut since = Instant::now();
    while since.elapsed() < quiet {
        assert!(
            Instant::now() < deadline,
            "the data directory kept changing for {bound:?} after the load stopped"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = fingerprint(dir).expect("fingerprint");
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_registrations_cost_their_records_and_an_idle_broker_writes_nothing() {
    let server = BinaryServer::start(&ARGS).expect("ferry serve starts");
    let addr = server.addr().to_string();
    let dir = server.data_dir().to_owned();
    let admin = Client::connect(&addr, "admin").await.expect("connect");
    admin.create_queue("q").await.expect("create");
    let before = bytes_of(&dir, ".log").expect("log size");
    // A registration record: frame (8), kind (1), name (2 + 17).
    let record = |n: &str| 8 + 1 + 2 + n.len() as u64;
    let mut records = 0;
    let started = Instant::now();
    // In chunks, checking the log as it grows: a broker copying its registry into every
    // segment header would fill the disk long before the last chunk.
    for chunk in 0..20 {
        let names: Vec<String> = (chunk * 5000..(chunk + 1) * 5000)
            .map(|i| format!("registered-{i:06}"))
            .collect();
        records += names.iter().map(|n| record(n)).sum::<u64>();
        tokio::time::timeout(Duration::from_secs(120), register_all(&addr, names, 32))
            .await
            .expect("5,000 registrations within 2 minutes");
        let grown = bytes_of(&dir, ".log").expect("log size") - before;
        assert!(
            grown <= records + records / 20 + (1 << 20),
            "after {} registrations of {records} record bytes the log grew by {grown} bytes",
            (chunk + 1) * 5000
        );
    }
    eprintln!("100,000 registrations in {:?}", started.elapsed());
    for i in 0..20 {
        admin
            .send(OutgoingMessage::new(
                "q",
                Bytes::from(format!("message {i}")),
            ))
            .await
            .expect("send");
    }
    admin.disconnect().await.expect("disconnect");
    settle(&dir, Duration::from_secs(3), Duration::from_secs(60)).await;
    let grown = bytes_of(&dir, ".log").expect("log size") - before;
    eprintln!("the log grew by {grown} bytes for {records} bytes of registration records");
    // Their records, the 20 messages, and a header of some 50 bytes per 64 KiB segment.
    assert!(
        grown <= records + records / 20,
        "100,000 registrations of {records} record bytes grew the log by {grown} bytes"
    );

    let quiet = fingerprint(&dir).expect("fingerprint");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        fingerprint(&dir).expect("fingerprint") == quiet,
        "an idle broker changed its data directory within 10 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_hold_nothing_expire_and_stay_forgotten_after_a_restart() {
    let mut server = BinaryServer::start(&["--client-expiry-secs", "1"]).expect("ferry serve");
    let addr = server.addr().to_string();
    let admin = Client::connect(&addr, "admin").await.expect("connect");
    admin.create_queue("q").await.expect("create");
    for i in 0..50 {
        visit(&addr, &format!("idle-{i}")).await;
    }
    visit(&addr, "keeper").await;
    let to = |who: &str| OutgoingMessage {
        receiver: Some(who.into()),
        ..OutgoingMessage::new("q", Bytes::from_static(b"for you"))
    };
    admin
        .send(to("keeper"))
        .await
        .expect("addressed to a known name");
    // Expiry after 1 s offline, checked every second: gone within a few seconds. A probe that
    // finds a name registered leaves a message addressed to it, which then holds it: each
    // probe uses the next name, the latest registered first.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = 49;
    loop {
        match admin.send(to(&format!("idle-{last}"))).await {
            Err(e) if e.code() == Some(ErrorCode::ClientNotFound) => break,
            Ok(_) => {
                assert!(Instant::now() < deadline, "the idle names never expired");
                assert!(last > 10, "too many probes");
                last -= 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    // Every name registered before the one found forgotten is forgotten too.
    for i in 0..last {
        let e = admin.send(to(&format!("idle-{i}"))).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::ClientNotFound), "idle-{i}: {e}");
    }
    admin
        .send(to("keeper"))
        .await
        .expect("a name with a message waiting stays");
    drop(admin);

    server.kill9();
    server.restart().expect("restart");
    let addr = server.addr().to_string();
    let admin = Client::connect(&addr, "admin").await.expect("connect");
    let e = admin.send(to("idle-7")).await.unwrap_err();
    assert_eq!(
        e.code(),
        Some(ErrorCode::ClientNotFound),
        "forgotten for good: {e}"
    );
    admin.send(to("keeper")).await.expect("keeper stays");
    visit(&addr, "idle-7").await;
    admin
        .send(to("idle-7"))
        .await
        .expect("a name comes back with its next session");
}
