//! Topics of the embedded engine across crashes: random topic and subscription changes,
//! publishes and takes on the faulty backend, a few publishes still in flight when the process
//! or the machine goes down (torn and garbled unsynced tails), then a reopen. Checks, with
//! `fsync = always`, against a model of what was acknowledged:
//! - the topics, their durable subscriptions and selectors are exactly the acknowledged ones;
//!   non-durable subscriptions are gone;
//! - each durable subscription holds exactly its acknowledged messages, in order;
//! - a publish in flight at the crash is on every subscription it matches or on none.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_protocol::{AckMode, PropertyValue, ReceiveMode, SubscriptionOptions};
use ferry_store::embedded::{CrashMode, FaultyBackend};
use ferry_store::{EmbeddedStore, NewMessage, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;
use common::{bodies, msg, open, peek_all, spec};

const TOPICS: [&str; 3] = ["t0", "t1", "t2"];
const SUBS: [&str; 3] = ["s0", "s1", "~c.1"];

/// A subscription as the test knows it: its selector (`k = n`, or none) and its messages.
#[derive(Debug, Clone, Default)]
struct Sub {
    k: Option<i64>,
    messages: Vec<String>,
}

impl Sub {
    fn selector(&self) -> String {
        self.k.map_or(String::new(), |k| format!("k = {k}"))
    }

    fn matches(&self, k: i64) -> bool {
        self.k.is_none_or(|want| want == k)
    }
}

/// Topic -> subscription -> state.
type Model = BTreeMap<String, BTreeMap<String, Sub>>;

fn publish(topic: &str, body: &str, k: i64) -> NewMessage {
    NewMessage {
        queues: Vec::new(),
        topic: Some(topic.into()),
        properties: vec![("k".into(), PropertyValue::Int(k))].into(),
        ..msg(&[], body)
    }
}

/// One random step against `store`, reflected in `model`.
async fn step(store: &EmbeddedStore, model: &mut Model, rng: &mut StdRng, i: usize) {
    let topic = TOPICS[rng.gen_range(0..TOPICS.len())];
    let sub = SUBS[rng.gen_range(0..SUBS.len())];
    match rng.gen_range(0..10) {
        0 => {
            if !model.contains_key(topic) {
                store.topics().create_topic(topic).await.unwrap();
                model.insert(topic.into(), BTreeMap::new());
            }
        }
        1 => {
            if model.remove(topic).is_some() {
                store.topics().delete_topic(topic, true).await.unwrap();
            }
        }
        2 | 3 => {
            let Some(subs) = model.get_mut(topic) else {
                return;
            };
            if subs.contains_key(sub) {
                return;
            }
            let k = match rng.gen_range(0..3) {
                0 => None,
                n => Some(n - 1),
            };
            let state = Sub {
                k,
                messages: Vec::new(),
            };
            let options = SubscriptionOptions {
                durable: !sub.starts_with('~'),
                selector: state.selector(),
                ..SubscriptionOptions::default()
            };
            store
                .topics()
                .subscribe_topic(topic, sub, &options, "c")
                .await
                .unwrap();
            subs.insert(sub.into(), state);
        }
        4 => {
            let Some(subs) = model.get_mut(topic) else {
                return;
            };
            if subs.remove(sub).is_some() {
                store.topics().unsubscribe(topic, sub).await.unwrap();
            }
        }
        5..=7 => {
            let Some(subs) = model.get_mut(topic) else {
                return;
            };
            let k = rng.gen_range(0..2);
            let body = format!("m{i}");
            store.queues().send(publish(topic, &body, k)).await.unwrap();
            for s in subs.values_mut().filter(|s| s.matches(k)) {
                s.messages.push(body.clone());
            }
        }
        _ => {
            let Some(s) = model.get_mut(topic).and_then(|subs| subs.get_mut(sub)) else {
                return;
            };
            let queue = format!("{topic}:{sub}");
            let got = store
                .queues()
                .receive(&spec(&queue, ReceiveMode::Take, AckMode::Auto, 1), 1)
                .await
                .unwrap();
            assert_eq!(
                bodies(&got),
                s.messages.first().cloned().into_iter().collect::<Vec<_>>()
            );
            if !s.messages.is_empty() {
                s.messages.remove(0);
            }
        }
    }
}

/// Runs one case; returns how many acknowledged messages it checked on subscriptions and how
/// many in-flight publishes were found published and absent.
async fn run_case(seed: u64) -> (usize, usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let disk = FaultyBackend::new();
    let segment_bytes = if rng.gen_bool(0.5) { 300 } else { 1 << 20 };
    let store = open(&disk, segment_bytes).await.unwrap();
    for c in ["p", "c"] {
        store.sessions().register_client(c).await.unwrap();
    }
    let mut model = Model::new();
    // Every topic with one subscription to start with, so that publishes land somewhere.
    for topic in TOPICS {
        store.topics().create_topic(topic).await.unwrap();
        let state = Sub {
            k: None,
            messages: Vec::new(),
        };
        store
            .topics()
            .subscribe_topic(
                topic,
                "s0",
                &SubscriptionOptions {
                    durable: true,
                    ..SubscriptionOptions::default()
                },
                "c",
            )
            .await
            .unwrap();
        model.insert(topic.into(), BTreeMap::from([("s0".to_string(), state)]));
    }
    for i in 0..rng.gen_range(1..120) {
        step(&store, &mut model, &mut rng, i).await;
        if rng.gen_range(0..40) == 0 {
            store.upkeep().maintain().await.unwrap();
        }
    }
    // Publishes in flight at the crash: (topic, body, k).
    let mut inflight = Vec::new();
    let live: Vec<String> = model.keys().cloned().collect();
    if !live.is_empty() {
        for j in 0..rng.gen_range(0..4) {
            let topic = live[rng.gen_range(0..live.len())].clone();
            let k = rng.gen_range(0..2);
            let body = format!("inflight{j}");
            let store: Arc<EmbeddedStore> = store.clone();
            let m = publish(&topic, &body, k);
            inflight.push((
                topic,
                body,
                k,
                tokio::spawn(async move { store.queues().send(m).await }),
            ));
        }
    }
    for _ in 0..rng.gen_range(0..4) {
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
    for (topic, body, k, t) in inflight {
        let _ = t.await;
        pending.push((topic, body, k));
    }
    drop(store);

    let store = open(&image, segment_bytes)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    // Non-durable subscriptions end with the process.
    for subs in model.values_mut() {
        subs.retain(|name, _| !name.starts_with('~'));
    }
    let listed = store.topics().list_topics().await.unwrap();
    let got: Vec<(String, Vec<(String, String)>)> = listed
        .iter()
        .map(|t| {
            let subs = t
                .subscriptions
                .iter()
                .map(|s| (s.name.clone(), s.selector.clone()))
                .collect();
            (t.name.clone(), subs)
        })
        .collect();
    let want: Vec<(String, Vec<(String, String)>)> = model
        .iter()
        .map(|(t, subs)| {
            let subs = subs
                .iter()
                .map(|(n, s)| (n.clone(), s.selector()))
                .collect();
            (t.clone(), subs)
        })
        .collect();
    assert_eq!(got, want, "seed {seed}: topics and subscriptions");
    let mut stats = (0, 0, 0);
    for (topic, subs) in &model {
        for (name, s) in subs {
            let all = bodies(&peek_all(&store, &format!("{topic}:{name}")).await);
            let (inflight, acknowledged): (Vec<String>, Vec<String>) =
                all.into_iter().partition(|b| b.starts_with("inflight"));
            assert_eq!(
                acknowledged, s.messages,
                "seed {seed}: messages of {topic}:{name}"
            );
            stats.0 += acknowledged.len();
            for b in &inflight {
                assert!(
                    pending
                        .iter()
                        .any(|(t, pb, k)| t == topic && pb == b && s.matches(*k)),
                    "seed {seed}: {b} on {topic}:{name} it does not match"
                );
            }
        }
    }
    // Each in-flight publish: on all of its matching subscriptions or on none.
    for (topic, body, k) in &pending {
        let Some(subs) = model.get(topic) else {
            continue;
        };
        let mut on = Vec::new();
        for (name, _) in subs.iter().filter(|(_, s)| s.matches(*k)) {
            let here = bodies(&peek_all(&store, &format!("{topic}:{name}")).await).contains(body);
            on.push((name.clone(), here));
        }
        let count = on.iter().filter(|(_, here)| *here).count();
        assert!(
            count == 0 || count == on.len(),
            "seed {seed}: in-flight {body} only partly published: {on:?}"
        );
        if !on.is_empty() {
            if count == 0 {
                stats.2 += 1;
            } else {
                stats.1 += 1;
            }
        }
    }
    stats
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_and_publishes_survive_crashes_as_acknowledged() {
    let mut totals = (0, 0, 0);
    for seed in 0..300 {
        let (checked, published, absent) = run_case(seed).await;
        totals.0 += checked;
        totals.1 += published;
        totals.2 += absent;
    }
    eprintln!(
        "{} acknowledged messages checked; in-flight publishes: {} published, {} absent",
        totals.0, totals.1, totals.2
    );
    // Both outcomes must occur, or the crashes did not cut into publishes.
    assert!(totals.0 > 0 && totals.1 > 0 && totals.2 > 0, "{totals:?}");
}
