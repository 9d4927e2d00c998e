//! The embedded engine checked against a simple `BTreeMap` reference model under random
//! operations - sends, takes in both orders and both ack modes, acks, nacks, releases, queue
//! creation and (forced) deletion, compaction, reopen and machine crashes - with tiny segments
//! so that rolling and compaction run all the time. After every operation the queue depths
//! must agree; after every reopen and at the end, every queue's full content (ids and
//! delivery counts) must agree.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferry_protocol::{AckMode, Order, ReceiveMode};
use ferry_store::embedded::{CrashMode, FaultyBackend};
use ferry_store::{EmbeddedStore, Store, StoreError};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

mod common;
use common::{msg, open, spec};

const QUEUES: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Send {
        mask: u8,
        priority: u8,
        body_len: usize,
    },
    Take {
        queue: usize,
        by_priority: bool,
        client_ack: bool,
        max: usize,
    },
    Settle {
        pick: usize,
        how: u8,
    },
    Release,
    Create {
        queue: usize,
    },
    Delete {
        queue: usize,
        force: bool,
    },
    Maintain,
    Reopen {
        crash: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..8, 1u8..=10, 0usize..60)
            .prop_map(|(mask, priority, body_len)| Op::Send { mask, priority, body_len }),
        4 => (0usize..3, any::<bool>(), any::<bool>(), 1usize..4).prop_map(
            |(queue, by_priority, client_ack, max)| Op::Take { queue, by_priority, client_ack, max }
        ),
        3 => (any::<usize>(), 0u8..3).prop_map(|(pick, how)| Op::Settle { pick, how }),
        1 => Just(Op::Release),
        1 => (0usize..3).prop_map(|queue| Op::Create { queue }),
        1 => (0usize..3, any::<bool>()).prop_map(|(queue, force)| Op::Delete { queue, force }),
        2 => Just(Op::Maintain),
        1 => any::<bool>().prop_map(|crash| Op::Reopen { crash }),
    ]
}

#[derive(Debug, Clone)]
struct RefMsg {
    priority: u8,
    count: u32,
    leased: bool,
}

/// The reference: per queue, message id -> state.
#[derive(Debug, Default)]
struct Model {
    queues: BTreeMap<String, BTreeMap<u64, RefMsg>>,
    leases: BTreeMap<u64, (u64, String)>,
    last_id: u64,
}

static SEGMENTS_DELETED: AtomicUsize = AtomicUsize::new(0);

async fn check_depths(store: &EmbeddedStore, m: &Model) {
    let got: Vec<(String, u64, u64)> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| (q.name, q.ready, q.in_flight))
        .collect();
    let want: Vec<(String, u64, u64)> = m
        .queues
        .iter()
        .map(|(name, msgs)| {
            let leased = msgs.values().filter(|x| x.leased).count() as u64;
            (name.clone(), msgs.len() as u64 - leased, leased)
        })
        .collect();
    assert_eq!(got, want);
}

async fn check_contents(store: &EmbeddedStore, m: &Model) {
    check_depths(store, m).await;
    for (name, msgs) in &m.queues {
        let got: Vec<(u64, u32)> = common::peek_all(store, name)
            .await
            .iter()
            .map(|d| (d.message.id, d.message.delivery_count))
            .collect();
        let want: Vec<(u64, u32)> = msgs
            .iter()
            .filter(|(_, x)| !x.leased)
            .map(|(id, x)| (*id, x.count))
            .collect();
        assert_eq!(got, want, "queue {name}");
    }
}

async fn run(segment_bytes: u64, ops: Vec<Op>) {
    let mut disk = FaultyBackend::new();
    let mut store = open(&disk, segment_bytes).await.unwrap();
    store.sessions().register_client("p").await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    let mut m = Model::default();
    for q in QUEUES {
        store.queues().create_queue(q).await.unwrap();
        m.queues.insert(q.into(), BTreeMap::new());
    }
    for op in ops {
        match op {
            Op::Send {
                mask,
                priority,
                body_len,
            } => {
                let qs: Vec<&str> = (0..3)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| QUEUES[i])
                    .collect();
                let mut message = msg(&qs, &"x".repeat(body_len));
                message.priority = priority;
                let result = store.queues().send(message).await;
                match qs.iter().find(|q| !m.queues.contains_key(**q)) {
                    Some(missing) => {
                        assert_eq!(result, Err(StoreError::QueueNotFound(missing.to_string())))
                    }
                    None => {
                        let id = result.unwrap();
                        assert!(id > m.last_id);
                        m.last_id = id;
                        for q in qs {
                            let x = RefMsg {
                                priority,
                                count: 0,
                                leased: false,
                            };
                            m.queues.get_mut(q).unwrap().insert(id, x);
                        }
                    }
                }
            }
            Op::Take {
                queue,
                by_priority,
                client_ack,
                max,
            } => {
                let q = QUEUES[queue];
                let mut s = spec(
                    q,
                    ReceiveMode::Take,
                    if client_ack {
                        AckMode::Client
                    } else {
                        AckMode::Auto
                    },
                    1,
                );
                s.order = if by_priority {
                    Order::Priority
                } else {
                    Order::Time
                };
                let result = store.queues().receive(&s, max).await;
                let Some(msgs) = m.queues.get_mut(q) else {
                    assert_eq!(result, Err(StoreError::QueueNotFound(q.into())));
                    continue;
                };
                let mut ready: Vec<(u64, &RefMsg)> = msgs
                    .iter()
                    .filter(|(_, x)| !x.leased)
                    .map(|(id, x)| (*id, x))
                    .collect();
                if by_priority {
                    ready.sort_by_key(|(id, x)| (std::cmp::Reverse(x.priority), *id));
                }
                let want: Vec<(u64, u32)> = ready
                    .iter()
                    .take(max)
                    .map(|(id, x)| (*id, x.count))
                    .collect();
                let got = result.unwrap();
                let got_ids: Vec<(u64, u32)> = got
                    .iter()
                    .map(|d| (d.message.id, d.message.delivery_count))
                    .collect();
                assert_eq!(got_ids, want);
                for d in got {
                    let id = d.message.id;
                    if client_ack {
                        let x = msgs.get_mut(&id).unwrap();
                        x.count += 1;
                        x.leased = true;
                        m.leases.insert(d.delivery_id, (id, q.to_string()));
                    } else {
                        msgs.remove(&id);
                    }
                }
            }
            Op::Settle { pick, how } => {
                if m.leases.is_empty() {
                    continue;
                }
                let did = *m.leases.keys().nth(pick % m.leases.len()).unwrap();
                let (id, q) = m.leases.remove(&did).unwrap();
                let msgs = m.queues.get_mut(&q).unwrap();
                match how {
                    0 => {
                        store.queues().ack(1, &[did]).await.unwrap();
                        msgs.remove(&id);
                    }
                    1 => {
                        assert!(store
                            .queues()
                            .nack(1, &[did], false)
                            .await
                            .unwrap()
                            .is_empty());
                        msgs.remove(&id);
                    }
                    _ => {
                        assert_eq!(
                            store.queues().nack(1, &[did], true).await.unwrap(),
                            vec![q.clone()]
                        );
                        msgs.get_mut(&id).unwrap().leased = false;
                    }
                }
                assert_eq!(
                    store.queues().ack(1, &[did]).await,
                    Err(StoreError::DeliveriesNotFound(vec![did]))
                );
            }
            Op::Release => {
                store.sessions().release_session(1).await.unwrap();
                for (_, (id, q)) in std::mem::take(&mut m.leases) {
                    m.queues.get_mut(&q).unwrap().get_mut(&id).unwrap().leased = false;
                }
            }
            Op::Create { queue } => {
                let q = QUEUES[queue];
                let result = store.queues().create_queue(q).await;
                if m.queues.contains_key(q) {
                    assert_eq!(result, Err(StoreError::QueueExists(q.into())));
                } else {
                    result.unwrap();
                    m.queues.insert(q.into(), BTreeMap::new());
                }
            }
            Op::Delete { queue, force } => {
                let q = QUEUES[queue];
                let result = store.queues().delete_queue(q, force).await;
                match m.queues.get(q) {
                    None => assert_eq!(result, Err(StoreError::QueueNotFound(q.into()))),
                    Some(msgs) if !msgs.is_empty() && !force => assert_eq!(
                        result,
                        Err(StoreError::QueueNotEmpty {
                            name: q.into(),
                            depth: msgs.len() as u64
                        })
                    ),
                    Some(_) => {
                        result.unwrap();
                        m.queues.remove(q);
                        m.leases.retain(|_, (_, lq)| lq != q);
                    }
                }
            }
            Op::Maintain => {
                let before = store.segments().len();
                store.upkeep().maintain().await.unwrap();
                let after = store.segments().len();
                SEGMENTS_DELETED.fetch_add(before.saturating_sub(after), Ordering::Relaxed);
            }
            Op::Reopen { crash } => {
                if crash {
                    disk = disk.crash(CrashMode::MachineGarbled { seed: m.last_id });
                }
                drop(store);
                store = open(&disk, segment_bytes).await.unwrap();
                for (_, (id, q)) in std::mem::take(&mut m.leases) {
                    m.queues.get_mut(&q).unwrap().get_mut(&id).unwrap().leased = false;
                }
                check_contents(&store, &m).await;
            }
        }
        check_depths(&store, &m).await;
    }
    check_contents(&store, &m).await;
    // Compaction keeps exactly the live messages, and a reopen after it agrees.
    store.upkeep().maintain().await.unwrap();
    check_contents(&store, &m).await;
    drop(store);
    let store = open(&disk, segment_bytes).await.unwrap();
    store.sessions().release_session(1).await.unwrap();
    for (_, (id, q)) in std::mem::take(&mut m.leases) {
        m.queues.get_mut(&q).unwrap().get_mut(&id).unwrap().leased = false;
    }
    check_contents(&store, &m).await;
}

#[test]
fn engine_matches_reference_model() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop_oneof![Just(128u64), Just(256), Just(1024)],
        prop::collection::vec(op(), 1..120),
    );
    runner
        .run(&strategy, |(segment_bytes, ops)| {
            rt.block_on(run(segment_bytes, ops));
            Ok(())
        })
        .unwrap();
    assert!(
        SEGMENTS_DELETED.load(Ordering::Relaxed) > 0,
        "compaction never deleted a segment"
    );
}
