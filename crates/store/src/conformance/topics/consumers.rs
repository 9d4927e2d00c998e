//! Who consumes a subscription: one consumer unless shared, and shared non-durable
//! subscriptions that live while consumed.

use std::sync::Arc;

use super::super::*;
use super::*;
use crate::error::StoreError;

/// A subscription that is not shared has one consumer at a time; shared ones admit any number
/// of shared consumers and no exclusive one. `unsubscribe` waits until nobody consumes it, and
/// a session's consumers end with `release_session`.
pub async fn consumers_of_a_subscription_exclude_each_other_unless_shared(store: Arc<dyn Store>) {
    topic_with(&store, &["c"], "t", &[("solo", "")]).await;
    let both = SubscriptionOptions {
        shared: true,
        ..durable("")
    };
    subscribe(&store, "t", "pool", &both).await;
    let in_use = |r: Result<(), StoreError>, what: &str| match r {
        Err(StoreError::SubscriptionInUse(q)) => assert!(q.starts_with("t:"), "{q}"),
        other => panic!("{what}: expected SubscriptionInUse, got {other:?}"),
    };

    attach(&store, "t", "solo", SESSION, false).await;
    in_use(
        store
            .topics()
            .attach_consumer("t", "solo", SESSION + 1, false)
            .await,
        "a second exclusive consumer",
    );
    in_use(
        store
            .topics()
            .attach_consumer("t", "solo", SESSION + 1, true)
            .await,
        "a shared consumer of an exclusive subscription",
    );
    in_use(
        store
            .topics()
            .attach_consumer("t", "solo", SESSION, false)
            .await,
        "a second consumer in the same session",
    );
    in_use(
        store.topics().unsubscribe("t", "solo").await,
        "unsubscribe while consumed",
    );
    detach(&store, "t", "solo", SESSION).await;
    detach(&store, "t", "solo", SESSION).await; // none left: a no-op
    attach(&store, "t", "solo", SESSION + 1, false).await;

    attach(&store, "t", "pool", SESSION, true).await;
    attach(&store, "t", "pool", SESSION, true).await;
    attach(&store, "t", "pool", SESSION + 1, true).await;
    in_use(
        store
            .topics()
            .attach_consumer("t", "pool", SESSION + 2, false)
            .await,
        "an exclusive consumer of a consumed shared subscription",
    );
    // SESSION has two consumers on the pool: one detach leaves the other.
    detach(&store, "t", "pool", SESSION).await;
    store.sessions().release_session(SESSION + 1).await.unwrap();
    in_use(
        store.topics().unsubscribe("t", "pool").await,
        "one consumer is left",
    );
    detach(&store, "t", "pool", SESSION).await;
    store.topics().unsubscribe("t", "pool").await.unwrap();
    // The session's end took its consumer of `solo` too.
    store.topics().unsubscribe("t", "solo").await.unwrap();

    match store
        .topics()
        .attach_consumer("t", "gone", SESSION, false)
        .await
    {
        Err(StoreError::SubscriptionNotFound(q)) => assert_eq!(q, "t:gone"),
        other => panic!("unknown subscription: expected SubscriptionNotFound, got {other:?}"),
    }
    match store
        .topics()
        .attach_consumer("nope", "solo", SESSION, false)
        .await
    {
        Err(StoreError::TopicNotFound(t)) => assert_eq!(t, "nope"),
        other => panic!("unknown topic: expected TopicNotFound, got {other:?}"),
    }
    // Ending a consumer of what is gone is a no-op.
    detach(&store, "t", "gone", SESSION).await;
    detach(&store, "nope", "solo", SESSION).await;
}

/// A shared non-durable subscription: made by its first subscriber, attached to (never
/// replaced) by later ones, kept while any session consumes it, and removed with its messages
/// when the last consumer detaches or its session ends, or when it was made and never consumed.
pub async fn shared_non_durable_subscription_lives_while_consumed(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c", "d"], "t", &[]).await;
    let pool = SubscriptionOptions {
        shared: true,
        ..non_durable("")
    };
    assert_eq!(
        store
            .topics()
            .subscribe_topic("t", "w", &pool, "c")
            .await
            .unwrap(),
        "t:w"
    );
    attach(&store, "t", "w", SESSION, true).await;
    store.queues().send(publish("t", "p", "x")).await.unwrap();
    // A second subscriber attaches to it: the backlog stays.
    store
        .topics()
        .subscribe_topic("t", "w", &pool, "d")
        .await
        .unwrap();
    attach(&store, "t", "w", SESSION + 1, true).await;
    assert_eq!(
        peek_all(&store, "t:w").await.len(),
        1,
        "attached, not replaced"
    );
    let other = SubscriptionOptions {
        selector: "a = 1".into(),
        ..pool.clone()
    };
    match store.topics().subscribe_topic("t", "w", &other, "d").await {
        Err(StoreError::InvalidArgument(_)) => {}
        r => panic!("another selector: expected InvalidArgument, got {r:?}"),
    }
    match store
        .topics()
        .attach_consumer("t", "w", SESSION + 2, false)
        .await
    {
        Err(StoreError::SubscriptionInUse(_)) => {}
        r => panic!("an exclusive consumer: expected SubscriptionInUse, got {r:?}"),
    }
    detach(&store, "t", "w", SESSION).await;
    assert_eq!(
        subscription_names(&store, "t").await,
        vec!["w"],
        "one consumer is left"
    );
    detach(&store, "t", "w", SESSION + 1).await;
    assert!(
        subscription_names(&store, "t").await.is_empty(),
        "gone with its last consumer"
    );
    // Made again, it starts empty.
    subscribe(&store, "t", "w", &pool).await;
    attach(&store, "t", "w", SESSION, true).await;
    assert!(peek_all(&store, "t:w").await.is_empty());
    // Its last consumer's session ending removes it too.
    store.sessions().release_session(SESSION).await.unwrap();
    assert!(
        subscription_names(&store, "t").await.is_empty(),
        "gone with its last session"
    );
    // Made and never consumed: the maker's detach (it had no consumer) removes it.
    subscribe(&store, "t", "w", &pool).await;
    detach(&store, "t", "w", SESSION).await;
    assert!(
        subscription_names(&store, "t").await.is_empty(),
        "never consumed"
    );
}
