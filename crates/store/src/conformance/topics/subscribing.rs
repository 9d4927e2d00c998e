//! Subscribing and unsubscribing: settings checked on a resubscribe, durable and non-durable
//! subscriptions, and the subscription queues they own.

use std::sync::Arc;

use ferry_protocol::{subscription_queue, ErrorCode, QueueOptions};

use super::super::*;
use super::*;
use crate::error::StoreError;

/// `subscribe_topic` returns `topic:name`; subscribing again with the same settings succeeds
/// and keeps the backlog; a different selector or shared flag is `InvalidArgument` and changes
/// nothing (the backlog stays, and the old selector still filters).
pub async fn resubscribe_checks_settings_and_keeps_backlog(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    let opts = durable("n > 1");
    let queue = store
        .topics()
        .subscribe_topic("t", "s", &opts, "c")
        .await
        .unwrap();
    assert_eq!(queue, "t:s");
    assert_eq!(queue, subscription_queue("t", "s"));
    let numbered = |n: i64| NewMessage {
        properties: vec![("n".into(), PropertyValue::Int(n))].into(),
        ..publish("t", "p", &format!("m{n}"))
    };
    store.queues().send(numbered(1)).await.unwrap();
    store.queues().send(numbered(2)).await.unwrap();
    assert_eq!(
        store.topics().subscribe_topic("t", "s", &opts, "c").await,
        Ok("t:s".to_string()),
        "the same settings again"
    );
    assert_eq!(sub_depth(&store, "t", "s").await, (1, 0), "backlog kept");
    let other_selector = durable("n > 0");
    subscribe_refused(&store, "t", "s", &other_selector, "another selector").await;
    subscribe_refused(&store, "t", "s", &durable(""), "no selector instead of one").await;
    let shared = SubscriptionOptions {
        shared: true,
        ..durable("n > 1")
    };
    subscribe_refused(&store, "t", "s", &shared, "shared instead of not").await;
    let s = find_subscription(&store, "t", "s").await.unwrap();
    assert_eq!(
        (s.durable, s.shared, s.selector.as_str(), s.ready),
        (true, false, "n > 1", 1),
        "a refused subscribe changes nothing"
    );
    store.queues().send(numbered(0)).await.unwrap();
    store.queues().send(numbered(3)).await.unwrap();
    assert_eq!(
        bodies(&peek_all(&store, "t:s").await),
        vec!["m2", "m3"],
        "the original selector still filters"
    );
    // And the other way round: a shared subscription refuses a non-shared subscribe.
    subscribe(&store, "t", "sh", &shared).await;
    subscribe_refused(
        &store,
        "t",
        "sh",
        &durable("n > 1"),
        "not shared instead of shared",
    )
    .await;
    assert_eq!(
        store
            .topics()
            .subscribe_topic("t", "sh", &shared, "c")
            .await,
        Ok("t:sh".to_string())
    );
}

/// Subscribing again with other queue options succeeds and keeps the subscription's original
/// queue options (here: the maximum delivery count).
pub async fn resubscribe_keeps_queue_options(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    let once = SubscriptionOptions {
        queue: QueueOptions {
            max_deliveries: 1,
            ..QueueOptions::default()
        },
        ..durable("")
    };
    subscribe(&store, "t", "s", &once).await;
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .expect("other queue options are no conflict");
    store.queues().send(publish("t", "p", "x")).await.unwrap();
    let d = store.queues().receive(&lease("t:s", "c"), 1).await.unwrap();
    store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(
        sub_depth(&store, "t", "s").await,
        (0, 0),
        "the original maximum of 1 delivery still applies: dropped"
    );
}

/// A selector that does not parse, and a dead-letter or expiry queue that does not exist, are
/// refused and create nothing.
pub async fn subscribe_rejects_bad_selector_and_missing_dead_letter_queue(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    subscribe_refused(
        &store,
        "t",
        "s",
        &durable("n >"),
        "a selector that does not parse",
    )
    .await;
    let dlq = SubscriptionOptions {
        queue: QueueOptions {
            max_deliveries: 2,
            dead_letter_queue: Some("no-dlq".into()),
            expiry_queue: None,
        },
        ..durable("")
    };
    assert_eq!(
        store.topics().subscribe_topic("t", "s", &dlq, "c").await,
        Err(StoreError::QueueNotFound("no-dlq".into()))
    );
    let exp = SubscriptionOptions {
        queue: QueueOptions {
            expiry_queue: Some("no-exp".into()),
            ..QueueOptions::default()
        },
        ..durable("")
    };
    assert_eq!(
        store.topics().subscribe_topic("t", "s", &exp, "c").await,
        Err(StoreError::QueueNotFound("no-exp".into()))
    );
    assert_eq!(
        subscription_names(&store, "t").await,
        Vec::<String>::new(),
        "nothing was created"
    );
    store.queues().send(publish("t", "p", "x")).await.unwrap();
    assert!(store.queues().list_queues().await.unwrap().is_empty());
}

/// Subscription queues belong to their topic: not in `list_queues`, not searched by by-sender
/// receives, not in `waiting_queues`; yet a receive naming `topic:name` gets their messages.
pub async fn subscription_queues_are_hidden_but_receivable(store: Arc<dyn Store>) {
    setup(&store, &["p", "c", "other"], &["plain"]).await;
    store.topics().create_topic("t").await.unwrap();
    subscribe(&store, "t", "s", &durable("")).await;
    subscribe(&store, "t", "~c.1", &non_durable("")).await;
    let mut addressed = publish("t", "p", "for c");
    addressed.receiver = Some("c".into());
    store.queues().send(addressed).await.unwrap();
    store
        .queues()
        .send(publish("t", "p", "for all"))
        .await
        .unwrap();
    assert_eq!(
        queue_names(&store).await,
        vec!["plain"],
        "list_queues leaves out subscription queues"
    );
    assert!(
        store
            .queues()
            .waiting_queues("c", NOW)
            .await
            .unwrap()
            .is_empty(),
        "waiting_queues leaves out subscription queues"
    );
    store
        .queues()
        .send(msg_to(&["plain"], "p", "c", "addressed"))
        .await
        .unwrap();
    assert_eq!(
        store.queues().waiting_queues("c", NOW).await.unwrap(),
        vec!["plain"],
        "waiting_queues lists the plain queue only"
    );
    assert_eq!(
        bodies(
            &store
                .queues()
                .receive(&take("plain", "c"), 1)
                .await
                .unwrap()
        ),
        vec!["addressed"]
    );
    let by_sender = ReceiveSpec {
        source: Source::Sender("p".into()),
        ..take("unused", "c")
    };
    assert!(
        store
            .queues()
            .receive(&by_sender, 10)
            .await
            .unwrap()
            .is_empty(),
        "by-sender receives leave out subscription queues"
    );
    store
        .queues()
        .send(msg(&["plain"], "p", "q"))
        .await
        .unwrap();
    assert_eq!(
        bodies(&store.queues().receive(&by_sender, 10).await.unwrap()),
        vec!["q"],
        "by-sender still finds the plain queue's message"
    );
    let mut spec = take("t:s", "c");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["for c", "for all"]);
    assert!(d.iter().all(|d| d.message.queue == "t:s"), "{d:?}");
    let mut spec = take("t:~c.1", "other");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(
        bodies(&d),
        vec!["for all"],
        "an addressed message stays invisible to other clients on a subscription too"
    );
    assert_eq!(d[0].message.queue, "t:~c.1");
}

/// `unsubscribe` removes the subscription and its messages, ready and in flight (those
/// deliveries become unknown); an unknown one is `SubscriptionNotFound` (wire code NotFound).
pub async fn unsubscribe_removes_subscription_and_backlog(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", "")]).await;
    store.queues().send(publish("t", "p", "one")).await.unwrap();
    store.queues().send(publish("t", "p", "two")).await.unwrap();
    let d = store.queues().receive(&lease("t:a", "c"), 1).await.unwrap();
    let id = d[0].delivery_id;
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 1));
    store.topics().unsubscribe("t", "a").await.unwrap();
    assert_eq!(subscription_names(&store, "t").await, vec!["b"]);
    assert_gone_with_delivery(
        &store,
        "t:a",
        id,
        "the unsubscribed subscription's in-flight delivery is unknown",
    )
    .await;
    let err = store.topics().unsubscribe("t", "a").await.unwrap_err();
    assert_eq!(err, StoreError::SubscriptionNotFound("t:a".into()));
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(
        store.topics().unsubscribe("t", "never").await,
        Err(StoreError::SubscriptionNotFound("t:never".into()))
    );
    assert_eq!(
        store.topics().unsubscribe("nope", "a").await,
        Err(StoreError::TopicNotFound("nope".into()))
    );
    assert_eq!(sub_depth(&store, "t", "b").await, (2, 0), "b keeps its own");
    // Publishing goes on to the remaining subscription only; re-subscribing starts empty.
    store
        .queues()
        .send(publish("t", "p", "three"))
        .await
        .unwrap();
    subscribe(&store, "t", "a", &durable("")).await;
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "b").await, (3, 0));
    store.topics().unsubscribe("t", "b").await.unwrap();
    store.topics().unsubscribe("t", "a").await.unwrap();
    store
        .topics()
        .delete_topic("t", false)
        .await
        .expect("no subscriptions left");
}

/// A non-durable subscription is created for its owner, listed as not durable, gets published
/// messages like any other, and `unsubscribe` removes it with its messages.
pub async fn non_durable_subscription_lifecycle(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    let queue = store
        .topics()
        .subscribe_topic("t", "~c.1", &non_durable("n = 1"), "c")
        .await
        .unwrap();
    assert_eq!(queue, "t:~c.1");
    let s = find_subscription(&store, "t", "~c.1")
        .await
        .expect("the non-durable subscription is listed");
    assert_eq!(
        (s.durable, s.shared, s.selector.as_str()),
        (false, false, "n = 1")
    );
    for n in [0, 1] {
        let mut m = publish("t", "p", &format!("m{n}"));
        m.properties = vec![("n".into(), PropertyValue::Int(n))].into();
        store.queues().send(m).await.unwrap();
    }
    let d = store
        .queues()
        .receive(&lease("t:~c.1", "c"), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["m1"]);
    store.topics().unsubscribe("t", "~c.1").await.unwrap();
    assert_eq!(find_subscription(&store, "t", "~c.1").await, None);
    assert_eq!(
        store.queues().ack(SESSION, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id]))
    );
    assert_eq!(
        store.topics().unsubscribe("t", "~c.1").await,
        Err(StoreError::SubscriptionNotFound("t:~c.1".into()))
    );
    store.topics().delete_topic("t", false).await.unwrap();
}

/// Creating a non-durable subscription under a name that exists as a non-durable one replaces
/// it: the new selector applies, the old backlog is gone and its deliveries are unknown.
pub async fn non_durable_resubscribe_replaces_it(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    subscribe(&store, "t", "~c.1", &non_durable("n = 1")).await;
    for n in [1, 1] {
        let mut m = publish("t", "p", "old");
        m.properties = vec![("n".into(), PropertyValue::Int(n))].into();
        store.queues().send(m).await.unwrap();
    }
    let d = store
        .queues()
        .receive(&lease("t:~c.1", "c"), 1)
        .await
        .unwrap();
    assert_eq!(
        store
            .topics()
            .subscribe_topic("t", "~c.1", &non_durable("n = 2"), "c")
            .await,
        Ok("t:~c.1".to_string())
    );
    let s = find_subscription(&store, "t", "~c.1").await.unwrap();
    assert_eq!(
        (s.selector.as_str(), s.ready, s.in_flight),
        ("n = 2", 0, 0),
        "the replacement has the new selector and no backlog"
    );
    assert_eq!(
        store.queues().ack(SESSION, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id])),
        "a delivery of the replaced subscription is unknown"
    );
    for n in [1, 2] {
        let mut m = publish("t", "p", &format!("new{n}"));
        m.properties = vec![("n".into(), PropertyValue::Int(n))].into();
        store.queues().send(m).await.unwrap();
    }
    assert_eq!(bodies(&peek_all(&store, "t:~c.1").await), vec!["new2"]);
}

/// A subscription that exists as durable is not replaced by a non-durable one of the same
/// name, nor the other way round, nor a shared non-durable one over either (`InvalidArgument`,
/// nothing changes).
pub async fn durability_and_sharing_mismatches_are_refused(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("d", "")]).await;
    subscribe(&store, "t", "~c.1", &non_durable("")).await;
    store.queues().send(publish("t", "p", "x")).await.unwrap();
    subscribe_refused(
        &store,
        "t",
        "d",
        &non_durable(""),
        "non-durable over durable",
    )
    .await;
    subscribe_refused(
        &store,
        "t",
        "~c.1",
        &durable(""),
        "durable over non-durable",
    )
    .await;
    let shared = SubscriptionOptions {
        shared: true,
        ..non_durable("")
    };
    for over in ["d", "~c.1"] {
        match store
            .topics()
            .subscribe_topic("t", over, &shared, "c")
            .await
        {
            Err(StoreError::InvalidArgument(_)) => {}
            other => {
                panic!("shared non-durable over {over}: expected InvalidArgument, got {other:?}")
            }
        }
    }
    let list = store.topics().list_topics().await.unwrap();
    let subs: Vec<(String, bool, u64)> = list[0]
        .subscriptions
        .iter()
        .map(|s| (s.name.clone(), s.durable, s.ready))
        .collect();
    assert_eq!(
        subs,
        vec![("d".into(), true, 1), ("~c.1".into(), false, 1)],
        "nothing changed"
    );
}
