//! Engine-level tests of topics, subscriptions, non-persistent messages and transaction groups
//! across reopens, torn writes and compaction, on the in-memory [`FaultyBackend`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{
    AckMode, Name, Order, PropertyValue, QueueOptions, ReceiveMode, Source, SubscriptionOptions,
};

use super::format::record::kind;
use super::{segment_path, CrashMode, EmbeddedConfig, EmbeddedStore, FaultyBackend, FsyncPolicy};
use crate::api::{NewMessage, ReceiveSpec, Store};

pub(super) const DIR: &str = "/data";

pub(super) fn seg_dir() -> PathBuf {
    Path::new(DIR).join(super::SEGMENTS_DIR)
}

/// A configuration on `disk` with `segment_bytes` and fsync always.
pub(super) fn config(disk: &FaultyBackend, segment_bytes: u64) -> EmbeddedConfig {
    let mut cfg = EmbeddedConfig::new(DIR);
    cfg.backend = Arc::new(disk.clone());
    cfg.segment_bytes = segment_bytes;
    cfg.fsync = FsyncPolicy::Always;
    cfg
}

pub(super) async fn open(disk: &FaultyBackend, segment_bytes: u64) -> Arc<EmbeddedStore> {
    EmbeddedStore::open(config(disk, segment_bytes))
        .await
        .unwrap()
}

pub(super) fn message(
    queues: &[&str],
    topic: Option<&str>,
    body: &str,
    region: &str,
) -> NewMessage {
    NewMessage {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        topic: topic.map(Name::from),
        persistent: true,
        sender: "p".into(),
        receiver: None,
        priority: 5,
        context: 0,
        properties: vec![("region".into(), PropertyValue::Str(region.into()))].into(),
        body: Bytes::copy_from_slice(body.as_bytes()),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    }
}

fn publish(topic: &str, body: &str, region: &str) -> NewMessage {
    message(&[], Some(topic), body, region)
}

fn transient(mut m: NewMessage) -> NewMessage {
    m.persistent = false;
    m
}

pub(super) fn spec(queue: &str, mode: ReceiveMode, ack: AckMode, session: u64) -> ReceiveSpec {
    ReceiveSpec {
        source: Source::Queue(queue.into()),
        order: Order::Time,
        mode,
        ack,
        hold: false,
        client: "c".into(),
        session,
        lease_until_ms: u64::MAX,
        selector: None,
        now_ms: 1,
        max_bytes: None,
    }
}

/// Bodies ready on `queue`, in time order.
pub(super) async fn bodies(store: &EmbeddedStore, queue: &str) -> Vec<String> {
    store
        .queues()
        .receive(
            &spec(queue, ReceiveMode::Peek, AckMode::Auto, 0),
            usize::MAX,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|d| String::from_utf8(d.message.body.to_vec()).unwrap())
        .collect()
}

fn durable(selector: &str) -> SubscriptionOptions {
    SubscriptionOptions {
        durable: true,
        shared: false,
        selector: selector.into(),
        queue: QueueOptions::default(),
    }
}

/// The bytes of every segment, to compare what was written.
fn log_bytes(disk: &FaultyBackend) -> Vec<(PathBuf, usize)> {
    disk.files()
}

#[tokio::test]
async fn topics_and_durable_subscriptions_survive_reopen_with_their_backlog() {
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 1 << 20).await;
        store.queues().create_queue("dlq").await.unwrap();
        store.topics().create_topic("prices").await.unwrap();
        store.topics().create_topic("empty").await.unwrap();
        let mut eu = durable("region = 'eu'");
        eu.queue.max_deliveries = 2;
        eu.queue.dead_letter_queue = Some("dlq".into());
        assert_eq!(
            store
                .topics()
                .subscribe_topic("prices", "eu", &eu, "c")
                .await
                .unwrap(),
            "prices:eu"
        );
        store
            .topics()
            .subscribe_topic("prices", "all", &durable(""), "c")
            .await
            .unwrap();
        for (i, region) in ["eu", "us", "eu"].iter().enumerate() {
            store
                .queues()
                .send(publish("prices", &format!("m{i}"), region))
                .await
                .unwrap();
        }
    }
    let store = open(&disk, 1 << 20).await;
    let topics = store.topics().list_topics().await.unwrap();
    assert_eq!(
        topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["empty", "prices"]
    );
    let subs = &topics[1].subscriptions;
    assert_eq!(
        subs.iter()
            .map(|s| (s.name.as_str(), s.selector.as_str(), s.ready, s.durable))
            .collect::<Vec<_>>(),
        [("all", "", 3, true), ("eu", "region = 'eu'", 2, true)]
    );
    assert_eq!(bodies(&store, "prices:eu").await, ["m0", "m2"]);
    assert_eq!(bodies(&store, "prices:all").await, ["m0", "m1", "m2"]);
    // Subscription queues stay hidden from queue listings after a reopen too.
    let queues: Vec<String> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(queues, ["dlq"]);
    // The selector is parsed again at replay and still applies.
    store
        .queues()
        .send(publish("prices", "m3", "us"))
        .await
        .unwrap();
    assert_eq!(bodies(&store, "prices:eu").await, ["m0", "m2"]);
    // The queue options came back: two deliveries, then the dead-letter queue.
    for _ in 0..2 {
        let d = store
            .queues()
            .receive(&spec("prices:eu", ReceiveMode::Take, AckMode::Client, 7), 1)
            .await
            .unwrap();
        assert_eq!(d.len(), 1);
        store
            .queues()
            .nack(7, &[d[0].delivery_id], true)
            .await
            .unwrap();
    }
    assert_eq!(bodies(&store, "dlq").await, ["m0"]);
    // Resubscribing with the same settings keeps the backlog.
    store
        .topics()
        .subscribe_topic("prices", "eu", &durable("region = 'eu'"), "c")
        .await
        .unwrap();
    assert_eq!(bodies(&store, "prices:eu").await, ["m2"]);
}

#[tokio::test]
async fn deleted_topics_and_subscriptions_stay_deleted_after_reopen() {
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 1 << 20).await;
        store.topics().create_topic("t").await.unwrap();
        store.topics().create_topic("u").await.unwrap();
        for name in ["a", "b"] {
            store
                .topics()
                .subscribe_topic("t", name, &durable(""), "c")
                .await
                .unwrap();
        }
        store
            .topics()
            .subscribe_topic("u", "x", &durable(""), "c")
            .await
            .unwrap();
        store.queues().send(publish("t", "m", "eu")).await.unwrap();
        store.queues().send(publish("u", "n", "eu")).await.unwrap();
        store.topics().unsubscribe("t", "a").await.unwrap();
        store.topics().delete_topic("u", true).await.unwrap();
    }
    let store = open(&disk, 1 << 20).await;
    let topics = store.topics().list_topics().await.unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].subscriptions.len(), 1);
    assert_eq!(topics[0].subscriptions[0].name, "b");
    assert_eq!(bodies(&store, "t:b").await, ["m"]);
    assert_eq!(store.message_count(), 1);
}

#[tokio::test]
async fn non_durable_subscriptions_are_dropped_at_recovery() {
    // Shared ones too: their consumers were sessions of the run that crashed.
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 1 << 20).await;
        store.topics().create_topic("t").await.unwrap();
        store
            .topics()
            .subscribe_topic("t", "keep", &durable(""), "c")
            .await
            .unwrap();
        let transient = SubscriptionOptions::default();
        store
            .topics()
            .subscribe_topic("t", "~c.1", &transient, "c")
            .await
            .unwrap();
        let pool = SubscriptionOptions {
            shared: true,
            ..SubscriptionOptions::default()
        };
        store
            .topics()
            .subscribe_topic("t", "pool", &pool, "c")
            .await
            .unwrap();
        store
            .topics()
            .attach_consumer("t", "pool", 1, true)
            .await
            .unwrap();
        store.queues().send(publish("t", "m", "eu")).await.unwrap();
        assert_eq!(bodies(&store, "t:~c.1").await, ["m"]);
        assert_eq!(bodies(&store, "t:pool").await, ["m"]);
    }
    // A process crash: the broker never got to unsubscribe.
    let disk = disk.crash(CrashMode::Process);
    for _ in 0..2 {
        let store = open(&disk, 1 << 20).await;
        let subs: Vec<String> = store.topics().list_topics().await.unwrap()[0]
            .subscriptions
            .iter()
            .map(|s| s.name.clone())
            .collect();
        assert_eq!(subs, ["keep"]);
        assert!(matches!(
            store
                .queues()
                .receive(&spec("t:~c.1", ReceiveMode::Peek, AckMode::Auto, 0), 1)
                .await,
            Err(crate::StoreError::QueueNotFound(_))
        ));
        assert_eq!(bodies(&store, "t:keep").await, ["m"]);
    }
    // The name can be used again, and the new subscription starts empty.
    let store = open(&disk, 1 << 20).await;
    store
        .topics()
        .subscribe_topic("t", "~c.1", &SubscriptionOptions::default(), "c")
        .await
        .unwrap();
    assert!(bodies(&store, "t:~c.1").await.is_empty());
}

/// The memory gauge follows the messages held: up by about their bodies when they arrive,
/// back to nothing when the last queue lets them go.
#[tokio::test]
async fn memory_bytes_count_the_messages_held() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 1 << 20).await;
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("a").await.unwrap();
    store.queues().create_queue("b").await.unwrap();
    assert_eq!(store.queues().memory_bytes(), 0);
    let mut m = message(&["a", "b"], None, "", "eu");
    m.body = bytes::Bytes::from(vec![7u8; 100_000]);
    store.queues().send(m).await.unwrap();
    let one = store.queues().memory_bytes();
    assert!((100_000..101_000).contains(&one), "{one}");
    store
        .queues()
        .receive(&spec("a", ReceiveMode::Take, AckMode::Auto, 1), 1)
        .await
        .unwrap();
    assert_eq!(store.queues().memory_bytes(), one, "still on queue b");
    let d = store
        .queues()
        .receive(&spec("b", ReceiveMode::Take, AckMode::Client, 1), 1)
        .await
        .unwrap();
    assert_eq!(store.queues().memory_bytes(), one, "leased, not gone");
    store.queues().ack(1, &[d[0].delivery_id]).await.unwrap();
    assert_eq!(store.queues().memory_bytes(), 0);
}

/// A held auto-ack take writes nothing: after a crash (a reopen without its ack) the message is
/// ready again, never flagged redelivered; its ack writes the removal an auto-ack take writes.
#[tokio::test]
async fn a_held_take_writes_nothing_until_its_ack() {
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 1 << 20).await;
        store.sessions().register_client("c").await.unwrap();
        store.queues().create_queue("q").await.unwrap();
        for body in ["held", "acked"] {
            store
                .queues()
                .send(message(&["q"], None, body, "eu"))
                .await
                .unwrap();
        }
        store.upkeep().flush().await.unwrap();
        let before = log_bytes(&disk);
        let held = ReceiveSpec {
            hold: true,
            ..spec("q", ReceiveMode::Take, AckMode::Auto, 1)
        };
        let d = store.queues().receive(&held, 2).await.unwrap();
        assert_eq!(d.len(), 2);
        store.upkeep().flush().await.unwrap();
        assert_eq!(log_bytes(&disk), before, "holding wrote a record");
        store.queues().ack(1, &[d[1].delivery_id]).await.unwrap();
        store.upkeep().flush().await.unwrap();
        assert_ne!(
            log_bytes(&disk),
            before,
            "the ack of a held take writes its removal"
        );
    }
    let store = open(&disk, 1 << 20).await;
    let d = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Client, 1), 5)
        .await
        .unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message.body, "held");
    assert!(!d[0].message.redelivered(), "a held take is no delivery");
}

#[tokio::test]
async fn non_persistent_messages_write_nothing_and_are_gone_after_reopen() {
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 1 << 20).await;
        store.sessions().register_client("p").await.unwrap();
        store.sessions().register_client("c").await.unwrap();
        store.queues().create_queue("k").await.unwrap();
        store.queues().create_queue("dlq").await.unwrap();
        store
            .queues()
            .create_queue_with(
                "q",
                &QueueOptions {
                    max_deliveries: 1,
                    dead_letter_queue: Some("dlq".into()),
                    expiry_queue: None,
                },
            )
            .await
            .unwrap();
        store.topics().create_topic("t").await.unwrap();
        store
            .topics()
            .subscribe_topic("t", "s", &durable(""), "c")
            .await
            .unwrap();
        store
            .queues()
            .send(message(&["k"], None, "kept", "eu"))
            .await
            .unwrap();
        store.upkeep().flush().await.unwrap();
        let before = log_bytes(&disk);
        let writes = disk.write_count();
        for i in 0..4 {
            store
                .queues()
                .send(transient(message(&["q"], None, &format!("q{i}"), "eu")))
                .await
                .unwrap();
            store
                .queues()
                .send(transient(publish("t", &format!("t{i}"), "eu")))
                .await
                .unwrap();
        }
        let mut batch = store
            .queues()
            .send_batch(vec![
                transient(message(&["q"], None, "b", "eu")),
                transient(publish("t", "b", "eu")),
            ])
            .await;
        assert!(batch.drain(..).all(|r| r.is_ok()));
        // On the subscription: an auto-ack take, client-ack takes, an ack and a release.
        store
            .queues()
            .receive(&spec("t:s", ReceiveMode::Take, AckMode::Auto, 1), 1)
            .await
            .unwrap();
        let d = store
            .queues()
            .receive(&spec("t:s", ReceiveMode::Take, AckMode::Client, 1), 2)
            .await
            .unwrap();
        store.queues().ack(1, &[d[0].delivery_id]).await.unwrap();
        assert_eq!(store.sessions().release_session(1).await.unwrap(), ["t:s"]);
        // On the queue: nacks and a release past the maximum delivery count (dead-lettered),
        // an ack, and a transaction acking one.
        let d = store
            .queues()
            .receive(&spec("q", ReceiveMode::Take, AckMode::Client, 2), 5)
            .await
            .unwrap();
        assert_eq!(d.len(), 5);
        store
            .queues()
            .nack(2, &[d[0].delivery_id, d[1].delivery_id], true)
            .await
            .unwrap();
        store.queues().ack(2, &[d[2].delivery_id]).await.unwrap();
        let ids = store
            .transactions()
            .commit(
                2,
                vec![transient(publish("t", "tx", "eu"))],
                &[d[3].delivery_id],
            )
            .await
            .unwrap();
        assert_eq!(ids.len(), 1);
        store.sessions().release_session(2).await.unwrap();
        assert_eq!(bodies(&store, "dlq").await, ["q0", "q1", "b"]);
        store
            .queues()
            .receive(&spec("dlq", ReceiveMode::Take, AckMode::Auto, 3), 10)
            .await
            .unwrap();
        store.upkeep().purge_expired(u64::MAX).await.unwrap();
        store.upkeep().maintain().await.unwrap();
        assert_eq!(bodies(&store, "t:s").await, ["t2", "t3", "b", "tx"]);
        assert_eq!(log_bytes(&disk), before);
        assert_eq!(disk.write_count(), writes);
    }
    let store = open(&disk, 1 << 20).await;
    assert_eq!(store.message_count(), 1);
    assert_eq!(bodies(&store, "k").await, ["kept"]);
    assert!(bodies(&store, "q").await.is_empty());
    assert!(bodies(&store, "t:s").await.is_empty());
    assert!(bodies(&store, "dlq").await.is_empty());
}

#[tokio::test]
async fn compaction_never_writes_non_persistent_messages() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 300).await;
    store.queues().create_queue("q").await.unwrap();
    for i in 0..20 {
        store
            .queues()
            .send(transient(message(&["q"], None, &format!("n{i}"), "eu")))
            .await
            .unwrap();
        let id = store
            .queues()
            .send(message(&["q"], None, &format!("p{i}"), "eu"))
            .await
            .unwrap();
        assert!(id > 0);
    }
    // Take the persistent ones only (they alternate), leaving the segments dead.
    let all = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Client, 1), 100)
        .await
        .unwrap();
    let persistent: Vec<_> = all
        .iter()
        .filter(|d| d.message.body.starts_with(b"p"))
        .map(|d| d.delivery_id)
        .collect();
    store.queues().ack(1, &persistent).await.unwrap();
    store.sessions().release_session(1).await.unwrap();
    store.upkeep().maintain().await.unwrap();
    for (path, _) in disk.files() {
        let bytes = disk.file(&path).unwrap();
        assert!(
            !bytes.windows(2).any(|w| w == b"n1"),
            "{} holds a non-persistent body",
            path.display()
        );
    }
    assert_eq!(bodies(&store, "q").await.len(), 20);
    drop(store);
    let store = open(&disk, 300).await;
    assert!(bodies(&store, "q").await.is_empty());
}

#[tokio::test]
async fn compaction_keeps_topics_subscriptions_and_durable_backlogs() {
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 400).await;
        store.queues().create_queue("dlq").await.unwrap();
        store.topics().create_topic("t").await.unwrap();
        let mut opts = durable("region = 'eu'");
        opts.shared = true;
        opts.queue.max_deliveries = 3;
        opts.queue.dead_letter_queue = Some("dlq".into());
        store
            .topics()
            .subscribe_topic("t", "eu", &opts, "c")
            .await
            .unwrap();
        store
            .topics()
            .subscribe_topic("t", "all", &durable(""), "c")
            .await
            .unwrap();
        for i in 0..60 {
            let region = if i % 3 == 0 { "eu" } else { "us" };
            store
                .queues()
                .send(publish("t", &format!("m{i:02}"), region))
                .await
                .unwrap();
        }
        // Drain "all" entirely; "eu" keeps its backlog.
        store
            .queues()
            .receive(&spec("t:all", ReceiveMode::Take, AckMode::Auto, 1), 100)
            .await
            .unwrap();
        let before = store.segments();
        store.upkeep().maintain().await.unwrap();
        let after = store.segments();
        assert!(
            after.first() > before.first(),
            "compaction deleted nothing: {before:?} -> {after:?}"
        );
    }
    let store = open(&disk, 400).await;
    let topics = store.topics().list_topics().await.unwrap();
    let subs = &topics[0].subscriptions;
    assert_eq!(subs.len(), 2);
    assert_eq!(
        (
            subs[1].name.as_str(),
            subs[1].shared,
            subs[1].selector.as_str()
        ),
        ("eu", true, "region = 'eu'")
    );
    let eu: Vec<String> = (0..60)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("m{i:02}"))
        .collect();
    assert_eq!(bodies(&store, "t:eu").await, eu);
    assert!(bodies(&store, "t:all").await.is_empty());
    // The queue options survived compaction too: three deliveries, then the dead-letter queue.
    for _ in 0..3 {
        let d = store
            .queues()
            .receive(&spec("t:eu", ReceiveMode::Take, AckMode::Client, 9), 1)
            .await
            .unwrap();
        store
            .queues()
            .nack(9, &[d[0].delivery_id], true)
            .await
            .unwrap();
    }
    assert_eq!(bodies(&store, "dlq").await, ["m00"]);
}

/// What a transaction of the torn-write test did, as seen after a reopen.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    All,
    Nothing,
}

async fn outcome(store: &EmbeddedStore) -> Outcome {
    let q = bodies(store, "q").await;
    let r = bodies(store, "r").await;
    let s = bodies(store, "t:s").await;
    if q == ["acked", "kept", "tx1"] && r == ["tx1", "tx3"] && s == ["tx2"] {
        // After a reopen every lease is back: "acked" is there only if the ack was lost.
        return Outcome::Nothing;
    }
    if q == ["kept", "tx1"] && r == ["tx1", "tx3"] && s == ["tx2"] {
        return Outcome::All;
    }
    if q == ["acked", "kept"] && r.is_empty() && s.is_empty() {
        return Outcome::Nothing;
    }
    panic!("half a transaction: q {q:?}, r {r:?}, t:s {s:?}");
}

#[tokio::test]
async fn a_torn_transaction_group_is_applied_entirely_or_not_at_all() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 1 << 20).await;
    store.sessions().register_client("p").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().create_queue("r").await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store
        .queues()
        .send(message(&["q"], None, "acked", "eu"))
        .await
        .unwrap();
    store
        .queues()
        .send(message(&["q"], None, "kept", "eu"))
        .await
        .unwrap();
    let d = store
        .queues()
        .receive(&spec("q", ReceiveMode::Take, AckMode::Client, 5), 1)
        .await
        .unwrap();
    assert_eq!(d[0].message.body.as_ref(), b"acked");
    store.upkeep().flush().await.unwrap();
    let head = segment_path(&seg_dir(), *store.segments().last().unwrap());
    let start = disk.file(&head).unwrap().len();
    let ids = store
        .transactions()
        .commit(
            5,
            vec![
                message(&["q", "r"], None, "tx1", "eu"),
                publish("t", "tx2", "eu"),
                message(&["r"], None, "tx3", "eu"),
            ],
            &[d[0].delivery_id],
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let full = disk.file(&head).unwrap();
    // The whole transaction is one record: a group.
    assert_eq!(full[start + 8], kind::GROUP);
    assert_eq!(
        u32::from_le_bytes(full[start..start + 4].try_into().unwrap()) as usize + 8,
        full.len() - start
    );
    drop(store);
    let mut seen = (0, 0);
    for cut in start..=full.len() {
        let image = disk.crash(CrashMode::Process);
        image.set_file(&head, full[..cut].to_vec());
        let store = open(&image, 1 << 20).await;
        match outcome(&store).await {
            Outcome::All => {
                assert_eq!(cut, full.len(), "applied with only {cut} bytes");
                seen.1 += 1;
            }
            Outcome::Nothing => {
                assert!(cut < full.len(), "the complete group was not applied");
                seen.0 += 1;
            }
        }
    }
    assert_eq!(seen, (full.len() - start, 1));
}

#[tokio::test]
async fn transaction_messages_survive_compaction_and_reopen() {
    let disk = FaultyBackend::new();
    {
        let store = open(&disk, 300).await;
        store.queues().create_queue("q").await.unwrap();
        store.queues().create_queue("junk").await.unwrap();
        store.topics().create_topic("t").await.unwrap();
        store
            .topics()
            .subscribe_topic("t", "s", &durable("region = 'eu'"), "c")
            .await
            .unwrap();
        for i in 0..10 {
            store
                .transactions()
                .commit(
                    1,
                    vec![
                        message(&["q"], None, &format!("q{i}"), "eu"),
                        publish("t", &format!("e{i}"), "eu"),
                        publish("t", &format!("u{i}"), "us"),
                        message(&["junk"], None, "x", "eu"),
                    ],
                    &[],
                )
                .await
                .unwrap();
        }
        store
            .queues()
            .receive(&spec("junk", ReceiveMode::Take, AckMode::Auto, 1), 100)
            .await
            .unwrap();
        store.upkeep().maintain().await.unwrap();
    }
    let store = open(&disk, 300).await;
    let q: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
    let e: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    assert_eq!(bodies(&store, "q").await, q);
    assert_eq!(bodies(&store, "t:s").await, e);
    assert!(bodies(&store, "junk").await.is_empty());
    assert_eq!(store.message_count(), 20);
}
