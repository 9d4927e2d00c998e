//! Crash test for transactions: the real `ferry` binary is killed with SIGKILL at a random
//! moment while workers move messages in transactions (take one from `src` with client ack,
//! send a copy to `a`, another to `b`, publish a third to topic `done`, ack, commit), then
//! restarted and checked. For every message of `src`, after the restart exactly one of these
//! holds:
//! - it is still on `src` (its transaction did not commit), and on none of `a`, `b`, `done:log`;
//! - it is on all of `a`, `b` and `done:log` and no longer on `src` (it committed).
//!
//! A transaction whose commit was acknowledged must be in the second case. Nothing is ever on
//! only some of `a`, `b`, `done:log`, twice, or lost.
//!
//! `FERRY_CRASH_CYCLES` sets the number of kill cycles (default 6 here). Needs the `ferry`
//! binary built (`cargo build`).
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_client::Client;
use ferry_protocol::requests::{Receive, SubscribeTopic};
use ferry_protocol::{AckMode, Order, OutgoingMessage, ReceiveMode, Source};
use ferry_testkit::BinaryServer;
use rand::{Rng, SeedableRng};

const MESSAGES: usize = 600;
const WORKERS: usize = 3;

async fn connect(addr: &str, name: &str) -> Client {
    for _ in 0..200 {
        if let Ok(c) = Client::connect(addr, name).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("cannot connect {name} to {addr}");
}

fn take_from(queue: &str, ack: AckMode) -> Receive {
    Receive {
        source: Source::Queue(queue.into()),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack,
        wait_ms: 0,
        selector: String::new(),
    }
}

/// Moves messages from `src` in transactions until the broker dies; records the bodies whose
/// commit was acknowledged.
async fn worker(addr: String, w: usize, committed: Arc<Mutex<HashSet<String>>>) {
    let c = connect(&addr, &format!("worker{w}")).await;
    loop {
        if c.begin().await.is_err() {
            return;
        }
        let d = match c.receive(take_from("src", AckMode::Client)).await {
            Ok(Some(d)) => d,
            _ => return,
        };
        let body = String::from_utf8_lossy(&d.message.body).into_owned();
        let copy = |q: &str| OutgoingMessage::new(q, d.message.body.clone());
        let steps = async {
            c.send(copy("a")).await?;
            c.send(copy("b")).await?;
            c.publish(OutgoingMessage::to_topic("done", d.message.body.clone()))
                .await?;
            c.ack(&[d.delivery_id]).await?;
            c.commit().await
        };
        match steps.await {
            Ok(ids) => {
                assert_eq!(ids.len(), 3, "three messages per transaction");
                committed.lock().unwrap().insert(body);
            }
            Err(_) => return,
        }
    }
}

/// Every body on `queue` after a restart, with how often it is there.
async fn drain(c: &Client, queue: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    while let Some(d) = c.receive(take_from(queue, AckMode::Auto)).await.unwrap() {
        *out.entry(String::from_utf8_lossy(&d.message.body).into_owned())
            .or_default() += 1;
    }
    out
}

async fn cycle(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut server = BinaryServer::start(&[]).expect("ferry serve starts");
    let addr = server.addr().to_string();
    let setup = connect(&addr, "setup").await;
    for q in ["src", "a", "b"] {
        setup.create_queue(q).await.unwrap();
    }
    setup.create_topic("done").await.unwrap();
    setup
        .ensure_subscription(SubscribeTopic::new("done").durable("log"))
        .await
        .unwrap();
    let all: Vec<String> = (0..MESSAGES).map(|i| format!("m{seed}-{i}")).collect();
    for chunk in all.chunks(200) {
        let batch = chunk
            .iter()
            .map(|b| OutgoingMessage::new("src", b.clone().into_bytes()))
            .collect();
        for r in setup.send_batch(batch).await.unwrap() {
            r.unwrap();
        }
    }
    drop(setup);

    let committed = Arc::new(Mutex::new(HashSet::new()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| tokio::spawn(worker(addr.clone(), w, committed.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(rng.gen_range(50..600))).await;
    server.kill9();
    for w in workers {
        let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
    }

    server.restart().expect("ferry serve restarts");
    let c = connect(&server.addr().to_string(), "checker").await;
    let src = drain(&c, "src").await;
    let a = drain(&c, "a").await;
    let b = drain(&c, "b").await;
    let log = drain(&c, "done:log").await;
    let committed = committed.lock().unwrap().clone();
    let mut moved = 0;
    for m in &all {
        let on = |q: &HashMap<String, usize>| q.get(m).copied().unwrap_or(0);
        let (s, a, b, l) = (on(&src), on(&a), on(&b), on(&log));
        assert!(
            s <= 1 && a <= 1 && b <= 1 && l <= 1,
            "{m} duplicated: src {s} a {a} b {b} log {l}"
        );
        assert!(
            (a, b, l) == (0, 0, 0) || (a, b, l) == (1, 1, 1),
            "{m} half committed: a {a} b {b} log {l}"
        );
        assert_eq!(s + a, 1, "{m} lost or both moved and not: src {s} a {a}");
        if committed.contains(m) {
            assert_eq!(a, 1, "{m}'s commit was acknowledged but it is not there");
        }
        moved += a;
    }
    assert!(moved >= committed.len());
    eprintln!(
        "cycle {seed}: {} commits acknowledged, {moved} moved, {} still on src",
        committed.len(),
        MESSAGES - moved
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transactions_survive_kill_9_whole_and_uncommitted_ones_leave_no_trace() {
    let cycles: u64 = std::env::var("FERRY_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let base: u64 = rand::thread_rng().gen();
    eprintln!("seed base {base}");
    for i in 0..cycles {
        cycle(base.wrapping_add(i)).await;
    }
}

/// A durable subscription's backlog (acknowledged publishes nobody consumed yet) survives
/// `kill -9`, while a non-durable subscription is gone after the restart, and so are the
/// non-persistent messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_subscription_backlog_survives_kill_9() {
    let mut server = BinaryServer::start(&[]).expect("ferry serve starts");
    let addr = server.addr().to_string();
    let c = connect(&addr, "publisher").await;
    c.create_topic("events").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("events").durable("keep"))
        .await
        .unwrap();
    let listener = connect(&addr, "listener").await;
    let live = listener
        .subscribe_topic(SubscribeTopic::new("events").prefetch(1))
        .await
        .unwrap();
    let live_queue = live.queue().to_string();
    for i in 0..50 {
        c.publish(OutgoingMessage::to_topic("events", format!("e{i}")))
            .await
            .unwrap();
    }
    c.publish(OutgoingMessage::to_topic("events", "fleeting").non_persistent())
        .await
        .unwrap();
    server.kill9();
    drop(live);
    server.restart().expect("ferry serve restarts");
    let c = connect(&server.addr().to_string(), "checker").await;
    let topics = c.list_topics().await.unwrap();
    let names: Vec<&str> = topics[0]
        .subscriptions
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["keep"],
        "{live_queue} should be gone after the restart"
    );
    let got = drain(&c, "events:keep").await;
    for i in 0..50 {
        assert_eq!(
            got.get(&format!("e{i}")),
            Some(&1),
            "e{i} lost or duplicated"
        );
    }
    assert_eq!(got.len(), 50, "only the persistent messages: {got:?}");
}
