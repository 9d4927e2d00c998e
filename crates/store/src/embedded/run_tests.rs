//! Publish runs in the embedded engine: a run its subscribers can all take directly is handed
//! over in one step with ids in one range; any other run goes message by message, with the
//! same outcome as a `send_batch` of its messages.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use ferry_protocol::{Name, Properties};

use super::direct_tests::{queued, store_with_subscription, Recorder};
use crate::api::{PublishRun, Store};
use crate::conformance::durable;

/// A non-persistent run of `bodies` to topic `t` from `p`.
fn run(bodies: &[&str]) -> PublishRun {
    PublishRun {
        topic: Name::from("t"),
        persistent: false,
        sender: "p".into(),
        priority: 4,
        properties: Properties::new(),
        created_at: 1,
        deliver_at_ms: 0,
        expires_at_ms: 0,
        bodies: bodies
            .iter()
            .map(|b| Bytes::copy_from_slice(b.as_bytes()))
            .collect(),
    }
}

fn ids(stored: &crate::RunStored) -> Vec<u64> {
    stored
        .clone()
        .into_results()
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn a_run_goes_to_its_direct_consumer_in_one_batch_with_ids_in_one_range() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    let stored = store.queues().publish_run(run(&["a", "b", "c"])).await;
    assert!(
        matches!(stored, crate::RunStored::Consecutive { count: 3, .. }),
        "a range, not a result a body: {stored:?}"
    );
    let first = ids(&stored);
    let second = ids(&store.queues().publish_run(run(&["d"])).await);
    assert_eq!(first.len(), 3);
    assert_eq!(first[1], first[0] + 1);
    assert_eq!(first[2], first[0] + 2);
    assert_eq!(second, [first[2] + 1]);
    assert_eq!(consumer.bodies(), ["a", "b", "c", "d"]);
    assert_eq!(consumer.batches.lock().unwrap().len(), 2, "one batch a run");
    assert_eq!(
        consumer.reservations.load(Ordering::SeqCst),
        2,
        "one reservation a run, not one a body"
    );
    assert_eq!(*consumer.ids.lock().unwrap(), [first, second].concat());
    assert_eq!(consumer.credit.load(Ordering::SeqCst), 6);
    assert_eq!(queued(&store).await, 0);
    assert_eq!(store.message_count(), 0, "nothing was stored");
}

#[tokio::test]
async fn a_run_larger_than_the_consumers_credit_goes_message_by_message() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(2);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    let results = store.queues().publish_run(run(&["a", "b", "c"])).await;
    assert_eq!(ids(&results).len(), 3);
    // As three publishes: two direct while the credit lasts, the third queued.
    assert_eq!(consumer.bodies(), ["a", "b"]);
    assert_eq!(consumer.credit.load(Ordering::SeqCst), 0);
    assert_eq!(queued(&store).await, 1);
    assert_eq!(store.message_count(), 1);
}

#[tokio::test]
async fn a_run_one_subscriber_has_no_room_for_gives_the_others_reservations_back() {
    let store = store_with_subscription().await;
    store
        .topics()
        .subscribe_topic("t", "s2", &durable(""), "c")
        .await
        .unwrap();
    let roomy = Recorder::new(10);
    let short = Recorder::new(1);
    assert!(store.topics().attach_direct("t:s", roomy.clone()));
    assert!(store.topics().attach_direct("t:s2", short.clone()));
    let results = store.queues().publish_run(run(&["a", "b", "c"])).await;
    assert_eq!(ids(&results).len(), 3);
    // Message by message: the roomy one takes all three directly, spending exactly three
    // (a reservation of the whole run not given back would leave 4); the short one one.
    assert_eq!(roomy.bodies(), ["a", "b", "c"]);
    assert_eq!(roomy.credit.load(Ordering::SeqCst), 7);
    assert_eq!(short.bodies(), ["a"]);
    assert_eq!(store.message_count(), 2, "b and c wait for the short one");
}

#[tokio::test]
async fn a_persistent_run_or_one_to_a_selector_is_stored_as_its_messages_would_be() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    let mut persistent = run(&["a", "b"]);
    persistent.persistent = true;
    assert_eq!(ids(&store.queues().publish_run(persistent).await).len(), 2);
    assert!(consumer.bodies().is_empty(), "persistent: never direct");
    assert_eq!(queued(&store).await, 2);
    // A subscription with a selector: the run goes message by message and the selector
    // decides for each (no property `x`: it takes none).
    store
        .topics()
        .subscribe_topic("t", "picky", &durable("x = 1"), "c")
        .await
        .unwrap();
    assert_eq!(ids(&store.queues().publish_run(run(&["c"])).await).len(), 1);
    assert_eq!(
        store.message_count(),
        3,
        "c queued behind the persistent ones"
    );
    assert!(consumer.bodies().is_empty());
}

#[tokio::test]
async fn a_run_to_a_topic_that_does_not_exist_is_refused_for_every_body() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(10);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    let mut missing = run(&["a", "b"]);
    missing.topic = Name::from("nope");
    let results = store.queues().publish_run(missing).await.into_results();
    assert_eq!(results.len(), 2);
    assert!(results
        .iter()
        .all(|r| matches!(r, Err(crate::StoreError::TopicNotFound(t)) if t == "nope")));
    assert_eq!(
        consumer.credit.load(Ordering::SeqCst),
        10,
        "nothing reserved"
    );
}

#[tokio::test]
async fn a_run_never_overtakes_what_is_queued_for_its_subscription() {
    let store = store_with_subscription().await;
    let consumer = Recorder::new(1);
    assert!(store.topics().attach_direct("t:s", consumer.clone()));
    // Room for one: "a" goes directly, "b" is queued.
    assert_eq!(
        ids(&store.queues().publish_run(run(&["a", "b"])).await).len(),
        2
    );
    assert_eq!(consumer.bodies(), ["a"]);
    assert_eq!(queued(&store).await, 1);
    // Room again: the next run hands "b" over ahead of itself.
    consumer.credit.store(10, Ordering::SeqCst);
    assert_eq!(
        ids(&store.queues().publish_run(run(&["c", "d"])).await).len(),
        2
    );
    assert_eq!(consumer.bodies(), ["a", "b", "c", "d"]);
    assert_eq!(queued(&store).await, 0);
}

#[test]
fn stored_results_are_a_run_only_when_every_body_went_in_with_the_next_id() {
    use crate::RunStored::{Consecutive, Each};
    let refused = || Err(crate::StoreError::TopicNotFound("t".into()));
    assert_eq!(
        Consecutive { first: 7, count: 2 }.consecutive(),
        Some((7, 2))
    );
    assert_eq!(
        Consecutive { first: 7, count: 2 }.into_results(),
        [Ok(7), Ok(8)]
    );
    assert_eq!(Each(vec![Ok(4), Ok(5), Ok(6)]).consecutive(), Some((4, 3)));
    assert_eq!(Each(vec![Ok(4), Ok(6)]).consecutive(), None, "a gap");
    assert_eq!(Each(vec![Ok(5), Ok(4)]).consecutive(), None, "out of order");
    assert_eq!(Each(vec![Ok(4), refused()]).consecutive(), None);
    assert_eq!(Each(vec![refused(), Ok(4)]).consecutive(), None);
    assert_eq!(Each(Vec::new()).consecutive(), None);
    assert!(Each(Vec::new()).is_empty());
    assert_eq!(Consecutive { first: 1, count: 3 }.len(), 3);
}
