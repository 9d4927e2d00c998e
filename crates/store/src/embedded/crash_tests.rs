//! Crash simulation with topics, transactions and non-persistent messages: random operations on
//! the in-memory [`FaultyBackend`] (tiny segments, so rolls and compaction happen), a crash at a
//! random point (process kill, or machine crash with torn and garbled unsynced tails) while
//! commits are still in flight, then a reopen. Checks, under `fsync = always`:
//! - everything acknowledged is there (sends, publishes on the subscriptions whose selector
//!   took them, committed transactions), unless its removal was acknowledged;
//! - nothing whose removal was acknowledged comes back;
//! - a commit in flight at the crash is there entirely (its messages, and its acks applied) or
//!   not at all;
//! - no non-persistent message is there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{
    AckMode, DeliveryId, Order, PropertyValue, ReceiveMode, Source, SubscriptionOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{CrashMode, EmbeddedConfig, EmbeddedStore, FaultyBackend, FsyncPolicy};
use crate::api::{NewMessage, ReceiveSpec, Store};

const QUEUES: [&str; 4] = ["q0", "q1", "t:a", "t:b"];

async fn open(disk: &FaultyBackend, segment_bytes: u64) -> Arc<EmbeddedStore> {
    let mut cfg = EmbeddedConfig::new("/data");
    cfg.backend = Arc::new(disk.clone());
    cfg.segment_bytes = segment_bytes;
    cfg.fsync = FsyncPolicy::Always;
    EmbeddedStore::open(cfg).await.unwrap()
}

/// A send to `queues`, or a publish to "t" when `queues` is empty, with property k.
fn message(queues: &[&str], k: i64, persistent: bool, body: String) -> NewMessage {
    NewMessage {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        topic: queues.is_empty().then(|| "t".into()),
        persistent,
        sender: "p".into(),
        receiver: None,
        priority: 5,
        context: 0,
        properties: vec![("k".into(), PropertyValue::Int(k))].into(),
        body: Bytes::from(body),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    }
}

/// Where a message goes: its queues, or the subscriptions that take it.
fn targets(queues: &[&'static str], k: i64) -> Vec<&'static str> {
    if !queues.is_empty() {
        return queues.to_vec();
    }
    if k == 1 {
        vec!["t:a", "t:b"]
    } else {
        vec!["t:b"]
    }
}

fn spec(queue: &str, mode: ReceiveMode, ack: AckMode) -> ReceiveSpec {
    ReceiveSpec {
        source: Source::Queue(queue.into()),
        order: Order::Time,
        mode,
        ack,
        hold: false,
        client: "c".into(),
        session: 1,
        lease_until_ms: u64::MAX,
        selector: None,
        now_ms: 1,
        max_bytes: None,
    }
}

type Key = (u64, String);

#[derive(Default)]
struct Model {
    present: BTreeSet<Key>,
    removed: BTreeSet<Key>,
    leased: BTreeMap<DeliveryId, Key>,
}

/// A random message: a send to one or two queues or a publish, persistent or not.
fn random_message(rng: &mut StdRng, body: String) -> (NewMessage, Vec<&'static str>) {
    let queues: Vec<&'static str> = match rng.gen_range(0..4) {
        0 => vec!["q0"],
        1 => vec!["q0", "q1"],
        _ => Vec::new(),
    };
    let k = rng.gen_range(0..2);
    let persistent = rng.gen_bool(0.8);
    let body = if persistent {
        body
    } else {
        format!("np-{body}")
    };
    (
        message(&queues, k, persistent, body),
        if persistent {
            targets(&queues, k)
        } else {
            Vec::new()
        },
    )
}

/// Runs one case; returns how many in-flight commits survived and how many were lost.
async fn run_case(seed: u64) -> (usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let disk = FaultyBackend::new();
    let segment_bytes = if rng.gen_bool(0.5) { 400 } else { 1 << 20 };
    let store = open(&disk, segment_bytes).await;
    store.sessions().register_client("p").await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q0").await.unwrap();
    store.queues().create_queue("q1").await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    for (name, selector) in [("a", "k = 1"), ("b", "")] {
        let opts = SubscriptionOptions {
            durable: true,
            selector: selector.into(),
            ..SubscriptionOptions::default()
        };
        store
            .topics()
            .subscribe_topic("t", name, &opts, "c")
            .await
            .unwrap();
    }
    let mut m = Model::default();
    for i in 0..rng.gen_range(1..80) {
        match rng.gen_range(0..10) {
            0..=2 => {
                let (msg, to) = random_message(&mut rng, format!("s{i}"));
                let id = store.queues().send(msg).await.unwrap();
                m.present.extend(to.iter().map(|q| (id, q.to_string())));
            }
            3 | 4 => {
                let q = QUEUES[rng.gen_range(0..QUEUES.len())];
                let client = rng.gen_bool(0.6);
                let ack = if client {
                    AckMode::Client
                } else {
                    AckMode::Auto
                };
                for d in store
                    .queues()
                    .receive(&spec(q, ReceiveMode::Take, ack), rng.gen_range(1..4))
                    .await
                    .unwrap()
                {
                    let key = (d.message.id, q.to_string());
                    if d.message.body.starts_with(b"np-") {
                        if client {
                            store.queues().ack(1, &[d.delivery_id]).await.unwrap();
                        }
                        continue;
                    }
                    if client {
                        m.leased.insert(d.delivery_id, key);
                    } else {
                        assert!(m.present.remove(&key), "seed {seed}: took unknown {key:?}");
                        m.removed.insert(key);
                    }
                }
            }
            5..=7 => {
                let mut msgs = Vec::new();
                let mut tos = Vec::new();
                for n in 0..rng.gen_range(0..4) {
                    let (msg, to) = random_message(&mut rng, format!("c{i}.{n}"));
                    msgs.push(msg);
                    tos.push(to);
                }
                let acks: Vec<DeliveryId> = m
                    .leased
                    .keys()
                    .copied()
                    .filter(|_| rng.gen_bool(0.5))
                    .collect();
                let ids = store.transactions().commit(1, msgs, &acks).await.unwrap();
                for (id, to) in ids.into_iter().zip(tos) {
                    m.present.extend(to.iter().map(|q| (id, q.to_string())));
                }
                for did in acks {
                    let key = m.leased.remove(&did).unwrap();
                    m.present.remove(&key);
                    m.removed.insert(key);
                }
            }
            8 => store.upkeep().maintain().await.unwrap(),
            _ => {
                store.sessions().release_session(1).await.unwrap();
                m.leased.clear();
            }
        }
    }

    // Commits still in flight when the machine goes down, each acking some leases.
    let mut inflight = Vec::new();
    let mut uncertain: Vec<Vec<Key>> = Vec::new();
    let leased: Vec<(DeliveryId, Key)> = std::mem::take(&mut m.leased).into_iter().collect();
    let mut leased = leased.into_iter();
    for j in 0..rng.gen_range(0..4) {
        let acks: Vec<(DeliveryId, Key)> = leased.by_ref().take(rng.gen_range(0..3)).collect();
        for (_, key) in &acks {
            m.present.remove(key);
        }
        uncertain.push(acks.iter().map(|(_, k)| k.clone()).collect());
        let ids: Vec<DeliveryId> = acks.iter().map(|(d, _)| *d).collect();
        let msgs = vec![
            message(&["q0", "q1"], 0, true, format!("inflight{j}")),
            message(&[], 1, true, format!("inflight{j}")),
        ];
        let store = store.clone();
        inflight.push(tokio::spawn(async move {
            store.transactions().commit(1, msgs, &ids).await
        }));
    }
    // Leases not acked by an in-flight commit come back after the crash.
    m.present.extend(leased.map(|(_, k)| k));
    tokio::task::yield_now().await;
    let mode = match rng.gen_range(0..3) {
        0 => CrashMode::Process,
        1 => CrashMode::Machine { seed },
        _ => CrashMode::MachineGarbled { seed },
    };
    let image = disk.crash(mode);
    for t in inflight {
        let _ = t.await;
    }
    drop(store);

    let store = open(&image, segment_bytes).await;
    let mut found: BTreeMap<Key, String> = BTreeMap::new();
    for q in QUEUES {
        for d in store
            .queues()
            .receive(&spec(q, ReceiveMode::Peek, AckMode::Auto), usize::MAX)
            .await
            .unwrap()
        {
            let body = String::from_utf8_lossy(&d.message.body).into_owned();
            assert!(
                !body.starts_with("np-"),
                "seed {seed} {mode:?}: non-persistent {body} on {q} after a crash"
            );
            found.insert((d.message.id, q.to_string()), body);
        }
    }
    for key in &m.present {
        assert!(
            found.contains_key(key),
            "seed {seed} {mode:?}: acknowledged {key:?} lost"
        );
    }
    for key in &m.removed {
        assert!(
            !found.contains_key(key),
            "seed {seed} {mode:?}: removed {key:?} came back"
        );
    }
    let mut outcomes = (0, 0);
    for (j, acked) in uncertain.iter().enumerate() {
        let body = format!("inflight{j}");
        let copies = found.values().filter(|b| **b == body).count();
        if copies == 0 {
            outcomes.1 += 1;
        } else {
            outcomes.0 += 1;
        }
        // q0 and q1 for the send, t:a and t:b for the publish (k = 1).
        assert!(
            copies == 0 || copies == 4,
            "seed {seed} {mode:?}: commit {j} half there ({copies} copies)"
        );
        for key in acked {
            assert_eq!(
                found.contains_key(key),
                copies == 0,
                "seed {seed} {mode:?}: commit {j} and its ack of {key:?} disagree"
            );
        }
    }
    for (key, body) in &found {
        assert!(
            body.starts_with("inflight")
                || m.present.contains(key)
                || uncertain.iter().any(|u| u.contains(key)),
            "seed {seed} {mode:?}: unexpected {key:?} ({body})"
        );
    }
    outcomes
}

#[tokio::test]
async fn crashes_keep_transactions_whole_and_lose_no_acknowledged_publish() {
    let (mut survived, mut lost) = (0, 0);
    for seed in 0..300 {
        let (s, l) = run_case(seed).await;
        survived += s;
        lost += l;
    }
    // Both outcomes of a commit in flight at the crash were exercised.
    assert!(
        survived > 10 && lost > 10,
        "survived {survived}, lost {lost}"
    );
}
