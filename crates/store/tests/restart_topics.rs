//! Topics, subscriptions, non-persistent messages and transactions of the embedded engine
//! across a reopen (and a torn log): durable subscriptions keep their settings and backlog,
//! non-durable subscriptions and non-persistent messages are gone (the latter never reach the
//! log), and a committed transaction is there entirely or, when its records are torn, not at
//! all.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_protocol::{
    AckMode, Order, PropertyValue, QueueOptions, ReceiveMode, SubscriptionOptions,
};
use ferry_store::embedded::FaultyBackend;
use ferry_store::{EmbeddedStore, NewMessage, ReceiveSpec, Store, StoreError};

mod common;
use common::{bodies, msg, open, peek_all, segments, spec};

/// Segments small enough that the tests span several.
const SMALL: u64 = 300;
/// One segment for everything.
const BIG: u64 = 1 << 30;

/// A message from "p" published to `topic`.
fn publish(topic: &str, body: &str) -> NewMessage {
    NewMessage {
        queues: Vec::new(),
        topic: Some(topic.into()),
        ..msg(&[], body)
    }
}

/// `m` with a string property `region`.
fn in_region(m: NewMessage, region: &str) -> NewMessage {
    NewMessage {
        properties: vec![("region".into(), PropertyValue::Str(region.into()))].into(),
        ..m
    }
}

/// `m` made non-persistent.
fn transient(m: NewMessage) -> NewMessage {
    NewMessage {
        persistent: false,
        ..m
    }
}

fn durable(selector: &str) -> SubscriptionOptions {
    SubscriptionOptions {
        durable: true,
        selector: selector.into(),
        ..SubscriptionOptions::default()
    }
}

fn non_durable() -> SubscriptionOptions {
    SubscriptionOptions::default()
}

/// Shared and durable, one delivery before the dead-letter queue `dlq`.
fn shared_once_to_dlq() -> SubscriptionOptions {
    SubscriptionOptions {
        shared: true,
        queue: once_to_dlq(),
        ..durable("")
    }
}

/// One delivery, then the dead-letter queue `dlq`.
fn once_to_dlq() -> QueueOptions {
    QueueOptions {
        max_deliveries: 1,
        dead_letter_queue: Some("dlq".into()),
        expiry_queue: None,
    }
}

/// What a test starts from: clients `p` and `c` (and `more`), plain queues, queues whose
/// messages go to `dlq` after one delivery, topics, and subscriptions (topic, name, options)
/// of client `c`.
#[derive(Default)]
struct World<'a> {
    more_clients: &'a [&'a str],
    queues: &'a [&'a str],
    once_queues: &'a [&'a str],
    topics: &'a [&'a str],
    subscriptions: Vec<(&'a str, &'a str, SubscriptionOptions)>,
}

impl World<'_> {
    /// Opens a store on `disk` and builds this world in it.
    async fn open(&self, disk: &FaultyBackend, segment_bytes: u64) -> Arc<EmbeddedStore> {
        let store = open(disk, segment_bytes).await.unwrap();
        self.build(&store).await;
        store
    }

    /// Builds this world in `store`.
    async fn build(&self, store: &EmbeddedStore) {
        for c in ["p", "c"].iter().chain(self.more_clients) {
            store.sessions().register_client(c).await.unwrap();
        }
        for q in self.queues {
            store.queues().create_queue(q).await.unwrap();
        }
        for q in self.once_queues {
            store
                .queues()
                .create_queue_with(q, &once_to_dlq())
                .await
                .unwrap();
        }
        for t in self.topics {
            store.topics().create_topic(t).await.unwrap();
        }
        for (topic, name, options) in &self.subscriptions {
            store
                .topics()
                .subscribe_topic(topic, name, options, "c")
                .await
                .unwrap();
        }
    }
}

/// Queue `dlq`, topics `t` and `gone`; on `t` the durable subscriptions `eu` (selector
/// `region = 'eu'`), `all` ([`shared_once_to_dlq`]) and `dropped`, on `gone` one called `s`.
fn topics_world() -> World<'static> {
    World {
        queues: &["dlq"],
        topics: &["t", "gone"],
        subscriptions: vec![
            ("t", "eu", durable("region = 'eu'")),
            ("t", "all", shared_once_to_dlq()),
            ("t", "dropped", durable("")),
            ("gone", "s", durable("")),
        ],
        ..World::default()
    }
}

/// A queue `q` (and `r`, `dlq` as asked), topic `t` with the durable subscription `s`.
fn one_subscription(queues: &'static [&'static str]) -> World<'static> {
    World {
        queues,
        topics: &["t"],
        subscriptions: vec![("t", "s", durable(""))],
        ..World::default()
    }
}

/// Sends each message in turn; every send must succeed.
async fn send_all(store: &EmbeddedStore, msgs: impl IntoIterator<Item = NewMessage>) {
    for m in msgs {
        store.queues().send(m).await.unwrap();
    }
}

/// Asserts the ready bodies of each queue, in time order.
async fn expect_ready(store: &EmbeddedStore, want: &[(&str, &[&str])]) {
    for (queue, bodies) in want {
        assert_eq!(&ready(store, queue).await, bodies, "ready on {queue}");
    }
}

/// Opens the store on `disk` once more (the previous one dropped).
async fn reopen(
    store: Arc<EmbeddedStore>,
    disk: &FaultyBackend,
    segment_bytes: u64,
) -> Arc<EmbeddedStore> {
    drop(store);
    open(disk, segment_bytes).await.unwrap()
}

/// Bodies of the ready messages of `queue`, in time order.
async fn ready(store: &EmbeddedStore, queue: &str) -> Vec<String> {
    bodies(&peek_all(store, queue).await)
}

/// (name, durable, shared, selector, ready, in flight) of every subscription of `topic`.
async fn subscriptions(
    store: &EmbeddedStore,
    topic: &str,
) -> Vec<(String, bool, bool, String, u64, u64)> {
    let topics = store.topics().list_topics().await.unwrap();
    let t = topics
        .iter()
        .find(|t| t.name == topic)
        .unwrap_or_else(|| panic!("topic '{topic}' missing from {topics:?}"));
    t.subscriptions
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.durable,
                s.shared,
                s.selector.clone(),
                s.ready,
                s.in_flight,
            )
        })
        .collect()
}

/// A durable subscription keeps its settings (selector, shared, queue options) and its backlog
/// across a reopen, an unsettled delivery of it coming back redelivered; deleted topics and
/// removed subscriptions stay gone; new ids are above the old ones.
#[tokio::test]
async fn durable_subscription_backlog_survives_reopen() {
    let disk = FaultyBackend::new();
    let store = topics_world().open(&disk, SMALL).await;
    let mut last = 0;
    for (i, region) in ["eu", "us", "eu", "us", "eu"].iter().enumerate() {
        last = store
            .queues()
            .send(in_region(publish("t", &format!("m{i}")), region))
            .await
            .unwrap();
    }
    store.topics().unsubscribe("t", "dropped").await.unwrap();
    store.topics().delete_topic("gone", true).await.unwrap();
    // eu: m0 leased and not settled, m2 taken; all: m0 leased and acked.
    let lease = |q: &str| spec(q, ReceiveMode::Take, AckMode::Client, 1);
    let d = store.queues().receive(&lease("t:eu"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["m0"]);
    let take = spec("t:eu", ReceiveMode::Take, AckMode::Auto, 1);
    store.queues().receive(&take, 1).await.unwrap();
    let d = store.queues().receive(&lease("t:all"), 1).await.unwrap();
    store.queues().ack(1, &[d[0].delivery_id]).await.unwrap();
    assert!(
        store.segments().len() > 1,
        "the test should span several segments"
    );

    let store = reopen(store, &disk, SMALL).await;
    let names: Vec<String> = store
        .topics()
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["t"], "the deleted topic stays deleted");
    assert_eq!(
        subscriptions(&store, "t").await,
        vec![
            ("all".into(), true, true, String::new(), 4, 0),
            ("eu".into(), true, false, "region = 'eu'".into(), 2, 0),
        ],
        "durable subscriptions with their settings and backlog; the removed one stays removed"
    );
    let eu = peek_all(&store, "t:eu").await;
    assert_eq!(bodies(&eu), vec!["m0", "m4"]);
    assert_eq!(
        eu[0].message.delivery_count, 1,
        "the unsettled delivery comes back redelivered"
    );
    assert_eq!(ready(&store, "t:all").await, vec!["m1", "m2", "m3", "m4"]);
    // The selector still applies to new publishes; ids go on above the old ones.
    let id = store
        .queues()
        .send(in_region(publish("t", "after-eu"), "eu"))
        .await
        .unwrap();
    assert!(id > last, "new id {id} above {last}");
    store
        .queues()
        .send(in_region(publish("t", "after-us"), "us"))
        .await
        .unwrap();
    assert_eq!(ready(&store, "t:eu").await, vec!["m0", "m4", "after-eu"]);
    // The queue options still apply: one delivery, then the dead-letter queue.
    let d = store.queues().receive(&lease("t:all"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1"]);
    store
        .queues()
        .nack(1, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(ready(&store, "dlq").await, vec!["m1"]);
    assert_eq!(
        store.topics().create_topic("t").await,
        Err(StoreError::TopicExists("t".into()))
    );
}

/// Non-durable subscriptions, with their messages, are gone after a reopen (their owners'
/// sessions ended with the process); durable ones of the same topic stay.
#[tokio::test]
async fn non_durable_subscriptions_are_gone_after_reopen() {
    let disk = FaultyBackend::new();
    let store = World {
        more_clients: &["d"],
        topics: &["t"],
        subscriptions: vec![("t", "keep", durable("")), ("t", "~c.1", non_durable())],
        ..World::default()
    }
    .open(&disk, SMALL)
    .await;
    store
        .topics()
        .subscribe_topic("t", "~d.1", &non_durable(), "d")
        .await
        .unwrap();
    for i in 0..3 {
        store
            .queues()
            .send(publish("t", &format!("m{i}")))
            .await
            .unwrap();
    }
    store
        .queues()
        .receive(&spec("t:~c.1", ReceiveMode::Take, AckMode::Client, 1), 1)
        .await
        .unwrap();
    assert_eq!(subscriptions(&store, "t").await.len(), 3);

    let store = reopen(store, &disk, SMALL).await;
    assert_eq!(
        subscriptions(&store, "t").await,
        vec![("keep".into(), true, false, String::new(), 3, 0)],
        "only the durable subscription is left"
    );
    let take = spec("t:~c.1", ReceiveMode::Take, AckMode::Auto, 1);
    assert_eq!(
        store.queues().receive(&take, 10).await,
        Err(StoreError::QueueNotFound("t:~c.1".into())),
        "the non-durable subscription's queue is gone"
    );
    assert_eq!(
        store.topics().unsubscribe("t", "~d.1").await,
        Err(StoreError::SubscriptionNotFound("t:~d.1".into()))
    );
    // Its name is free again, for an empty subscription; and it stays gone after one more
    // reopen.
    store
        .topics()
        .subscribe_topic("t", "~c.1", &non_durable(), "c")
        .await
        .unwrap();
    assert!(ready(&store, "t:~c.1").await.is_empty());
    let store = reopen(store, &disk, SMALL).await;
    assert_eq!(subscriptions(&store, "t").await.len(), 1);
    assert_eq!(
        store.topics().delete_topic("t", false).await,
        Err(StoreError::TopicNotEmpty {
            name: "t".into(),
            depth: 3
        })
    );
}

/// Non-persistent messages, wherever they are (ready, leased, nacked back, on a subscription,
/// dead-lettered), are gone after a reopen; persistent ones around them are all there.
#[tokio::test]
async fn non_persistent_messages_are_gone_after_reopen() {
    let disk = FaultyBackend::new();
    let store = World {
        once_queues: &["q"],
        ..one_subscription(&["dlq", "r"])
    }
    .open(&disk, SMALL)
    .await;
    send_all(
        &store,
        [
            msg(&["q"], "p1"),
            transient(msg(&["q", "r"], "n1")),
            msg(&["q", "r"], "p2"),
            transient(msg(&["q"], "n2")),
            transient(msg(&["q"], "n3")),
            transient(publish("t", "n-pub")),
            publish("t", "p-pub"),
        ],
    )
    .await;
    // n1 leased and unsettled; n2 nacked over the maximum into dlq; n3 left ready.
    let lease = spec("q", ReceiveMode::Take, AckMode::Client, 1);
    let d = store.queues().receive(&lease, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["p1", "n1"]);
    store.queues().ack(1, &[d[0].delivery_id]).await.unwrap();
    let n2 = spec("q", ReceiveMode::Take, AckMode::Client, 2);
    let d = store.queues().receive(&n2, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["p2", "n2"]);
    store
        .queues()
        .nack(2, &[d[0].delivery_id], true)
        .await
        .unwrap();
    store
        .queues()
        .nack(2, &[d[1].delivery_id], true)
        .await
        .unwrap();
    expect_ready(
        &store,
        &[
            ("dlq", &["p2", "n2"]),
            ("q", &["n3"]),
            ("t:s", &["n-pub", "p-pub"]),
        ],
    )
    .await;

    // The leased and the ready non-persistent messages are gone, and so is the dead-letter
    // copy of one (it is non-persistent too).
    let store = reopen(store, &disk, SMALL).await;
    expect_ready(
        &store,
        &[
            ("q", &[]),
            ("r", &["p2"]),
            ("dlq", &["p2"]),
            ("t:s", &["p-pub"]),
        ],
    )
    .await;
    let depths: BTreeMap<String, (u64, u64)> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| (q.name, (q.ready, q.in_flight)))
        .collect();
    assert_eq!(
        depths,
        BTreeMap::from([
            ("dlq".to_string(), (1, 0)),
            ("q".to_string(), (0, 0)),
            ("r".to_string(), (1, 0)),
        ])
    );
}

/// Sending, publishing, receiving and settling non-persistent messages writes nothing to the
/// log.
#[tokio::test]
async fn non_persistent_messages_write_nothing_to_the_log() {
    let disk = FaultyBackend::new();
    let store = World {
        once_queues: &["q"],
        ..one_subscription(&["dlq"])
    }
    .open(&disk, BIG)
    .await;
    let before = disk.files();
    let writes = disk.write_count();
    for i in 0..4 {
        store
            .queues()
            .send(transient(msg(&["q"], &format!("n{i}"))))
            .await
            .unwrap();
    }
    let batch = vec![transient(msg(&["q"], "b1")), transient(publish("t", "b2"))];
    for r in store.queues().send_batch(batch).await {
        r.unwrap();
    }
    store
        .queues()
        .send(transient(publish("t", "pub")))
        .await
        .unwrap();
    let mut lease = spec("q", ReceiveMode::Take, AckMode::Client, 1);
    lease.lease_until_ms = 1_000;
    let d = store.queues().receive(&lease, 4).await.unwrap();
    assert_eq!(bodies(&d), vec!["n0", "n1", "n2", "n3"]);
    store.queues().ack(1, &[d[0].delivery_id]).await.unwrap();
    store
        .queues()
        .nack(1, &[d[1].delivery_id], false)
        .await
        .unwrap();
    store
        .queues()
        .nack(1, &[d[2].delivery_id], true)
        .await
        .unwrap(); // over the maximum: to dlq
    store.upkeep().expire_leases(1_000).await.unwrap(); // n3 too
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    assert_eq!(
        bodies(&store.queues().receive(&take, 10).await.unwrap()),
        vec!["b1"]
    );
    let sub = spec("t:s", ReceiveMode::Take, AckMode::Client, 2);
    let d = store.queues().receive(&sub, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["b2", "pub"]);
    store.queues().ack(2, &[d[0].delivery_id]).await.unwrap();
    store.sessions().release_session(2).await.unwrap();
    assert_eq!(ready(&store, "dlq").await, vec!["n2", "n3"]);
    let dlq = spec("dlq", ReceiveMode::Take, AckMode::Auto, 1);
    store.queues().receive(&dlq, 10).await.unwrap();
    store.upkeep().purge_expired(u64::MAX / 2).await.unwrap();
    assert_eq!(
        disk.files(),
        before,
        "no file grew for non-persistent messages and their settling"
    );
    assert_eq!(disk.write_count(), writes, "no write at all");
}

/// A committed transaction (sends, publishes, acks) is entirely there after a reopen.
#[tokio::test]
async fn committed_transaction_is_entirely_there_after_reopen() {
    let disk = FaultyBackend::new();
    let store = open(&disk, SMALL).await.unwrap();
    let (held, h) = transaction_setup(&store).await;
    let ids = commit(&store, held).await;

    let store = reopen(store, &disk, SMALL).await;
    assert_eq!(state(&store).await, committed_state(h, &ids));
    assert_eq!(
        store
            .queues()
            .list_queues()
            .await
            .unwrap()
            .iter()
            .map(|q| (q.name.as_str(), q.ready, q.in_flight))
            .collect::<Vec<_>>(),
        vec![("q1", 2, 0), ("q2", 2, 0)]
    );
}

/// The queues and subscription queues [`state`] looks at.
const WATCHED: [&str; 4] = ["q1", "q2", "t:a", "t:b"];

/// Queues q1, q2, topic t with subscriptions a (all) and b (`region = 'eu'`); h1, h2 on q1
/// leased by session 1. Returns those deliveries and the ids of h1, h2.
async fn transaction_setup(store: &EmbeddedStore) -> ((u64, u64), (u64, u64)) {
    let world = World {
        queues: &["q1", "q2"],
        topics: &["t"],
        subscriptions: vec![
            ("t", "a", durable("")),
            ("t", "b", durable("region = 'eu'")),
        ],
        ..World::default()
    };
    world.build(store).await;
    let h1 = store.queues().send(msg(&["q1"], "h1")).await.unwrap();
    let h2 = store.queues().send(msg(&["q1"], "h2")).await.unwrap();
    let d = store
        .queues()
        .receive(&spec("q1", ReceiveMode::Take, AckMode::Client, 1), 2)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["h1", "h2"]);
    ((d[0].delivery_id, d[1].delivery_id), (h1, h2))
}

/// Commits sends, publishes and the ack of the first held delivery; returns the ids.
async fn commit(store: &EmbeddedStore, held: (u64, u64)) -> Vec<u64> {
    let ids = store
        .transactions()
        .commit(
            1,
            vec![
                msg(&["q1", "q2"], "s1"),
                in_region(publish("t", "p-eu"), "eu"),
                msg(&["q2"], "s2"),
                in_region(publish("t", "p-us"), "us"),
            ],
            &[held.0],
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 4);
    ids
}

/// For every watched queue: (id, body, delivery count) of its ready messages, in time order.
type State = Vec<(String, Vec<(u64, String, u32)>)>;

async fn state(store: &EmbeddedStore) -> State {
    let mut out = Vec::new();
    for q in WATCHED {
        let got = peek_all(store, q).await;
        let msgs = got
            .iter()
            .map(|d| {
                (
                    d.message.id,
                    String::from_utf8_lossy(&d.message.body).into_owned(),
                    d.message.delivery_count,
                )
            })
            .collect();
        out.push((q.to_string(), msgs));
    }
    out
}

/// The state after a reopen when the commit of [`commit`] is there: h1 acked, h2 back
/// (redelivered), every message stored.
fn committed_state(h: (u64, u64), ids: &[u64]) -> State {
    let m = |id: u64, body: &str, count: u32| (id, body.to_string(), count);
    vec![
        ("q1".into(), vec![m(h.1, "h2", 1), m(ids[0], "s1", 0)]),
        ("q2".into(), vec![m(ids[0], "s1", 0), m(ids[2], "s2", 0)]),
        (
            "t:a".into(),
            vec![m(ids[1], "p-eu", 0), m(ids[3], "p-us", 0)],
        ),
        ("t:b".into(), vec![m(ids[1], "p-eu", 0)]),
    ]
}

/// The state after a reopen when the commit is not there: h1 and h2 back (redelivered),
/// nothing else.
fn uncommitted_state(h: (u64, u64)) -> State {
    vec![
        (
            "q1".into(),
            vec![(h.0, "h1".into(), 1), (h.1, "h2".into(), 1)],
        ),
        ("q2".into(), Vec::new()),
        ("t:a".into(), Vec::new()),
        ("t:b".into(), Vec::new()),
    ]
}

/// The state of a store opened on a disk holding just `bytes` as its one segment.
async fn state_of(path: &std::path::Path, bytes: Vec<u8>) -> State {
    let disk = FaultyBackend::new();
    disk.set_file(path, bytes);
    let store = open(&disk, BIG)
        .await
        .unwrap_or_else(|e| panic!("a torn tail must open: {e}"));
    state(&store).await
}

/// A commit whose records are torn at any byte, or garbled at any byte, is entirely absent
/// after recovery; complete, it is entirely there.
#[tokio::test]
async fn torn_commit_is_all_or_nothing() {
    let disk = FaultyBackend::new();
    let store = open(&disk, BIG).await.unwrap();
    let (held, h) = transaction_setup(&store).await;
    let (path, before) = segments(&disk).pop().expect("one segment holds everything");
    let ids = commit(&store, held).await;
    assert_eq!(segments(&disk).len(), 1, "still one segment");
    // The bytes as the commit left them (before anything a close might write).
    let bytes = disk.file(&path).unwrap();
    drop(store);
    assert!(bytes.len() > before, "the commit wrote to the segment");
    assert_eq!(
        state_of(&path, bytes.clone()).await,
        committed_state(h, &ids),
        "complete: all of it"
    );
    for cut in before..bytes.len() {
        assert_eq!(
            state_of(&path, bytes[..cut].to_vec()).await,
            uncommitted_state(h),
            "torn at byte {cut} of {before}..{}: none of it",
            bytes.len()
        );
    }
    for at in before..bytes.len() {
        let mut garbled = bytes.clone();
        garbled[at] ^= 0x10;
        assert_eq!(
            state_of(&path, garbled).await,
            uncommitted_state(h),
            "garbled at byte {at} of {before}..{}: none of it",
            bytes.len()
        );
    }
}

/// Topics and subscriptions (settings, backlog, removals) survive compaction moving their
/// records forward, and a reopen after it.
#[tokio::test]
async fn topics_survive_compaction_and_reopen() {
    let disk = FaultyBackend::new();
    let store = topics_world().open(&disk, 512).await;
    // In priority order, so that a take gets the message just published, not a kept one.
    let take = |q: &str| ReceiveSpec {
        order: Order::Priority,
        ..spec(q, ReceiveMode::Take, AckMode::Auto, 1)
    };
    for i in 0..200 {
        let region = if i % 2 == 0 { "eu" } else { "us" };
        // Keep every 25th message (low priority) on both subscriptions.
        let kept = i % 25 == 0;
        let mut m = in_region(publish("t", &format!("m{i}")), region);
        m.priority = if kept { 1 } else { 9 };
        store.queues().send(m).await.unwrap();
        if !kept {
            store.queues().receive(&take("t:all"), 1).await.unwrap();
            if region == "eu" {
                store.queues().receive(&take("t:eu"), 1).await.unwrap();
            }
        }
        if i == 100 {
            store.topics().unsubscribe("t", "dropped").await.unwrap();
            store.topics().delete_topic("gone", true).await.unwrap();
        }
    }
    let before = store.segments().len();
    let listed = store.topics().list_topics().await.unwrap();
    let kept_all = ready(&store, "t:all").await;
    let kept_eu = ready(&store, "t:eu").await;
    assert_eq!(
        kept_all,
        vec!["m0", "m25", "m50", "m75", "m100", "m125", "m150", "m175"]
    );
    assert_eq!(kept_eu, vec!["m0", "m50", "m100", "m150"]);
    for _ in 0..20 {
        store.upkeep().maintain().await.unwrap();
    }
    let after = store.segments().len();
    assert!(
        after * 2 < before,
        "compaction should drop segments: {before} before, {after} after"
    );
    assert_eq!(store.topics().list_topics().await.unwrap(), listed);

    let store = reopen(store, &disk, 512).await;
    assert_eq!(
        store.topics().list_topics().await.unwrap(),
        listed,
        "topics, subscriptions and their depths after compaction and reopen"
    );
    assert_eq!(ready(&store, "t:all").await, kept_all);
    assert_eq!(ready(&store, "t:eu").await, kept_eu);
    store
        .queues()
        .send(in_region(publish("t", "new-us"), "us"))
        .await
        .unwrap();
    assert_eq!(
        ready(&store, "t:eu").await,
        kept_eu,
        "the selector still applies"
    );
    let d = store
        .queues()
        .receive(&spec("t:all", ReceiveMode::Take, AckMode::Client, 1), 1)
        .await
        .unwrap();
    store
        .queues()
        .nack(1, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(
        ready(&store, "dlq").await,
        vec!["m0"],
        "the queue options still apply"
    );
}

/// The non-persistent messages of a committed transaction are gone after a reopen; its
/// persistent messages and its acks (of persistent and non-persistent deliveries) stay done.
#[tokio::test]
async fn committed_non_persistent_messages_are_gone_after_reopen() {
    let disk = FaultyBackend::new();
    let store = one_subscription(&["q"]).open(&disk, SMALL).await;
    send_all(
        &store,
        [msg(&["q"], "held-p"), transient(msg(&["q"], "held-n"))],
    )
    .await;
    let d = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Client, 1), 2)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["held-p", "held-n"]);
    let ids = store
        .transactions()
        .commit(
            1,
            vec![
                msg(&["q"], "tx-p"),
                transient(msg(&["q"], "tx-n")),
                transient(publish("t", "tx-pub-n")),
                publish("t", "tx-pub-p"),
            ],
            &[d[0].delivery_id, d[1].delivery_id],
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 4);
    assert_eq!(ready(&store, "q").await, vec!["tx-p", "tx-n"]);

    let store = reopen(store, &disk, SMALL).await;
    expect_ready(&store, &[("q", &["tx-p"]), ("t:s", &["tx-pub-p"])]).await;
}

/// A batch mixing persistent and non-persistent sends and publishes keeps, after a reopen,
/// exactly its persistent messages; new ids stay above every persistent one.
#[tokio::test]
async fn mixed_batch_keeps_only_persistent_messages_after_reopen() {
    let disk = FaultyBackend::new();
    let store = one_subscription(&["q", "r"]).open(&disk, SMALL).await;
    let results = store
        .queues()
        .send_batch(vec![
            msg(&["q", "r"], "p1"),
            transient(msg(&["q", "r"], "n1")),
            transient(publish("t", "n-pub")),
            publish("t", "p-pub"),
            msg(&["q"], "p2"),
            transient(msg(&["q"], "n2")),
        ])
        .await;
    let ids: Vec<u64> = results.into_iter().map(Result::unwrap).collect();
    let persistent_max = [ids[0], ids[3], ids[4]].into_iter().max().unwrap();
    // The copy of n1 on r is taken; the one on q stays.
    let take = spec("r", ReceiveMode::Take, AckMode::Auto, 1);
    let got = store.queues().receive(&take, 2).await.unwrap();
    assert_eq!(bodies(&got), vec!["p1", "n1"]);

    let store = reopen(store, &disk, SMALL).await;
    expect_ready(
        &store,
        &[("q", &["p1", "p2"]), ("r", &[]), ("t:s", &["p-pub"])],
    )
    .await;
    let id = store.queues().send(msg(&["q"], "after")).await.unwrap();
    assert!(
        id > persistent_max,
        "new id {id} must be above the persistent {persistent_max}"
    );
}

/// Compaction, moving live messages forward, leaves non-persistent ones out of the log: they
/// are still there until the reopen and gone after it.
#[tokio::test]
async fn compaction_does_not_persist_non_persistent_messages() {
    let disk = FaultyBackend::new();
    let store = one_subscription(&["q", "churn"]).open(&disk, 512).await;
    send_all(
        &store,
        [
            msg(&["q"], "p-old"),
            transient(msg(&["q"], "n-old")),
            transient(publish("t", "n-pub")),
            publish("t", "p-pub"),
        ],
    )
    .await;
    let take = spec("churn", ReceiveMode::Take, AckMode::Auto, 1);
    for i in 0..200 {
        store
            .queues()
            .send(msg(&["churn"], &format!("c{i}")))
            .await
            .unwrap();
        store.queues().receive(&take, 1).await.unwrap();
    }
    let before = store.segments().len();
    for _ in 0..20 {
        store.upkeep().maintain().await.unwrap();
    }
    assert!(
        store.segments().len() * 2 < before,
        "compaction should drop segments"
    );
    expect_ready(
        &store,
        &[("q", &["p-old", "n-old"]), ("t:s", &["n-pub", "p-pub"])],
    )
    .await;

    let store = reopen(store, &disk, 512).await;
    expect_ready(&store, &[("q", &["p-old"]), ("t:s", &["p-pub"])]).await;
}
