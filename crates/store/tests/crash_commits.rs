//! Transactions of the embedded engine across crashes: random commits (sends to several
//! queues, publishes to a topic with a selector, acks of leased messages) on the faulty
//! backend, some still in flight when the process or the machine goes down (torn and garbled
//! unsynced tails), then a reopen. Checks, with `fsync = always`:
//! - every acknowledged commit is there entirely: each message on each of its queues and
//!   matching subscriptions, each acked message gone;
//! - a commit in flight at the crash is there entirely or not at all (its acked messages then
//!   back on their queue, redelivered);
//! - leased messages nobody acked come back redelivered.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_protocol::{AckMode, PropertyValue, ReceiveMode, SubscriptionOptions};
use ferry_store::embedded::{CrashMode, FaultyBackend};
use ferry_store::{EmbeddedStore, NewMessage, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;
use common::{msg, open, peek_all, spec};

/// The queues a commit's messages may land on: plain queues and subscription queues.
const WATCHED: [&str; 4] = ["q0", "q1", "t:a", "t:b"];

/// One commit the test made: its messages (body and the queues each must be on) and the bodies
/// of the held messages it acked.
#[derive(Debug, Clone)]
struct Commit {
    messages: Vec<(String, Vec<&'static str>)>,
    acked: Vec<String>,
}

impl Commit {
    /// A random commit numbered `n`, acking `acks` (delivery id, body).
    fn random(
        rng: &mut StdRng,
        n: usize,
        acks: Vec<(u64, String)>,
    ) -> (Commit, Vec<NewMessage>, Vec<u64>) {
        let mut messages = Vec::new();
        let mut msgs = Vec::new();
        for k in 0..rng.gen_range(1..5) {
            let body = format!("tx{n}-{k}");
            if rng.gen_bool(0.4) {
                let selected = rng.gen_bool(0.5);
                let mut m = msg(&[], &body);
                m.topic = Some("t".into());
                m.properties = vec![("k".into(), PropertyValue::Int(i64::from(selected)))].into();
                let on = if selected {
                    vec!["t:a", "t:b"]
                } else {
                    vec!["t:a"]
                };
                messages.push((body, on));
                msgs.push(m);
            } else {
                let mut on: Vec<&'static str> = ["q0", "q1"]
                    .into_iter()
                    .filter(|_| rng.gen_bool(0.5))
                    .collect();
                if on.is_empty() {
                    on.push(if rng.gen_bool(0.5) { "q0" } else { "q1" });
                }
                msgs.push(msg(&on, &body));
                messages.push((body, on));
            }
        }
        let ids = acks.iter().map(|(id, _)| *id).collect();
        let acked = acks.into_iter().map(|(_, b)| b).collect();
        (Commit { messages, acked }, msgs, ids)
    }

    /// How many of its message copies `found` holds, and how many it has in all.
    fn copies(&self, found: &BTreeMap<String, Vec<(String, u32)>>) -> (usize, usize) {
        let mut present = 0;
        let mut all = 0;
        for (body, on) in &self.messages {
            all += on.len();
            for (q, msgs) in found {
                let here = msgs.iter().filter(|(b, _)| b == body).count();
                assert!(here <= 1, "{body} twice on {q}");
                if here == 1 {
                    assert!(
                        on.contains(&q.as_str()),
                        "{body} on {q}, expected only on {on:?}"
                    );
                    present += 1;
                }
            }
        }
        (present, all)
    }
}

/// Runs one case; returns how many in-flight commits were found complete and absent.
async fn run_case(seed: u64) -> (usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let disk = FaultyBackend::new();
    let segment_bytes = if rng.gen_bool(0.5) { 300 } else { 1 << 20 };
    let store = open(&disk, segment_bytes).await.unwrap();
    for c in ["p", "c"] {
        store.sessions().register_client(c).await.unwrap();
    }
    store.queues().create_queue("q0").await.unwrap();
    store.queues().create_queue("q1").await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    let sub = |selector: &str| SubscriptionOptions {
        durable: true,
        selector: selector.into(),
        ..SubscriptionOptions::default()
    };
    store
        .topics()
        .subscribe_topic("t", "a", &sub(""), "c")
        .await
        .unwrap();
    store
        .topics()
        .subscribe_topic("t", "b", &sub("k = 1"), "c")
        .await
        .unwrap();
    // Messages on q0 leased by session 1, for the commits to ack.
    let held_count = rng.gen_range(0..12);
    for j in 0..held_count {
        store
            .queues()
            .send(msg(&["q0"], &format!("h{j}")))
            .await
            .unwrap();
    }
    let mut held: Vec<(u64, String)> = if held_count > 0 {
        store
            .queues()
            .receive(
                &spec("q0", ReceiveMode::Take, AckMode::Client, 1),
                held_count,
            )
            .await
            .unwrap()
            .into_iter()
            .map(|d| {
                (
                    d.delivery_id,
                    String::from_utf8_lossy(&d.message.body).into_owned(),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let all_held: BTreeSet<String> = held.iter().map(|(_, b)| b.clone()).collect();

    let mut done = Vec::new();
    let mut n = 0;
    for _ in 0..rng.gen_range(0..20) {
        let take = rng.gen_range(0..=held.len().min(2));
        let acks: Vec<(u64, String)> = held.drain(..take).collect();
        let (c, msgs, ids) = Commit::random(&mut rng, n, acks);
        n += 1;
        store.transactions().commit(1, msgs, &ids).await.unwrap();
        done.push(c);
    }
    // Commits still in flight when the crash comes.
    let mut inflight = Vec::new();
    for _ in 0..rng.gen_range(0..4) {
        let take = rng.gen_range(0..=held.len().min(2));
        let acks: Vec<(u64, String)> = held.drain(..take).collect();
        let (c, msgs, ids) = Commit::random(&mut rng, n, acks);
        n += 1;
        let store: Arc<EmbeddedStore> = store.clone();
        inflight.push((
            c,
            tokio::spawn(async move { store.transactions().commit(1, msgs, &ids).await }),
        ));
    }
    // A random moment: before, during or after the in-flight commits' writes.
    for _ in 0..rng.gen_range(0..6) {
        tokio::task::yield_now().await;
    }
    if rng.gen_bool(0.5) {
        let micros = rng.gen_range(0..500);
        tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
    }
    let mode = match rng.gen_range(0..3) {
        0 => CrashMode::Process,
        1 => CrashMode::Machine { seed },
        _ => CrashMode::MachineGarbled { seed },
    };
    let image = disk.crash(mode);
    let mut pending = Vec::new();
    for (c, t) in inflight {
        let _ = t.await;
        pending.push(c);
    }
    drop(store);

    let store = open(&image, segment_bytes)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let mut found: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
    for q in WATCHED {
        let msgs = peek_all(&store, q)
            .await
            .into_iter()
            .map(|d| {
                (
                    String::from_utf8_lossy(&d.message.body).into_owned(),
                    d.message.delivery_count,
                )
            })
            .collect();
        found.insert(q.to_string(), msgs);
    }
    let held_back = |body: &str| -> bool {
        found["q0"]
            .iter()
            .any(|(b, count)| b == body && *count >= 1)
    };
    let mut acked = BTreeSet::new();
    for c in &done {
        let (present, all) = c.copies(&found);
        assert_eq!(
            present, all,
            "seed {seed}: acknowledged {c:?} incomplete: {found:?}"
        );
        for b in &c.acked {
            assert!(!held_back(b), "seed {seed}: {b}, acked by {c:?}, came back");
            acked.insert(b.clone());
        }
    }
    let mut outcome = (0, 0);
    for c in &pending {
        let (present, all) = c.copies(&found);
        if present == all {
            outcome.0 += 1;
            for b in &c.acked {
                assert!(
                    !held_back(b),
                    "seed {seed}: {c:?} is there but its ack of {b} is not"
                );
                acked.insert(b.clone());
            }
        } else {
            outcome.1 += 1;
            assert_eq!(present, 0, "seed {seed}: {c:?} partly there: {found:?}");
            for b in &c.acked {
                assert!(
                    held_back(b),
                    "seed {seed}: {c:?} is not there but its ack of {b} is"
                );
            }
        }
    }
    for b in all_held.difference(&acked) {
        assert!(
            held_back(b),
            "seed {seed}: unacked held {b} did not come back"
        );
    }
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_are_all_or_nothing_across_crashes() {
    let (mut complete, mut absent) = (0, 0);
    for seed in 0..300 {
        let (c, a) = run_case(seed).await;
        complete += c;
        absent += a;
    }
    // Both outcomes must occur, or the crashes did not cut into commits.
    assert!(
        complete > 0 && absent > 0,
        "in-flight commits: {complete} complete, {absent} absent"
    );
    eprintln!("in-flight commits: {complete} complete, {absent} absent");
}
