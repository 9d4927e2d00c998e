//! A subscription's queue as a queue: settling, dead letters, ordering, delays and expiry.

use std::sync::Arc;

use ferry_protocol::QueueOptions;

use super::super::*;
use super::*;
use crate::api::dead_letter;
use crate::error::StoreError;

/// Settling on one subscription leaves the copies on the others alone.
pub async fn settling_on_one_subscription_leaves_the_others(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", ""), ("c", "")]).await;
    store.queues().send(publish("t", "p", "x")).await.unwrap();
    store.queues().send(publish("t", "p", "y")).await.unwrap();
    let d = store.queues().receive(&lease("t:a", "c"), 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["x", "y"]);
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    store
        .queues()
        .nack(SESSION, &[d[1].delivery_id], false)
        .await
        .unwrap();
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "b").await, (2, 0), "b untouched");
    assert_eq!(sub_depth(&store, "t", "c").await, (2, 0), "c untouched");
    store.queues().receive(&take("t:b", "c"), 1).await.unwrap();
    let d = store.queues().receive(&lease("t:c", "c"), 1).await.unwrap();
    store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(sub_depth(&store, "t", "b").await, (1, 0));
    let c = peek_all(&store, "t:c").await;
    assert_eq!(bodies(&c), vec!["x", "y"]);
    assert_eq!(
        c[0].message.delivery_count, 1,
        "redelivered on c after its nack"
    );
    let b = peek_all(&store, "t:b").await;
    assert_eq!(
        b[0].message.delivery_count, 0,
        "the nack on c did not count on b"
    );
}

/// A subscription's queue options apply: over its maximum delivery count a message goes to its
/// dead-letter queue, with the subscription queue as its original queue.
pub async fn subscription_dead_letters_after_max_deliveries(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["dlq"]).await;
    store.topics().create_topic("t").await.unwrap();
    let opts = SubscriptionOptions {
        queue: QueueOptions {
            max_deliveries: 2,
            dead_letter_queue: Some("dlq".into()),
            expiry_queue: None,
        },
        ..durable("")
    };
    subscribe(&store, "t", "s", &opts).await;
    subscribe(&store, "t", "other", &durable("")).await;
    let id = store
        .queues()
        .send(publish("t", "p", "poison"))
        .await
        .unwrap();
    for _ in 0..2 {
        let d = store.queues().receive(&lease("t:s", "c"), 1).await.unwrap();
        assert_eq!(bodies(&d), vec!["poison"]);
        store
            .queues()
            .nack(SESSION, &[d[0].delivery_id], true)
            .await
            .unwrap();
    }
    assert_eq!(sub_depth(&store, "t", "s").await, (0, 0));
    assert_eq!(depth(&store, "dlq").await, (1, 0));
    let d = store.queues().receive(&take("dlq", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["poison"]);
    let prop = |name: &str| {
        d[0].message
            .properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        prop(dead_letter::ORIGINAL_QUEUE),
        Some(PropertyValue::Str("t:s".into()))
    );
    assert_eq!(
        prop(dead_letter::ORIGINAL_ID),
        Some(PropertyValue::Int(id as i64))
    );
    assert_eq!(
        prop(dead_letter::REASON),
        Some(PropertyValue::Str(dead_letter::MAX_DELIVERIES.into()))
    );
    assert_eq!(
        sub_depth(&store, "t", "other").await,
        (1, 0),
        "the other subscription keeps its copy"
    );
}

/// Settling, lease expiry, delayed delivery and purging name a subscription's queue
/// (`topic:name`) like any queue, so that the broker wakes its consumers.
pub async fn subscription_queue_is_named_by_settling_and_timing(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("s", "")]).await;
    store.queues().send(publish("t", "p", "m1")).await.unwrap();
    store.queues().send(publish("t", "p", "m2")).await.unwrap();
    let mut later = publish("t", "p", "later");
    later.deliver_at_ms = NOW + 1_000;
    store.queues().send(later).await.unwrap();
    let mut short = publish("t", "p", "short");
    short.expires_at_ms = NOW + 50;
    store.queues().send(short).await.unwrap();
    assert_eq!(
        store.upkeep().delayed_due(0, NOW).await,
        Ok((Vec::new(), Some(NOW + 1_000)))
    );
    assert_eq!(
        store.upkeep().delayed_due(NOW, NOW + 1_000).await,
        Ok((vec!["t:s".to_string()], None)),
        "delayed_due names the subscription queue"
    );
    let mut spec = lease("t:s", "c");
    spec.order = Order::Time;
    spec.lease_until_ms = 5_000;
    let d = store.queues().receive(&spec, 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1"]);
    assert_eq!(
        store
            .queues()
            .nack(SESSION, &[d[0].delivery_id], true)
            .await,
        Ok(vec!["t:s".to_string()]),
        "nack names the subscription queue"
    );
    store.queues().receive(&spec, 2).await.unwrap();
    assert_eq!(
        store.sessions().release_session(SESSION).await,
        Ok(vec!["t:s".to_string()]),
        "release_session names the subscription queue"
    );
    store.queues().receive(&spec, 1).await.unwrap();
    assert_eq!(store.upkeep().next_lease_deadline().await, Ok(Some(5_000)));
    assert_eq!(
        store.upkeep().expire_leases(5_000).await,
        Ok(vec!["t:s".to_string()]),
        "expire_leases names the subscription queue"
    );
    assert_eq!(
        store.upkeep().purge_expired(NOW + 50).await,
        Ok(1),
        "the expired copy on the subscription is purged"
    );
    assert_eq!(
        sub_depth(&store, "t", "s").await,
        (3, 0),
        "m1, m2 and the delayed one"
    );
    let mut all = peek("t:s", "c");
    all.order = Order::Time;
    all.now_ms = NOW + 1_000;
    let d = store.queues().receive(&all, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1", "m2", "later"]);
    assert_eq!(d[0].message.delivery_count, 3);
}

/// A subscription's queue delivers in priority or time order, hides delayed messages until
/// they are due, and moves expired ones to its expiry queue.
pub async fn subscription_queue_orders_delays_and_expires(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["exp"]).await;
    store.topics().create_topic("t").await.unwrap();
    let opts = SubscriptionOptions {
        queue: QueueOptions {
            expiry_queue: Some("exp".into()),
            ..QueueOptions::default()
        },
        ..durable("")
    };
    subscribe(&store, "t", "s", &opts).await;
    let with = |body: &str, priority: u8, deliver_at_ms: u64, expires_at_ms: u64| NewMessage {
        priority,
        deliver_at_ms,
        expires_at_ms,
        ..publish("t", "p", body)
    };
    store.queues().send(with("low", 2, 0, 0)).await.unwrap();
    store.queues().send(with("high", 9, 0, 0)).await.unwrap();
    store
        .queues()
        .send(with("delayed", 5, NOW + 100, 0))
        .await
        .unwrap();
    store
        .queues()
        .send(with("ttl", 5, 0, NOW + 10))
        .await
        .unwrap();
    let got = store.queues().receive(&peek("t:s", "c"), 10).await.unwrap();
    assert_eq!(
        bodies(&got),
        vec!["high", "ttl", "low"],
        "priority order; the delayed one is not visible yet"
    );
    let mut spec = take("t:s", "c");
    spec.order = Order::Time;
    spec.now_ms = NOW + 100;
    let got = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(
        bodies(&got),
        vec!["low", "high", "delayed"],
        "time order once due; the expired one is not delivered"
    );
    store.upkeep().purge_expired(NOW + 100).await.unwrap();
    assert_eq!(sub_depth(&store, "t", "s").await, (0, 0));
    let got = store.queues().receive(&take("exp", "c"), 10).await.unwrap();
    assert_eq!(bodies(&got), vec!["ttl"], "moved to the expiry queue once");
    let original = got[0]
        .message
        .properties
        .iter()
        .find(|(n, _)| n == dead_letter::ORIGINAL_QUEUE)
        .map(|(_, v)| v.clone());
    assert_eq!(original, Some(PropertyValue::Str("t:s".into())));
}

/// Deliveries of a subscription that was removed are unknown to every settling call: acks and
/// nacks list them, releasing the session or expiring leases neither fails nor names its queue,
/// and a new subscription of the same name is not affected.
pub async fn settling_after_unsubscribe_is_harmless(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", "")]).await;
    store.queues().create_queue("q").await.unwrap();
    store.queues().send(publish("t", "p", "x")).await.unwrap();
    store.queues().send(publish("t", "p", "y")).await.unwrap();
    store.queues().send(publish("t", "p", "z")).await.unwrap();
    store
        .queues()
        .send(msg(&["q"], "p", "plain"))
        .await
        .unwrap();
    let mut spec = lease("t:a", "c");
    spec.order = Order::Time;
    spec.lease_until_ms = 5_000;
    let d = store.queues().receive(&spec, 3).await.unwrap();
    assert_eq!(bodies(&d), vec!["x", "y", "z"]);
    let mut plain = lease("q", "c");
    plain.lease_until_ms = 5_000;
    store.queues().receive(&plain, 1).await.unwrap();
    store.topics().unsubscribe("t", "a").await.unwrap();
    subscribe(&store, "t", "a", &durable("")).await;
    store.queues().send(publish("t", "p", "new")).await.unwrap();
    let (x, y) = (d[0].delivery_id, d[1].delivery_id);
    assert_eq!(
        store.queues().nack(SESSION, &[x], true).await,
        Err(StoreError::DeliveriesNotFound(vec![x]))
    );
    assert_eq!(
        store.transactions().commit(SESSION, Vec::new(), &[y]).await,
        Err(StoreError::DeliveriesNotFound(vec![y]))
    );
    assert_eq!(
        store.upkeep().expire_leases(5_000).await,
        Ok(vec!["q".to_string()]),
        "only the plain queue's lease expires"
    );
    assert_eq!(
        store.sessions().release_session(SESSION).await,
        Ok(Vec::new()),
        "nothing of the old subscription comes back"
    );
    assert_eq!(store.upkeep().next_lease_deadline().await, Ok(None));
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 0));
    assert_eq!(
        bodies(&store.queues().receive(&take("t:a", "c"), 10).await.unwrap()),
        vec!["new"]
    );
}

/// `count_queues` and `queue_exists` agree with `list_queues`: a subscription's queue is not
/// counted and does not exist as a queue, and deletes and unsubscribes are reflected.
pub async fn queue_count_and_existence_leave_out_subscriptions(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["a", "b"]).await;
    store.topics().create_topic("t").await.unwrap();
    subscribe(&store, "t", "s", &durable("")).await;
    subscribe(&store, "t", "~c.1", &non_durable("")).await;
    let queues = store.queues();
    assert_eq!(queues.count_queues().await.unwrap(), 2);
    assert_eq!(queues.list_queues().await.unwrap().len(), 2);
    assert!(queues.queue_exists("a").await.unwrap());
    assert!(!queues.queue_exists("nope").await.unwrap());
    assert!(
        !queues
            .queue_exists(&subscription_queue("t", "s"))
            .await
            .unwrap(),
        "a subscription's queue is not a queue"
    );
    queues.delete_queue("a", false).await.unwrap();
    store.topics().unsubscribe("t", "s").await.unwrap();
    assert_eq!(queues.count_queues().await.unwrap(), 1);
    assert!(!queues.queue_exists("a").await.unwrap());
    queues.create_queue("c1").await.unwrap();
    assert_eq!(queues.count_queues().await.unwrap(), 2);
    assert!(queues.queue_exists("c1").await.unwrap());
}
