//! Direct delivery in the embedded engine: which publishes go straight to an attached consumer
//! and which are queued, and that what is queued is never overtaken.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use ferry_protocol::{DeliveryView, Order, QueueOptions};

use super::{EmbeddedConfig, EmbeddedStore, FaultyBackend, FsyncPolicy};
use crate::api::{NewMessage, ReceiveSpec, Store};
use crate::conformance::{self, durable};
use crate::direct::{DirectBatch, DirectConsumer};

/// A consumer that records the batches of deliveries it is handed, as their bodies.
pub(super) struct Recorder {
    pub(super) credit: AtomicU32,
    taking: AtomicBool,
    pub(super) batches: Arc<Mutex<Vec<Vec<String>>>>,
    /// Calls of `try_reserve` (a publish run reserves once for all its bodies).
    pub(super) reservations: AtomicU32,
    /// The message ids delivered so far, in order.
    pub(super) ids: Arc<Mutex<Vec<u64>>>,
}

impl Recorder {
    pub(super) fn new(credit: u32) -> Arc<Recorder> {
        Arc::new(Recorder {
            credit: AtomicU32::new(credit),
            taking: AtomicBool::new(false),
            batches: Arc::default(),
            reservations: AtomicU32::new(0),
            ids: Arc::default(),
        })
    }

    /// The bodies delivered so far, in order.
    pub(super) fn bodies(&self) -> Vec<String> {
        self.batches.lock().unwrap().concat()
    }
}

/// One batch being handed to a [`Recorder`].
struct RecordedBatch {
    bodies: Vec<String>,
    batches: Arc<Mutex<Vec<Vec<String>>>>,
    ids: Arc<Mutex<Vec<u64>>>,
}

impl DirectBatch for RecordedBatch {
    fn push(&mut self, d: &DeliveryView<'_>) {
        assert_eq!(d.delivery_id, 0, "auto ack");
        assert!(d.queue.starts_with("t:"), "{}", d.queue);
        self.ids.lock().unwrap().push(d.id);
        self.bodies
            .push(String::from_utf8(d.body.to_vec()).unwrap());
    }

    fn hand_over(self: Box<Self>) {
        assert!(!self.bodies.is_empty(), "an empty batch handed over");
        self.batches.lock().unwrap().push(self.bodies);
    }
}

impl DirectConsumer for Recorder {
    fn try_reserve(&self, n: u32) -> bool {
        self.reservations.fetch_add(1, Ordering::SeqCst);
        !self.taking.load(Ordering::SeqCst)
            && self
                .credit
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(n))
                .is_ok()
    }

    fn unreserve(&self, n: u32) {
        self.credit.fetch_add(n, Ordering::SeqCst);
    }

    fn begin_take(&self) -> u32 {
        self.taking.store(true, Ordering::SeqCst);
        self.credit.load(Ordering::SeqCst)
    }

    fn end_take(&self, n: u32) {
        self.credit.fetch_sub(n, Ordering::SeqCst);
        self.taking.store(false, Ordering::SeqCst);
    }

    fn open_batch(&self, expected: usize) -> Box<dyn DirectBatch> {
        assert!(expected >= 1);
        Box::new(RecordedBatch {
            bodies: Vec::new(),
            batches: self.batches.clone(),
            ids: self.ids.clone(),
        })
    }
}

pub(super) async fn store_with_subscription() -> Arc<EmbeddedStore> {
    let mut cfg = EmbeddedConfig::new("/data");
    cfg.backend = Arc::new(FaultyBackend::new());
    cfg.fsync = FsyncPolicy::Always;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store
}

/// A non-persistent publish to topic `t` from `p`.
fn publish(body: &str) -> NewMessage {
    NewMessage {
        persistent: false,
        ..conformance::publish("t", "p", body)
    }
}

fn persistent(mut m: NewMessage) -> NewMessage {
    m.persistent = true;
    m
}

fn take_spec() -> ReceiveSpec {
    ReceiveSpec {
        order: Order::Time,
        ..conformance::take("t:s", "c")
    }
}

/// Messages waiting on the subscription's queue.
pub(super) async fn queued(store: &EmbeddedStore) -> u64 {
    store.topics().list_topics().await.unwrap()[0].subscriptions[0].ready
}

/// What a push task would take from the queue as `consumer`'s taker.
async fn take_as(store: &EmbeddedStore, consumer: &Recorder) -> Vec<String> {
    let mut got = Vec::new();
    let mut sink = |_: usize, d: DeliveryView<'_>| {
        got.push(String::from_utf8(d.body.to_vec()).unwrap());
    };
    let n = store
        .queues()
        .receive_with(&take_spec(), 100, Some(consumer), &mut sink)
        .await
        .unwrap();
    consumer.end_take(n as u32);
    got
}

#[tokio::test]
async fn a_non_persistent_publish_to_an_idle_subscription_goes_straight_to_its_consumer() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    store.queues().send(publish("a")).await.unwrap();
    let results = store
        .queues()
        .send_batch(vec![publish("b"), publish("c")])
        .await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(consumer.bodies(), ["a", "b", "c"]);
    assert_eq!(consumer.credit.load(Ordering::SeqCst), 7);
    assert_eq!(queued(&store).await, 0);
    assert_eq!(store.message_count(), 0, "nothing was stored");
}

#[tokio::test]
async fn publishes_that_cannot_go_directly_are_queued_and_later_ones_queue_behind_them() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(2);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    // Direct, direct, then out of credit: queued, and "d" queues behind "c".
    for b in ["a", "b", "c", "d"] {
        store.queues().send(publish(b)).await.unwrap();
    }
    assert_eq!(consumer.bodies(), ["a", "b"]);
    assert_eq!(queued(&store).await, 2);
    // Credit for one more is not room for the backlog and the publish: "e" queues too.
    consumer.credit.store(2, Ordering::SeqCst);
    store.queues().send(publish("e")).await.unwrap();
    assert_eq!(consumer.bodies(), ["a", "b"]);
    assert_eq!(
        consumer.credit.load(Ordering::SeqCst),
        2,
        "nothing reserved"
    );
    // The push task takes what its credit allows, in order.
    assert_eq!(take_as(&store, &consumer).await, ["c", "d"]);
    consumer.credit.store(1, Ordering::SeqCst);
    assert_eq!(take_as(&store, &consumer).await, ["e"]);
    // The queue is empty again: direct once more.
    consumer.credit.store(10, Ordering::SeqCst);
    store.queues().send(publish("f")).await.unwrap();
    assert_eq!(consumer.bodies(), ["a", "b", "f"]);
    assert_eq!(queued(&store).await, 0);
}

#[tokio::test]
async fn direct_delivery_resumes_once_the_backlog_is_within_the_consumers_credit() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(1);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    for b in ["a", "b", "c"] {
        store.queues().send(publish(b)).await.unwrap();
    }
    assert_eq!(consumer.bodies(), ["a"]);
    assert_eq!(queued(&store).await, 2);
    // Room again, nothing taken from the queue: the next publish hands over the backlog
    // first, in order, then itself, in one batch, and the queue is empty.
    consumer.credit.store(10, Ordering::SeqCst);
    store
        .queues()
        .send_batch(vec![publish("d"), publish("e")])
        .await
        .into_iter()
        .for_each(|r| {
            r.unwrap();
        });
    assert_eq!(consumer.bodies(), ["a", "b", "c", "d", "e"]);
    assert_eq!(
        consumer.batches.lock().unwrap().last().unwrap(),
        &["b", "c", "d", "e"]
    );
    assert_eq!(consumer.credit.load(Ordering::SeqCst), 6);
    assert_eq!(queued(&store).await, 0);
    assert_eq!(store.message_count(), 0, "the backlog's messages are gone");
    assert!(take_as(&store, &consumer).await.is_empty());
}

#[tokio::test]
async fn a_backlog_that_could_not_have_gone_directly_is_never_overtaken() {
    // A persistent message, one of another priority, one that expires: each keeps the
    // publishes after it queued until the push task took it.
    for kind in ["persistent", "priority", "expiring"] {
        let store = store_with_subscription().await;
        let consumer = Recorder::new(0);
        assert!(store.topics().attach_direct("t:s", consumer.clone()));
        store.queues().send(publish("a")).await.unwrap();
        let mut odd = publish("odd");
        match kind {
            "persistent" => odd.persistent = true,
            "priority" => odd.priority = 9,
            _ => odd.expires_at_ms = conformance::NOW + 60_000,
        }
        store.queues().send(odd).await.unwrap();
        consumer.credit.store(10, Ordering::SeqCst);
        store.queues().send(publish("b")).await.unwrap();
        assert!(consumer.bodies().is_empty(), "{kind}: went directly");
        assert_eq!(queued(&store).await, 3, "{kind}");
        let mut taken = take_as(&store, &consumer).await;
        if kind == "priority" {
            taken.sort();
        }
        let mut expected = vec!["a", "b", "odd"];
        if kind != "priority" {
            expected = vec!["a", "odd", "b"];
        }
        assert_eq!(taken, expected, "{kind}");
    }
}

#[tokio::test]
async fn a_backlog_stays_queued_for_the_subscription_when_its_consumer_goes() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(0);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    store.queues().send(publish("a")).await.unwrap();
    // The consumer's connection ends: it is detached, and nothing drains the backlog.
    let gone: Arc<dyn DirectConsumer> = consumer.clone();
    store.topics().detach_direct(&gone);
    consumer.credit.store(10, Ordering::SeqCst);
    store.queues().send(publish("b")).await.unwrap();
    assert!(consumer.bodies().is_empty());
    assert_eq!(queued(&store).await, 2);
    // The next consumer of the subscription gets both, in order.
    let next = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", next.clone()));
    store.queues().send(publish("c")).await.unwrap();
    assert_eq!(next.bodies(), ["a", "b", "c"]);
    assert_eq!(queued(&store).await, 0);
}

#[tokio::test]
async fn persistent_delayed_and_addressed_publishes_are_always_queued() {
    let store = store_with_subscription().await;
    store.sessions().register_client("c").await.unwrap();
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    store.queues().send(persistent(publish("p"))).await.unwrap();
    let mut delayed = publish("later");
    delayed.deliver_at_ms = conformance::NOW + 1_000;
    let mut addressed = publish("to c");
    addressed.receiver = Some("c".into());
    let store2 = store_with_subscription().await;
    store2.sessions().register_client("c").await.unwrap();
    let consumer2 = Recorder::new(10);
    assert!(store2.topics().attach_direct("t:s", consumer2.clone()));
    store2.queues().send(delayed).await.unwrap();
    store2.queues().send(addressed).await.unwrap();
    assert!(
        consumer.bodies().is_empty(),
        "a persistent publish went directly"
    );
    assert!(
        consumer2.bodies().is_empty(),
        "a delayed or addressed one did"
    );
    assert_eq!(queued(&store).await, 1);
    assert_eq!(store2.message_count(), 2);
}

#[tokio::test]
async fn a_publish_waits_while_the_consumer_takes_a_batch_from_its_queue() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    // The push task is between picking a batch and handing it on.
    consumer.begin_take();
    store.queues().send(publish("a")).await.unwrap();
    assert!(consumer.bodies().is_empty());
    consumer.end_take(0);
    assert_eq!(take_as(&store, &consumer).await, ["a"]);
    // An empty take lets direct deliveries in again at once.
    assert!(take_as(&store, &consumer).await.is_empty());
    assert!(!consumer.taking.load(Ordering::SeqCst));
    store.queues().send(publish("b")).await.unwrap();
    assert_eq!(consumer.bodies(), ["b"]);
}

#[tokio::test]
async fn a_subscription_with_two_consumers_or_none_attached_queues_every_publish() {
    let store = store_with_subscription().await;
    let one = Recorder::new(10);
    let two = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", one.clone()));
    assert!(store.topics().attach_direct("t:s", two.clone()));
    store.queues().send(publish("a")).await.unwrap();
    let two_dyn: Arc<dyn DirectConsumer> = two.clone();
    store.topics().detach_direct(&two_dyn);
    let one_dyn: Arc<dyn DirectConsumer> = one.clone();
    take_as(&store, &one).await;
    store.topics().detach_direct(&one_dyn);
    store.queues().send(publish("b")).await.unwrap();
    assert!(one.bodies().is_empty() && two.bodies().is_empty());
    assert_eq!(queued(&store).await, 1);
    // Plain queues and unknown names take no consumers.
    store
        .queues()
        .create_queue_with("q", &QueueOptions::default())
        .await
        .unwrap();
    assert!(!store.topics().attach_direct("q", Recorder::new(1)));
    assert!(!store.topics().attach_direct("t:nope", Recorder::new(1)));
}

#[tokio::test]
async fn a_transaction_publishes_through_the_queue_and_unsubscribing_detaches() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    store
        .transactions()
        .commit(1, vec![publish("in txn")], &[])
        .await
        .unwrap();
    assert!(consumer.bodies().is_empty());
    assert_eq!(take_as(&store, &consumer).await, ["in txn"]);
    store.topics().unsubscribe("t", "s").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store.queues().send(publish("after")).await.unwrap();
    assert!(
        consumer.bodies().is_empty(),
        "a deleted queue kept its consumer"
    );
    assert_eq!(queued(&store).await, 1);
}
