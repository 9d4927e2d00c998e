//! Topics and their subscriptions: lifecycle, listing, subscribing and unsubscribing, and
//! publishing (a copy on every subscription whose selector is TRUE for the message).
//!
//! - `lifecycle`: topics themselves;
//! - `subscribing`: subscribing, unsubscribing, durable and non-durable subscriptions;
//! - `publishing`: where published messages go;
//! - `subscription_queues`: a subscription's queue as a queue;
//! - `consumers`: who consumes a subscription.

use std::sync::Arc;

use ferry_protocol::subscription_queue;

use crate::error::StoreError;

use super::*;

mod consumers;
mod lifecycle;
mod publishing;
mod subscribing;
mod subscription_queues;

pub use consumers::*;
pub use lifecycle::*;
pub use publishing::*;
pub use subscribing::*;
pub use subscription_queues::*;

/// Names of the topics `list_topics` reports.
async fn topic_names(store: &Arc<dyn Store>) -> Vec<String> {
    store
        .topics()
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// Names of the subscriptions of `topic`, as listed.
async fn subscription_names(store: &Arc<dyn Store>, topic: &str) -> Vec<String> {
    let list = store.topics().list_topics().await.unwrap();
    list.iter()
        .find(|t| t.name == topic)
        .unwrap_or_else(|| panic!("topic '{topic}' missing from {list:?}"))
        .subscriptions
        .iter()
        .map(|s| s.name.clone())
        .collect()
}

/// Registers `clients`, creates `topic` and subscribes durable subscriptions to it, each with
/// its selector.
async fn topic_with(store: &Arc<dyn Store>, clients: &[&str], topic: &str, subs: &[(&str, &str)]) {
    setup(store, clients, &[]).await;
    store.topics().create_topic(topic).await.unwrap();
    for (name, selector) in subs {
        let queue = store
            .topics()
            .subscribe_topic(topic, name, &durable(selector), "c")
            .await
            .unwrap();
        assert_eq!(queue, subscription_queue(topic, name));
    }
}

/// Subscribes `name` to `topic` for client `c`, which must succeed.
async fn subscribe(store: &Arc<dyn Store>, topic: &str, name: &str, options: &SubscriptionOptions) {
    store
        .topics()
        .subscribe_topic(topic, name, options, "c")
        .await
        .unwrap();
}

/// Attaches a consumer of `session` to subscription `name` of `topic`, which must succeed.
async fn attach(store: &Arc<dyn Store>, topic: &str, name: &str, session: u64, shared: bool) {
    store
        .topics()
        .attach_consumer(topic, name, session, shared)
        .await
        .unwrap();
}

/// Detaches a consumer of `session` from subscription `name` of `topic`, which must succeed.
async fn detach(store: &Arc<dyn Store>, topic: &str, name: &str, session: u64) {
    store
        .topics()
        .detach_consumer(topic, name, session)
        .await
        .unwrap();
}

/// Subscribing `name` to `topic` with `options` for client `c` is refused as an invalid
/// argument; `case` names what was tried.
async fn subscribe_refused(
    store: &Arc<dyn Store>,
    topic: &str,
    name: &str,
    options: &SubscriptionOptions,
    case: &str,
) {
    match store
        .topics()
        .subscribe_topic(topic, name, options, "c")
        .await
    {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("{case}: expected InvalidArgument, got {other:?}"),
    }
}

/// The subscription queue `queue` is gone, and with it delivery `id` it had in flight: an ack
/// of it finds nothing (`case` names why), no lease is left, and a receive finds no queue.
async fn assert_gone_with_delivery(store: &Arc<dyn Store>, queue: &str, id: u64, case: &str) {
    assert_eq!(
        store.queues().ack(SESSION, &[id]).await,
        Err(StoreError::DeliveriesNotFound(vec![id])),
        "{case}"
    );
    assert_eq!(store.upkeep().next_lease_deadline().await.unwrap(), None);
    assert_eq!(
        store.queues().receive(&take(queue, "c"), 10).await,
        Err(StoreError::QueueNotFound(queue.into())),
        "the subscription's queue is gone"
    );
}

/// Every ready message of a queue, in time order, without taking it.
async fn peek_all(store: &Arc<dyn Store>, queue: &str) -> Vec<Delivery> {
    let mut spec = peek(queue, "c");
    spec.order = Order::Time;
    store.queues().receive(&spec, 1000).await.unwrap()
}
