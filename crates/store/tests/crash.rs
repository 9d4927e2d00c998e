//! Crash simulation: random operations against a store on the faulty backend, a crash at a
//! random point (process kill, or machine crash with torn and garbled unsynced tails, while more
//! sends are still in flight), then a reopen. Checks the guarantees of `fsync = always`:
//! - every message whose send was acknowledged is there, unless its removal was acknowledged;
//! - nothing whose removal (auto-ack take, ack, drop) was acknowledged comes back;
//! - messages leased with client ack and not settled come back flagged redelivered;
//! - a send still in flight at the crash is on all of its queues or on none.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_protocol::{AckMode, ReceiveMode};
use ferry_store::embedded::{CrashMode, FaultyBackend};
use ferry_store::{EmbeddedStore, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;
use common::{msg, open, peek_all, spec};

const QUEUES: [&str; 3] = ["q0", "q1", "q2"];

/// What the test knows was acknowledged.
#[derive(Default)]
struct Model {
    /// (message id, queue) on the queue, with the delivery count it must at least have.
    present: BTreeMap<(u64, String), u32>,
    /// (message id, queue) whose removal was acknowledged.
    removed: BTreeSet<(u64, String)>,
    /// Delivery id -> (message id, queue).
    leased: BTreeMap<u64, (u64, String)>,
}

async fn run_case(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let disk = FaultyBackend::new();
    let segment_bytes = if rng.gen_bool(0.5) { 300 } else { 1 << 20 };
    let store = open(&disk, segment_bytes).await.unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    for q in QUEUES {
        store.queues().create_queue(q).await.unwrap();
    }
    let mut m = Model::default();
    let ops = rng.gen_range(1..120);
    for i in 0..ops {
        match rng.gen_range(0..10) {
            0..=3 => {
                let mut qs: Vec<&str> = QUEUES
                    .iter()
                    .copied()
                    .filter(|_| rng.gen_bool(0.5))
                    .collect();
                if qs.is_empty() {
                    qs.push(QUEUES[rng.gen_range(0..3)]);
                }
                let id = store
                    .queues()
                    .send(msg(&qs, &format!("s{i}")))
                    .await
                    .unwrap();
                for q in qs {
                    m.present.insert((id, q.to_string()), 0);
                }
            }
            4 | 5 => {
                let q = QUEUES[rng.gen_range(0..3)];
                let client = rng.gen_bool(0.5);
                let ack = if client {
                    AckMode::Client
                } else {
                    AckMode::Auto
                };
                let n = rng.gen_range(1..4);
                for d in store
                    .queues()
                    .receive(&spec(q, ReceiveMode::Take, ack, 1), n)
                    .await
                    .unwrap()
                {
                    let key = (d.message.id, q.to_string());
                    if client {
                        *m.present.get_mut(&key).unwrap() += 1;
                        m.leased.insert(d.delivery_id, key);
                    } else {
                        m.present.remove(&key).unwrap();
                        m.removed.insert(key);
                    }
                }
            }
            6 | 7 => {
                let Some((&did, _)) = m.leased.iter().nth(rng.gen_range(0..m.leased.len().max(1)))
                else {
                    continue;
                };
                let key = m.leased.remove(&did).unwrap();
                match rng.gen_range(0..3) {
                    0 => store.queues().ack(1, &[did]).await.unwrap(),
                    1 => {
                        store.queues().nack(1, &[did], false).await.unwrap();
                    }
                    _ => {
                        store.queues().nack(1, &[did], true).await.unwrap();
                        continue;
                    }
                }
                m.present.remove(&key).unwrap();
                m.removed.insert(key);
            }
            8 => store.upkeep().maintain().await.unwrap(),
            _ => {
                store.sessions().release_session(1).await.unwrap();
                m.leased.clear();
            }
        }
    }

    // Sends still in flight when the machine goes down.
    let mut inflight = Vec::new();
    for j in 0..rng.gen_range(0..4) {
        let store: Arc<EmbeddedStore> = store.clone();
        inflight.push(tokio::spawn(async move {
            store
                .queues()
                .send(msg(&["q0", "q2"], &format!("inflight{j}")))
                .await
        }));
    }
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

    let store = open(&image, segment_bytes)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let mut found: BTreeMap<(u64, String), (u32, String)> = BTreeMap::new();
    for q in QUEUES {
        for d in peek_all(&store, q).await {
            let body = String::from_utf8_lossy(&d.message.body).into_owned();
            found.insert(
                (d.message.id, q.to_string()),
                (d.message.delivery_count, body),
            );
        }
    }
    for (key, min_count) in &m.present {
        let Some((count, _)) = found.get(key) else {
            panic!("seed {seed} {mode:?}: acknowledged {key:?} lost");
        };
        assert!(
            count >= min_count,
            "seed {seed}: {key:?} count {count} < {min_count}"
        );
    }
    for key in m.leased.values() {
        assert!(
            found[key].0 >= 1,
            "seed {seed}: leased {key:?} not flagged redelivered"
        );
    }
    for key in &m.removed {
        assert!(
            !found.contains_key(key),
            "seed {seed} {mode:?}: removed {key:?} came back"
        );
    }
    let mut inflight_seen: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for ((id, q), (_, body)) in &found {
        if body.starts_with("inflight") {
            inflight_seen.entry(*id).or_default().insert(q.clone());
        } else {
            assert!(
                m.present.contains_key(&(*id, q.clone())),
                "seed {seed}: unexpected {id} on {q}"
            );
        }
    }
    for (id, qs) in inflight_seen {
        assert_eq!(
            qs.len(),
            2,
            "seed {seed}: in-flight send {id} half there: {qs:?}"
        );
    }
    // The recovered store works and a second reopen agrees with it.
    store.queues().send(msg(&["q1"], "after")).await.unwrap();
    let before: Vec<_> = peek_all(&store, "q1")
        .await
        .iter()
        .map(|d| d.message.id)
        .collect();
    drop(store);
    let store = open(&image, segment_bytes).await.unwrap();
    let after: Vec<_> = peek_all(&store, "q1")
        .await
        .iter()
        .map(|d| d.message.id)
        .collect();
    assert_eq!(before, after, "seed {seed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_operations_survive_random_crashes() {
    for seed in 0..60 {
        run_case(seed).await;
    }
}
