//! Topics and their subscriptions: lifecycle, listing, subscribing and unsubscribing, and
//! publishing (a copy on every subscription whose selector is TRUE for the message).

use std::sync::Arc;

use ferry_protocol::{subscription_queue, ErrorCode, Name, QueueOptions};

use super::*;
use crate::api::dead_letter;
use crate::error::StoreError;

/// Names of the topics `list_topics` reports.
async fn topic_names(store: &Arc<dyn Store>) -> Vec<String> {
    store
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// Names of the subscriptions of `topic`, as listed.
async fn subscription_names(store: &Arc<dyn Store>, topic: &str) -> Vec<String> {
    let list = store.list_topics().await.unwrap();
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
    store.create_topic(topic).await.unwrap();
    for (name, selector) in subs {
        let queue = store
            .subscribe_topic(topic, name, &durable(selector), "c")
            .await
            .unwrap();
        assert_eq!(queue, subscription_queue(topic, name));
    }
}

/// Every ready message of a queue, in time order, without taking it.
async fn peek_all(store: &Arc<dyn Store>, queue: &str) -> Vec<Delivery> {
    let mut spec = peek(queue, "c");
    spec.order = Order::Time;
    store.receive(&spec, 1000).await.unwrap()
}

/// Create, `TopicExists`, list (sorted), delete, `TopicNotFound`, re-create.
pub async fn topic_lifecycle(store: Arc<dyn Store>) {
    assert!(
        store.list_topics().await.unwrap().is_empty(),
        "a fresh store has no topics"
    );
    store.create_topic("prices").await.unwrap();
    store.create_topic("alerts").await.unwrap();
    store.create_topic("news").await.unwrap();
    assert_eq!(
        store.create_topic("prices").await,
        Err(StoreError::TopicExists("prices".into()))
    );
    assert_eq!(
        topic_names(&store).await,
        vec!["alerts", "news", "prices"],
        "list_topics is sorted by name"
    );
    for t in store.list_topics().await.unwrap() {
        assert!(t.subscriptions.is_empty(), "{t:?} has no subscriptions");
    }
    store.delete_topic("news", false).await.unwrap();
    assert_eq!(
        store.delete_topic("news", false).await,
        Err(StoreError::TopicNotFound("news".into())),
        "a deleted topic is gone"
    );
    assert_eq!(topic_names(&store).await, vec!["alerts", "prices"]);
    store.create_topic("news").await.unwrap();
    assert_eq!(topic_names(&store).await, vec!["alerts", "news", "prices"]);
    assert!(
        store.list_queues().await.unwrap().is_empty(),
        "topics are not queues"
    );
}

/// A topic that does not exist is `TopicNotFound` for delete (forced or not), publish (send,
/// batch), subscribe and unsubscribe; nothing is created by any of them.
pub async fn missing_topic_errors(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    fn missing<T>() -> Result<T, StoreError> {
        Err(StoreError::TopicNotFound("nope".into()))
    }
    assert_eq!(store.delete_topic("nope", false).await, missing());
    assert_eq!(store.delete_topic("nope", true).await, missing());
    assert_eq!(store.send(publish("nope", "p", "x")).await, missing());
    assert_eq!(
        store.send_batch(vec![publish("nope", "p", "x")]).await,
        vec![missing()]
    );
    assert_eq!(
        store.subscribe_topic("nope", "s", &durable(""), "c").await,
        missing()
    );
    assert_eq!(
        store
            .subscribe_topic("nope", "~c.1", &non_durable(""), "c")
            .await,
        missing()
    );
    assert_eq!(store.unsubscribe("nope", "s").await, missing());
    assert!(store.list_topics().await.unwrap().is_empty());
    assert_eq!(queue_names(&store).await, vec!["q"]);
    // A queue of that name is no topic either.
    store.create_queue("nope").await.unwrap();
    assert_eq!(store.send(publish("nope", "p", "x")).await, missing());
    assert_eq!(depth(&store, "nope").await, (0, 0));
}

/// A queue and a topic may share a name: each is created, listed, used and deleted on its own.
pub async fn topic_and_queue_names_are_independent(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["shared"]).await;
    store
        .create_topic("shared")
        .await
        .expect("a topic may have the name of a queue");
    store.create_topic("only-topic").await.unwrap();
    store
        .create_queue("only-topic")
        .await
        .expect("a queue may have the name of a topic");
    store
        .subscribe_topic("shared", "s", &durable(""), "c")
        .await
        .unwrap();
    assert_eq!(queue_names(&store).await, vec!["only-topic", "shared"]);
    assert_eq!(topic_names(&store).await, vec!["only-topic", "shared"]);
    store.send(msg(&["shared"], "p", "to queue")).await.unwrap();
    store
        .send(publish("shared", "p", "to topic"))
        .await
        .unwrap();
    assert_eq!(bodies(&peek_all(&store, "shared").await), vec!["to queue"]);
    assert_eq!(
        bodies(&peek_all(&store, "shared:s").await),
        vec!["to topic"]
    );
    store.delete_queue("shared", true).await.unwrap();
    assert_eq!(
        topic_names(&store).await,
        vec!["only-topic", "shared"],
        "deleting a queue leaves the topic of that name"
    );
    assert_eq!(sub_depth(&store, "shared", "s").await, (1, 0));
    store.delete_topic("only-topic", false).await.unwrap();
    assert_eq!(
        queue_names(&store).await,
        vec!["only-topic"],
        "deleting a topic leaves the queue of that name"
    );
    assert_eq!(
        store.create_queue("only-topic").await,
        Err(StoreError::QueueExists("only-topic".into()))
    );
    assert_eq!(
        store.create_topic("shared").await,
        Err(StoreError::TopicExists("shared".into()))
    );
}

/// `list_topics` lists each topic's subscriptions sorted by name, with their settings and the
/// ready and in-flight counts of their queues.
pub async fn list_topics_shows_subscriptions_sorted_with_counts(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.create_topic("t").await.unwrap();
    store.create_topic("empty").await.unwrap();
    store
        .subscribe_topic("t", "zeta", &durable(""), "c")
        .await
        .unwrap();
    let shared = SubscriptionOptions {
        shared: true,
        ..durable("n > 1")
    };
    store
        .subscribe_topic("t", "alpha", &shared, "c")
        .await
        .unwrap();
    store
        .subscribe_topic("t", "~c.1", &non_durable(""), "c")
        .await
        .unwrap();
    store
        .subscribe_topic("t", "mid", &durable(""), "c")
        .await
        .unwrap();
    for n in 1..=3 {
        let mut m = publish("t", "p", &format!("m{n}"));
        m.properties = vec![("n".into(), PropertyValue::Int(n))];
        store.send(m).await.unwrap();
    }
    // zeta: one leased, one taken, one ready.
    store.receive(&lease("t:zeta", "c"), 1).await.unwrap();
    store.receive(&take("t:zeta", "c"), 1).await.unwrap();
    // alpha (n > 1 only): both leased.
    store.receive(&lease("t:alpha", "c"), 2).await.unwrap();
    let list = store.list_topics().await.unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].name, "empty");
    assert!(list[0].subscriptions.is_empty());
    assert_eq!(list[1].name, "t");
    let info = |name: &str, durable: bool, shared: bool, selector: &str, ready, in_flight| {
        SubscriptionInfo {
            name: name.into(),
            durable,
            shared,
            selector: selector.into(),
            ready,
            in_flight,
        }
    };
    assert_eq!(
        list[1].subscriptions,
        vec![
            info("alpha", true, true, "n > 1", 0, 2),
            info("mid", true, false, "", 3, 0),
            info("zeta", true, false, "", 1, 1),
            info("~c.1", false, false, "", 3, 0),
        ],
        "subscriptions sorted by name, with settings and counts"
    );
}

/// Without `force`, a topic whose subscriptions hold ready or in-flight messages is
/// `TopicNotEmpty` (with their total) and stays as it was; a topic with only empty
/// subscriptions is deleted with them.
pub async fn delete_non_empty_topic_needs_force(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", "")]).await;
    store.send(publish("t", "p", "one")).await.unwrap();
    store.send(publish("t", "p", "two")).await.unwrap();
    assert_eq!(
        store.delete_topic("t", false).await,
        Err(StoreError::TopicNotEmpty {
            name: "t".into(),
            depth: 4
        }),
        "ready messages on two subscriptions"
    );
    // Only in-flight messages left: still not empty.
    store.receive(&take("t:a", "c"), 2).await.unwrap();
    let d = store.receive(&lease("t:b", "c"), 2).await.unwrap();
    assert_eq!(sub_depth(&store, "t", "b").await, (0, 2));
    assert_eq!(
        store.delete_topic("t", false).await,
        Err(StoreError::TopicNotEmpty {
            name: "t".into(),
            depth: 2
        }),
        "in-flight messages count"
    );
    assert_eq!(subscription_names(&store, "t").await, vec!["a", "b"]);
    let ids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
    store.ack(SESSION, &ids).await.unwrap();
    store
        .delete_topic("t", false)
        .await
        .expect("a topic whose subscriptions are empty is deleted without force");
    assert!(store.list_topics().await.unwrap().is_empty());
    store.create_topic("t").await.unwrap();
    assert_eq!(
        subscription_names(&store, "t").await,
        Vec::<String>::new(),
        "a re-created topic has no subscriptions"
    );
}

/// A forced delete removes the topic with every subscription and their messages; in-flight
/// deliveries become unknown; other topics keep theirs.
pub async fn forced_delete_drops_subscriptions_and_messages(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", "")]).await;
    store.create_topic("other").await.unwrap();
    store
        .subscribe_topic("other", "a", &durable(""), "c")
        .await
        .unwrap();
    store.send(publish("t", "p", "one")).await.unwrap();
    store.send(publish("t", "p", "two")).await.unwrap();
    store.send(publish("other", "p", "kept")).await.unwrap();
    let d = store.receive(&lease("t:a", "c"), 1).await.unwrap();
    let id = d[0].delivery_id;
    store.delete_topic("t", true).await.unwrap();
    assert_eq!(topic_names(&store).await, vec!["other"]);
    assert_eq!(
        store.ack(SESSION, &[id]).await,
        Err(StoreError::DeliveriesNotFound(vec![id])),
        "deliveries of a force-deleted topic's subscription are unknown"
    );
    assert_eq!(store.next_lease_deadline().await.unwrap(), None);
    assert_eq!(
        store.receive(&take("t:a", "c"), 10).await,
        Err(StoreError::QueueNotFound("t:a".into())),
        "the subscription's queue is gone"
    );
    assert_eq!(sub_depth(&store, "other", "a").await, (1, 0));
    // Re-created with a subscription of the same name: nothing of the old one comes back.
    store.create_topic("t").await.unwrap();
    store
        .subscribe_topic("t", "a", &durable(""), "c")
        .await
        .unwrap();
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert!(store
        .receive(&take("t:a", "c"), 10)
        .await
        .unwrap()
        .is_empty());
}

/// `subscribe_topic` returns `topic:name`; subscribing again with the same settings succeeds
/// and keeps the backlog; a different selector or shared flag is `InvalidArgument` and changes
/// nothing (the backlog stays, and the old selector still filters).
pub async fn resubscribe_checks_settings_and_keeps_backlog(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.create_topic("t").await.unwrap();
    let opts = durable("n > 1");
    let queue = store.subscribe_topic("t", "s", &opts, "c").await.unwrap();
    assert_eq!(queue, "t:s");
    assert_eq!(queue, subscription_queue("t", "s"));
    let numbered = |n: i64| NewMessage {
        properties: vec![("n".into(), PropertyValue::Int(n))],
        ..publish("t", "p", &format!("m{n}"))
    };
    store.send(numbered(1)).await.unwrap();
    store.send(numbered(2)).await.unwrap();
    assert_eq!(
        store.subscribe_topic("t", "s", &opts, "c").await,
        Ok("t:s".to_string()),
        "the same settings again"
    );
    assert_eq!(sub_depth(&store, "t", "s").await, (1, 0), "backlog kept");
    let other_selector = durable("n > 0");
    match store.subscribe_topic("t", "s", &other_selector, "c").await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("another selector: expected InvalidArgument, got {other:?}"),
    }
    match store.subscribe_topic("t", "s", &durable(""), "c").await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("no selector instead of one: expected InvalidArgument, got {other:?}"),
    }
    let shared = SubscriptionOptions {
        shared: true,
        ..durable("n > 1")
    };
    match store.subscribe_topic("t", "s", &shared, "c").await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("shared instead of not: expected InvalidArgument, got {other:?}"),
    }
    let s = find_subscription(&store, "t", "s").await.unwrap();
    assert_eq!(
        (s.durable, s.shared, s.selector.as_str(), s.ready),
        (true, false, "n > 1", 1),
        "a refused subscribe changes nothing"
    );
    store.send(numbered(0)).await.unwrap();
    store.send(numbered(3)).await.unwrap();
    assert_eq!(
        bodies(&peek_all(&store, "t:s").await),
        vec!["m2", "m3"],
        "the original selector still filters"
    );
    // And the other way round: a shared subscription refuses a non-shared subscribe.
    store
        .subscribe_topic("t", "sh", &shared, "c")
        .await
        .unwrap();
    match store
        .subscribe_topic("t", "sh", &durable("n > 1"), "c")
        .await
    {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("not shared instead of shared: expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(
        store.subscribe_topic("t", "sh", &shared, "c").await,
        Ok("t:sh".to_string())
    );
}

/// Subscribing again with other queue options succeeds and keeps the subscription's original
/// queue options (here: the maximum delivery count).
pub async fn resubscribe_keeps_queue_options(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.create_topic("t").await.unwrap();
    let once = SubscriptionOptions {
        queue: QueueOptions {
            max_deliveries: 1,
            ..QueueOptions::default()
        },
        ..durable("")
    };
    store.subscribe_topic("t", "s", &once, "c").await.unwrap();
    store
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .expect("other queue options are no conflict");
    store.send(publish("t", "p", "x")).await.unwrap();
    let d = store.receive(&lease("t:s", "c"), 1).await.unwrap();
    store
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
    store.create_topic("t").await.unwrap();
    match store.subscribe_topic("t", "s", &durable("n >"), "c").await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("a selector that does not parse: expected InvalidArgument, got {other:?}"),
    }
    let dlq = SubscriptionOptions {
        queue: QueueOptions {
            max_deliveries: 2,
            dead_letter_queue: Some("no-dlq".into()),
            expiry_queue: None,
        },
        ..durable("")
    };
    assert_eq!(
        store.subscribe_topic("t", "s", &dlq, "c").await,
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
        store.subscribe_topic("t", "s", &exp, "c").await,
        Err(StoreError::QueueNotFound("no-exp".into()))
    );
    assert_eq!(
        subscription_names(&store, "t").await,
        Vec::<String>::new(),
        "nothing was created"
    );
    store.send(publish("t", "p", "x")).await.unwrap();
    assert!(store.list_queues().await.unwrap().is_empty());
}

/// Subscription queues belong to their topic: not in `list_queues`, not searched by by-sender
/// receives, not in `waiting_queues`; yet a receive naming `topic:name` gets their messages.
pub async fn subscription_queues_are_hidden_but_receivable(store: Arc<dyn Store>) {
    setup(&store, &["p", "c", "other"], &["plain"]).await;
    store.create_topic("t").await.unwrap();
    store
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store
        .subscribe_topic("t", "~c.1", &non_durable(""), "c")
        .await
        .unwrap();
    let mut addressed = publish("t", "p", "for c");
    addressed.receiver = Some("c".into());
    store.send(addressed).await.unwrap();
    store.send(publish("t", "p", "for all")).await.unwrap();
    assert_eq!(
        queue_names(&store).await,
        vec!["plain"],
        "list_queues leaves out subscription queues"
    );
    assert!(
        store.waiting_queues("c", NOW).await.unwrap().is_empty(),
        "waiting_queues leaves out subscription queues"
    );
    store
        .send(msg_to(&["plain"], "p", "c", "addressed"))
        .await
        .unwrap();
    assert_eq!(
        store.waiting_queues("c", NOW).await.unwrap(),
        vec!["plain"],
        "waiting_queues lists the plain queue only"
    );
    assert_eq!(
        bodies(&store.receive(&take("plain", "c"), 1).await.unwrap()),
        vec!["addressed"]
    );
    let by_sender = ReceiveSpec {
        source: Source::Sender("p".into()),
        ..take("unused", "c")
    };
    assert!(
        store.receive(&by_sender, 10).await.unwrap().is_empty(),
        "by-sender receives leave out subscription queues"
    );
    store.send(msg(&["plain"], "p", "q")).await.unwrap();
    assert_eq!(
        bodies(&store.receive(&by_sender, 10).await.unwrap()),
        vec!["q"],
        "by-sender still finds the plain queue's message"
    );
    let mut spec = take("t:s", "c");
    spec.order = Order::Time;
    let d = store.receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["for c", "for all"]);
    assert!(d.iter().all(|d| d.message.queue == "t:s"), "{d:?}");
    let mut spec = take("t:~c.1", "other");
    spec.order = Order::Time;
    let d = store.receive(&spec, 10).await.unwrap();
    assert_eq!(
        bodies(&d),
        vec!["for all"],
        "an addressed message stays invisible to other clients on a subscription too"
    );
    assert_eq!(d[0].message.queue, "t:~c.1");
}

/// Every subscription gets a copy of a published message (same id, all fields), taken from
/// each independently.
pub async fn publish_copies_to_every_subscription(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", ""), ("c", "")]).await;
    let m = NewMessage {
        priority: 8,
        context: 42,
        properties: sample_properties(),
        created_at: NOW + 5,
        ..publish("t", "p", "hello")
    };
    let id = store.send(m).await.unwrap();
    for s in ["a", "b", "c"] {
        assert_eq!(sub_depth(&store, "t", s).await, (1, 0), "subscription {s}");
    }
    let d = store.receive(&take("t:b", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["hello"]);
    let got = &d[0].message;
    assert_eq!(got.id, id, "the copy carries the published id");
    assert_eq!(got.queue, "t:b");
    assert_eq!(got.sender, "p");
    assert_eq!(got.receiver, None);
    assert_eq!(got.priority, 8);
    assert_eq!(got.context, 42);
    assert_eq!(got.properties, sample_properties());
    assert_eq!(got.created_at, NOW + 5);
    assert_eq!(got.delivery_count, 0);
    assert_eq!(sub_depth(&store, "t", "b").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 0));
    assert_eq!(sub_depth(&store, "t", "c").await, (1, 0));
    let d = store.receive(&take("t:c", "c"), 1).await.unwrap();
    assert_eq!((d[0].message.id, d[0].message.queue.as_str()), (id, "t:c"));
}

/// A subscription gets only the messages published after it exists.
pub async fn only_messages_published_after_subscribing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.create_topic("t").await.unwrap();
    store.send(publish("t", "p", "m1")).await.unwrap();
    store
        .subscribe_topic("t", "early", &durable(""), "c")
        .await
        .unwrap();
    store.send(publish("t", "p", "m2")).await.unwrap();
    store
        .subscribe_topic("t", "late", &durable(""), "c")
        .await
        .unwrap();
    store.send(publish("t", "p", "m3")).await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "t:early").await), vec!["m2", "m3"]);
    assert_eq!(bodies(&peek_all(&store, "t:late").await), vec!["m3"]);
}

/// A publish with no subscription (or none that matches) gets an id and stores nothing.
pub async fn publish_without_subscriptions_stores_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.create_topic("t").await.unwrap();
    let a = store.send(publish("t", "p", "lost")).await.unwrap();
    store
        .subscribe_topic("t", "picky", &durable("n = 1"), "c")
        .await
        .unwrap();
    let b = store.send(publish("t", "p", "no match")).await.unwrap();
    let c = store.send(msg(&["q"], "p", "plain")).await.unwrap();
    assert!(a > 0 && b > a && c > b, "ids increase: {a} {b} {c}");
    assert_eq!(queue_names(&store).await, vec!["q"]);
    assert_eq!(depth(&store, "q").await, (1, 0));
    assert_eq!(sub_depth(&store, "t", "picky").await, (0, 0));
    store
        .subscribe_topic("t", "all", &durable(""), "c")
        .await
        .unwrap();
    assert!(peek_all(&store, "t:all").await.is_empty());
    assert!(peek_all(&store, "t:picky").await.is_empty());
    store
        .delete_topic("t", false)
        .await
        .expect("nothing was stored: the topic is empty");
}

/// Each subscription gets exactly the messages its selector is TRUE for: properties of several
/// types, header fields, AND/OR/NOT, and NULL (a missing property makes a comparison UNKNOWN,
/// which selects nothing, even under NOT).
pub async fn selectors_pick_messages_per_subscription(store: Arc<dyn Store>) {
    let subs = [
        ("all", ""),
        ("eu-big", "region = 'eu' AND amount > 100"),
        ("urgent", "priority >= 8 OR urgent = TRUE"),
        ("not-eu", "NOT region = 'eu'"),
        ("no-region", "region IS NULL"),
        ("shop", "sender = 'shop' AND ratio BETWEEN 0.5 AND 1.5"),
        ("for-bob", "receiver = 'bob' OR context = 7"),
    ];
    topic_with(&store, &["shop", "bank", "bob", "c"], "t", &subs).await;
    let region = |r: &str| ("region".to_string(), PropertyValue::Str(r.into()));
    let amount = |n: i64| ("amount".to_string(), PropertyValue::Int(n));
    let with_props = [
        ("eu-500", "shop", vec![region("eu"), amount(500)]),
        ("eu-50", "shop", vec![region("eu"), amount(50)]),
        ("us-500", "bank", vec![region("us"), amount(500)]),
        ("bare", "bank", vec![]),
        (
            "urgent-flag",
            "bank",
            vec![("urgent".into(), PropertyValue::Bool(true))],
        ),
        (
            "ratio",
            "shop",
            vec![("ratio".into(), PropertyValue::Float(1.0)), region("asia")],
        ),
    ];
    for (body, sender, properties) in with_props {
        store
            .send(NewMessage {
                properties,
                ..publish("t", sender, body)
            })
            .await
            .unwrap();
    }
    let mut high = publish("t", "bank", "high");
    high.priority = 9;
    high.properties = vec![region("eu"), amount(101)];
    store.send(high).await.unwrap();
    let mut to_bob = publish("t", "shop", "to-bob");
    to_bob.receiver = Some("bob".into());
    store.send(to_bob).await.unwrap();
    let mut ctx = publish("t", "bank", "ctx7");
    ctx.context = 7;
    ctx.properties = vec![("ratio".into(), PropertyValue::Str("1.0".into()))];
    store.send(ctx).await.unwrap();

    let expect: [(&str, &[&str]); 7] = [
        (
            "all",
            &[
                "eu-500",
                "eu-50",
                "us-500",
                "bare",
                "urgent-flag",
                "ratio",
                "high",
                "to-bob",
                "ctx7",
            ],
        ),
        ("eu-big", &["eu-500", "high"]),
        ("urgent", &["urgent-flag", "high"]),
        ("not-eu", &["us-500", "ratio"]),
        ("no-region", &["bare", "urgent-flag", "to-bob", "ctx7"]),
        ("shop", &["ratio"]),
        ("for-bob", &["to-bob", "ctx7"]),
    ];
    for (sub, want) in expect {
        let mut spec = peek(&subscription_queue("t", sub), "bob");
        spec.order = Order::Time;
        let got = bodies(&store.receive(&spec, 100).await.unwrap());
        assert_eq!(got, want, "subscription '{sub}' ({})", {
            subs.iter().find(|(n, _)| *n == sub).unwrap().1
        });
    }
}

/// `send_batch` mixes sends and publishes; each succeeds or fails on its own, ids increase.
pub async fn publish_in_send_batch_mixed_with_sends(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("s", "")]).await;
    store.create_queue("q").await.unwrap();
    let results = store
        .send_batch(vec![
            msg(&["q"], "p", "send-1"),
            publish("t", "p", "pub-1"),
            publish("nope", "p", "pub-missing"),
            msg(&["nope"], "p", "send-missing"),
            msg_to(&["q"], "p", "ghost", "send-ghost"),
            publish("t", "p", "pub-2"),
            msg(&["q"], "p", "send-2"),
        ])
        .await;
    assert_eq!(results.len(), 7);
    assert_eq!(results[2], Err(StoreError::TopicNotFound("nope".into())));
    assert_eq!(results[3], Err(StoreError::QueueNotFound("nope".into())));
    assert_eq!(results[4], Err(StoreError::ClientNotFound("ghost".into())));
    let ids: Vec<u64> = [0, 1, 5, 6]
        .iter()
        .map(|&i| {
            results[i]
                .clone()
                .unwrap_or_else(|e| panic!("item {i}: {e}"))
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let q = peek_all(&store, "q").await;
    assert_eq!(bodies(&q), vec!["send-1", "send-2"]);
    assert_eq!((q[0].message.id, q[1].message.id), (ids[0], ids[3]));
    let s = peek_all(&store, "t:s").await;
    assert_eq!(bodies(&s), vec!["pub-1", "pub-2"]);
    assert_eq!((s[0].message.id, s[1].message.id), (ids[1], ids[2]));
}

/// A batch publishing to several topics in turn puts each message on the subscriptions of its
/// own topic (a batch remembers its topic's subscriptions from one message to the next).
pub async fn a_batch_alternating_topics_publishes_each_to_its_own(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "r", "c"], "a", &[("x", ""), ("y", "")]).await;
    topic_with(&store, &[], "b", &[("w", "sender = 'r'"), ("z", "")]).await;
    // As a decoded batch has them, most messages share their topic's allocation with the
    // others on that topic; the last one brings its own copy of "b".
    let (a, b) = (Name::from("a"), Name::from("b"));
    let on = |topic: &Name, sender: &str, body: String| NewMessage {
        topic: Some(topic.clone()),
        ..publish("unused", sender, &body)
    };
    let batch = |n: &str| {
        vec![
            on(&a, "p", format!("a1{n}")),
            on(&a, "p", format!("a2{n}")),
            on(&b, "r", format!("b1{n}")),
            on(&a, "p", format!("a3{n}")),
            on(&b, "p", format!("b2{n}")),
            publish("b", "r", &format!("b3{n}")),
        ]
    };
    let results = store.send_batch(batch("")).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    // A transaction's publishes are stored together at commit, by the same path.
    store.commit(SESSION, batch("t"), &[]).await.unwrap();
    for (queue, want) in [
        ("a:x", "a1 a2 a3 a1t a2t a3t"),
        ("a:y", "a1 a2 a3 a1t a2t a3t"),
        ("b:w", "b1 b3 b1t b3t"),
        ("b:z", "b1 b2 b3 b1t b2t b3t"),
    ] {
        let want: Vec<&str> = want.split(' ').collect();
        assert_eq!(bodies(&peek_all(&store, queue).await), want, "{queue}");
    }
}

/// Settling on one subscription leaves the copies on the others alone.
pub async fn settling_on_one_subscription_leaves_the_others(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", ""), ("c", "")]).await;
    store.send(publish("t", "p", "x")).await.unwrap();
    store.send(publish("t", "p", "y")).await.unwrap();
    let d = store.receive(&lease("t:a", "c"), 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["x", "y"]);
    store.ack(SESSION, &[d[0].delivery_id]).await.unwrap();
    store
        .nack(SESSION, &[d[1].delivery_id], false)
        .await
        .unwrap();
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "b").await, (2, 0), "b untouched");
    assert_eq!(sub_depth(&store, "t", "c").await, (2, 0), "c untouched");
    store.receive(&take("t:b", "c"), 1).await.unwrap();
    let d = store.receive(&lease("t:c", "c"), 1).await.unwrap();
    store
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
    store.create_topic("t").await.unwrap();
    let opts = SubscriptionOptions {
        queue: QueueOptions {
            max_deliveries: 2,
            dead_letter_queue: Some("dlq".into()),
            expiry_queue: None,
        },
        ..durable("")
    };
    store.subscribe_topic("t", "s", &opts, "c").await.unwrap();
    store
        .subscribe_topic("t", "other", &durable(""), "c")
        .await
        .unwrap();
    let id = store.send(publish("t", "p", "poison")).await.unwrap();
    for _ in 0..2 {
        let d = store.receive(&lease("t:s", "c"), 1).await.unwrap();
        assert_eq!(bodies(&d), vec!["poison"]);
        store
            .nack(SESSION, &[d[0].delivery_id], true)
            .await
            .unwrap();
    }
    assert_eq!(sub_depth(&store, "t", "s").await, (0, 0));
    assert_eq!(depth(&store, "dlq").await, (1, 0));
    let d = store.receive(&take("dlq", "c"), 1).await.unwrap();
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

/// `unsubscribe` removes the subscription and its messages, ready and in flight (those
/// deliveries become unknown); an unknown one is `SubscriptionNotFound` (wire code NotFound).
pub async fn unsubscribe_removes_subscription_and_backlog(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", "")]).await;
    store.send(publish("t", "p", "one")).await.unwrap();
    store.send(publish("t", "p", "two")).await.unwrap();
    let d = store.receive(&lease("t:a", "c"), 1).await.unwrap();
    let id = d[0].delivery_id;
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 1));
    store.unsubscribe("t", "a").await.unwrap();
    assert_eq!(subscription_names(&store, "t").await, vec!["b"]);
    assert_eq!(
        store.ack(SESSION, &[id]).await,
        Err(StoreError::DeliveriesNotFound(vec![id])),
        "the unsubscribed subscription's in-flight delivery is unknown"
    );
    assert_eq!(store.next_lease_deadline().await.unwrap(), None);
    assert_eq!(
        store.receive(&take("t:a", "c"), 10).await,
        Err(StoreError::QueueNotFound("t:a".into())),
        "the subscription's queue is gone"
    );
    let err = store.unsubscribe("t", "a").await.unwrap_err();
    assert_eq!(err, StoreError::SubscriptionNotFound("t:a".into()));
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(
        store.unsubscribe("t", "never").await,
        Err(StoreError::SubscriptionNotFound("t:never".into()))
    );
    assert_eq!(
        store.unsubscribe("nope", "a").await,
        Err(StoreError::TopicNotFound("nope".into()))
    );
    assert_eq!(sub_depth(&store, "t", "b").await, (2, 0), "b keeps its own");
    // Publishing goes on to the remaining subscription only; re-subscribing starts empty.
    store.send(publish("t", "p", "three")).await.unwrap();
    store
        .subscribe_topic("t", "a", &durable(""), "c")
        .await
        .unwrap();
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "b").await, (3, 0));
    store.unsubscribe("t", "b").await.unwrap();
    store.unsubscribe("t", "a").await.unwrap();
    store
        .delete_topic("t", false)
        .await
        .expect("no subscriptions left");
}

/// A non-durable subscription is created for its owner, listed as not durable, gets published
/// messages like any other, and `unsubscribe` removes it with its messages.
pub async fn non_durable_subscription_lifecycle(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.create_topic("t").await.unwrap();
    let queue = store
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
        m.properties = vec![("n".into(), PropertyValue::Int(n))];
        store.send(m).await.unwrap();
    }
    let d = store.receive(&lease("t:~c.1", "c"), 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1"]);
    store.unsubscribe("t", "~c.1").await.unwrap();
    assert_eq!(find_subscription(&store, "t", "~c.1").await, None);
    assert_eq!(
        store.ack(SESSION, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id]))
    );
    assert_eq!(
        store.unsubscribe("t", "~c.1").await,
        Err(StoreError::SubscriptionNotFound("t:~c.1".into()))
    );
    store.delete_topic("t", false).await.unwrap();
}

/// Settling, lease expiry, delayed delivery and purging name a subscription's queue
/// (`topic:name`) like any queue, so that the broker wakes its consumers.
pub async fn subscription_queue_is_named_by_settling_and_timing(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("s", "")]).await;
    store.send(publish("t", "p", "m1")).await.unwrap();
    store.send(publish("t", "p", "m2")).await.unwrap();
    let mut later = publish("t", "p", "later");
    later.deliver_at_ms = NOW + 1_000;
    store.send(later).await.unwrap();
    let mut short = publish("t", "p", "short");
    short.expires_at_ms = NOW + 50;
    store.send(short).await.unwrap();
    assert_eq!(
        store.delayed_due(0, NOW).await,
        Ok((Vec::new(), Some(NOW + 1_000)))
    );
    assert_eq!(
        store.delayed_due(NOW, NOW + 1_000).await,
        Ok((vec!["t:s".to_string()], None)),
        "delayed_due names the subscription queue"
    );
    let mut spec = lease("t:s", "c");
    spec.order = Order::Time;
    spec.lease_until_ms = 5_000;
    let d = store.receive(&spec, 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1"]);
    assert_eq!(
        store.nack(SESSION, &[d[0].delivery_id], true).await,
        Ok(vec!["t:s".to_string()]),
        "nack names the subscription queue"
    );
    store.receive(&spec, 2).await.unwrap();
    assert_eq!(
        store.release_session(SESSION).await,
        Ok(vec!["t:s".to_string()]),
        "release_session names the subscription queue"
    );
    store.receive(&spec, 1).await.unwrap();
    assert_eq!(store.next_lease_deadline().await, Ok(Some(5_000)));
    assert_eq!(
        store.expire_leases(5_000).await,
        Ok(vec!["t:s".to_string()]),
        "expire_leases names the subscription queue"
    );
    assert_eq!(
        store.purge_expired(NOW + 50).await,
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
    let d = store.receive(&all, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["m1", "m2", "later"]);
    assert_eq!(d[0].message.delivery_count, 3);
}

/// A subscription's queue delivers in priority or time order, hides delayed messages until
/// they are due, and moves expired ones to its expiry queue.
pub async fn subscription_queue_orders_delays_and_expires(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["exp"]).await;
    store.create_topic("t").await.unwrap();
    let opts = SubscriptionOptions {
        queue: QueueOptions {
            expiry_queue: Some("exp".into()),
            ..QueueOptions::default()
        },
        ..durable("")
    };
    store.subscribe_topic("t", "s", &opts, "c").await.unwrap();
    let with = |body: &str, priority: u8, deliver_at_ms: u64, expires_at_ms: u64| NewMessage {
        priority,
        deliver_at_ms,
        expires_at_ms,
        ..publish("t", "p", body)
    };
    store.send(with("low", 2, 0, 0)).await.unwrap();
    store.send(with("high", 9, 0, 0)).await.unwrap();
    store.send(with("delayed", 5, NOW + 100, 0)).await.unwrap();
    store.send(with("ttl", 5, 0, NOW + 10)).await.unwrap();
    let got = store.receive(&peek("t:s", "c"), 10).await.unwrap();
    assert_eq!(
        bodies(&got),
        vec!["high", "ttl", "low"],
        "priority order; the delayed one is not visible yet"
    );
    let mut spec = take("t:s", "c");
    spec.order = Order::Time;
    spec.now_ms = NOW + 100;
    let got = store.receive(&spec, 10).await.unwrap();
    assert_eq!(
        bodies(&got),
        vec!["low", "high", "delayed"],
        "time order once due; the expired one is not delivered"
    );
    store.purge_expired(NOW + 100).await.unwrap();
    assert_eq!(sub_depth(&store, "t", "s").await, (0, 0));
    let got = store.receive(&take("exp", "c"), 10).await.unwrap();
    assert_eq!(bodies(&got), vec!["ttl"], "moved to the expiry queue once");
    let original = got[0]
        .message
        .properties
        .iter()
        .find(|(n, _)| n == dead_letter::ORIGINAL_QUEUE)
        .map(|(_, v)| v.clone());
    assert_eq!(original, Some(PropertyValue::Str("t:s".into())));
}

/// A publish addressed to an unknown client is `ClientNotFound` and stored nowhere; addressed
/// to a known one, it reaches every subscription, visible to that client only.
pub async fn publish_to_unknown_receiver_changes_nothing(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c", "bob"], "t", &[("a", ""), ("b", "")]).await;
    let mut ghost = publish("t", "p", "ghost");
    ghost.receiver = Some("ghost".into());
    assert_eq!(
        store.send(ghost).await,
        Err(StoreError::ClientNotFound("ghost".into()))
    );
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "b").await, (0, 0));
    let mut to_bob = publish("t", "p", "for bob");
    to_bob.receiver = Some("bob".into());
    store.send(to_bob).await.unwrap();
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 0));
    assert!(store
        .receive(&take("t:a", "c"), 10)
        .await
        .unwrap()
        .is_empty());
    let got = store.receive(&take("t:a", "bob"), 10).await.unwrap();
    assert_eq!(bodies(&got), vec!["for bob"]);
    assert_eq!(got[0].message.receiver.as_deref(), Some("bob"));
}

/// Many publishes in a few batches each reach exactly the subscriptions whose selector they
/// match, in order.
pub async fn many_publishes_reach_exactly_the_matching_subscriptions(store: Arc<dyn Store>) {
    let subs = [
        ("all", ""),
        ("zero", "m = 0"),
        ("late-one", "m = 1 AND n >= 500"),
        ("none", "m = 5"),
    ];
    topic_with(&store, &["p", "c"], "t", &subs).await;
    let batch: Vec<NewMessage> = (0..1200)
        .map(|n| NewMessage {
            properties: vec![
                ("n".into(), PropertyValue::Int(n)),
                ("m".into(), PropertyValue::Int(n % 3)),
            ],
            ..publish("t", "p", &format!("{n}"))
        })
        .collect();
    for chunk in batch.chunks(400) {
        for r in store.send_batch(chunk.to_vec()).await {
            r.unwrap();
        }
    }
    let expect = |keep: &dyn Fn(i64) -> bool| -> Vec<String> {
        (0..1200)
            .filter(|&n| keep(n))
            .map(|n| n.to_string())
            .collect()
    };
    let wanted = [
        ("all", expect(&|_| true)),
        ("zero", expect(&|n| n % 3 == 0)),
        ("late-one", expect(&|n| n % 3 == 1 && n >= 500)),
        ("none", Vec::new()),
    ];
    for (sub, want) in wanted {
        assert_eq!(
            sub_depth(&store, "t", sub).await,
            (want.len() as u64, 0),
            "count on {sub}"
        );
        let mut spec = take(&subscription_queue("t", sub), "c");
        spec.order = Order::Time;
        let got = store.receive(&spec, 2000).await.unwrap();
        assert!(bodies(&got) == want, "messages on {sub} differ");
    }
}

/// Deliveries of a subscription that was removed are unknown to every settling call: acks and
/// nacks list them, releasing the session or expiring leases neither fails nor names its queue,
/// and a new subscription of the same name is not affected.
pub async fn settling_after_unsubscribe_is_harmless(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", "")]).await;
    store.create_queue("q").await.unwrap();
    store.send(publish("t", "p", "x")).await.unwrap();
    store.send(publish("t", "p", "y")).await.unwrap();
    store.send(publish("t", "p", "z")).await.unwrap();
    store.send(msg(&["q"], "p", "plain")).await.unwrap();
    let mut spec = lease("t:a", "c");
    spec.order = Order::Time;
    spec.lease_until_ms = 5_000;
    let d = store.receive(&spec, 3).await.unwrap();
    assert_eq!(bodies(&d), vec!["x", "y", "z"]);
    let mut plain = lease("q", "c");
    plain.lease_until_ms = 5_000;
    store.receive(&plain, 1).await.unwrap();
    store.unsubscribe("t", "a").await.unwrap();
    store
        .subscribe_topic("t", "a", &durable(""), "c")
        .await
        .unwrap();
    store.send(publish("t", "p", "new")).await.unwrap();
    let (x, y) = (d[0].delivery_id, d[1].delivery_id);
    assert_eq!(
        store.nack(SESSION, &[x], true).await,
        Err(StoreError::DeliveriesNotFound(vec![x]))
    );
    assert_eq!(
        store.commit(SESSION, Vec::new(), &[y]).await,
        Err(StoreError::DeliveriesNotFound(vec![y]))
    );
    assert_eq!(
        store.expire_leases(5_000).await,
        Ok(vec!["q".to_string()]),
        "only the plain queue's lease expires"
    );
    assert_eq!(
        store.release_session(SESSION).await,
        Ok(Vec::new()),
        "nothing of the old subscription comes back"
    );
    assert_eq!(store.next_lease_deadline().await, Ok(None));
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 0));
    assert_eq!(
        bodies(&store.receive(&take("t:a", "c"), 10).await.unwrap()),
        vec!["new"]
    );
}

/// Topics, and the subscriptions of each, are listed sorted by name as bytes (upper case
/// before lower case, punctuation by its code), as `list_queues` sorts queues.
pub async fn topics_and_subscriptions_sort_by_name(store: Arc<dyn Store>) {
    setup(&store, &["c"], &[]).await;
    let names = [
        "beta_3", "Zeta", "alpha", "beta.1", "beta-2", "B", "a9", "a10",
    ];
    for n in names {
        store.create_topic(n).await.unwrap();
        store.create_queue(n).await.unwrap();
    }
    for n in names {
        store
            .subscribe_topic("alpha", n, &durable(""), "c")
            .await
            .unwrap();
    }
    let mut sorted: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    sorted.sort();
    assert_eq!(topic_names(&store).await, sorted, "topics sorted by name");
    assert_eq!(
        subscription_names(&store, "alpha").await,
        sorted,
        "subscriptions sorted by name"
    );
    assert_eq!(queue_names(&store).await, sorted, "queues sorted by name");
}

/// Creating a non-durable subscription under a name that exists as a non-durable one replaces
/// it: the new selector applies, the old backlog is gone and its deliveries are unknown.
pub async fn non_durable_resubscribe_replaces_it(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.create_topic("t").await.unwrap();
    store
        .subscribe_topic("t", "~c.1", &non_durable("n = 1"), "c")
        .await
        .unwrap();
    for n in [1, 1] {
        let mut m = publish("t", "p", "old");
        m.properties = vec![("n".into(), PropertyValue::Int(n))];
        store.send(m).await.unwrap();
    }
    let d = store.receive(&lease("t:~c.1", "c"), 1).await.unwrap();
    assert_eq!(
        store
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
        store.ack(SESSION, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id])),
        "a delivery of the replaced subscription is unknown"
    );
    for n in [1, 2] {
        let mut m = publish("t", "p", &format!("new{n}"));
        m.properties = vec![("n".into(), PropertyValue::Int(n))];
        store.send(m).await.unwrap();
    }
    assert_eq!(bodies(&peek_all(&store, "t:~c.1").await), vec!["new2"]);
}

/// A subscription that exists as durable is not replaced by a non-durable one of the same
/// name, nor the other way round, nor a shared non-durable one over either (`InvalidArgument`,
/// nothing changes).
pub async fn durability_and_sharing_mismatches_are_refused(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("d", "")]).await;
    store
        .subscribe_topic("t", "~c.1", &non_durable(""), "c")
        .await
        .unwrap();
    store.send(publish("t", "p", "x")).await.unwrap();
    match store.subscribe_topic("t", "d", &non_durable(""), "c").await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("non-durable over durable: expected InvalidArgument, got {other:?}"),
    }
    match store.subscribe_topic("t", "~c.1", &durable(""), "c").await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("durable over non-durable: expected InvalidArgument, got {other:?}"),
    }
    let shared = SubscriptionOptions {
        shared: true,
        ..non_durable("")
    };
    for over in ["d", "~c.1"] {
        match store.subscribe_topic("t", over, &shared, "c").await {
            Err(StoreError::InvalidArgument(_)) => {}
            other => {
                panic!("shared non-durable over {over}: expected InvalidArgument, got {other:?}")
            }
        }
    }
    let list = store.list_topics().await.unwrap();
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

/// A subscription made while others publish gets, of each publisher's sequence, exactly the
/// messages from some point on: none published before the subscribe began, every one
/// published after it returned, no gaps.
pub async fn subscribing_while_publishing_gets_a_suffix(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("early", "")]).await;
    let publisher = |tag: &'static str| {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..150 {
                store
                    .send(publish("t", "p", &format!("{tag}{i:03}")))
                    .await
                    .unwrap();
            }
        })
    };
    let (a, b) = (publisher("a"), publisher("b"));
    // Let the publishers get going, then subscribe in their midst.
    while sub_depth(&store, "t", "early").await.0 < 60 {
        tokio::task::yield_now().await;
    }
    let before = sub_depth(&store, "t", "early").await.0;
    store
        .subscribe_topic("t", "late", &durable(""), "c")
        .await
        .unwrap();
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(sub_depth(&store, "t", "early").await, (300, 0));
    let got = bodies(&peek_all(&store, "t:late").await);
    assert!(
        (got.len() as u64) <= 300 - before,
        "{} messages on the late subscription, but {before} were published before it",
        got.len()
    );
    for tag in ["a", "b"] {
        let mine: Vec<u32> = got
            .iter()
            .filter_map(|b| b.strip_prefix(tag))
            .map(|n| n.parse().unwrap())
            .collect();
        let first = mine.first().copied().unwrap_or(150);
        let expected: Vec<u32> = (first..150).collect();
        assert_eq!(
            mine, expected,
            "publisher {tag}: a gapless suffix of its sequence"
        );
    }
}

/// Many publishers at once: every subscription gets every message exactly once, each with a
/// distinct id.
pub async fn concurrent_publishes_reach_every_subscription_once(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("a", ""), ("b", ""), ("c", "")]).await;
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..25 {
                    ids.push(
                        store
                            .send(publish("t", "p", &format!("{t}-{i}")))
                            .await
                            .unwrap(),
                    );
                }
                ids
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(ids.insert(id), "id {id} given twice");
        }
    }
    for sub in ["a", "b", "c"] {
        let got = peek_all(&store, &subscription_queue("t", sub)).await;
        let on: std::collections::BTreeSet<u64> = got.iter().map(|d| d.message.id).collect();
        assert_eq!(got.len(), 200, "subscription {sub}: every message once");
        assert_eq!(on, ids, "subscription {sub}: exactly the published ids");
    }
}

/// A subscription that is not shared has one consumer at a time; shared ones admit any number
/// of shared consumers and no exclusive one. `unsubscribe` waits until nobody consumes it, and
/// a session's consumers end with `release_session`.
pub async fn consumers_of_a_subscription_exclude_each_other_unless_shared(store: Arc<dyn Store>) {
    topic_with(&store, &["c"], "t", &[("solo", "")]).await;
    let both = SubscriptionOptions {
        shared: true,
        ..durable("")
    };
    store
        .subscribe_topic("t", "pool", &both, "c")
        .await
        .unwrap();
    let in_use = |r: Result<(), StoreError>, what: &str| match r {
        Err(StoreError::SubscriptionInUse(q)) => assert!(q.starts_with("t:"), "{q}"),
        other => panic!("{what}: expected SubscriptionInUse, got {other:?}"),
    };

    store
        .attach_consumer("t", "solo", SESSION, false)
        .await
        .unwrap();
    in_use(
        store.attach_consumer("t", "solo", SESSION + 1, false).await,
        "a second exclusive consumer",
    );
    in_use(
        store.attach_consumer("t", "solo", SESSION + 1, true).await,
        "a shared consumer of an exclusive subscription",
    );
    in_use(
        store.attach_consumer("t", "solo", SESSION, false).await,
        "a second consumer in the same session",
    );
    in_use(
        store.unsubscribe("t", "solo").await,
        "unsubscribe while consumed",
    );
    store.detach_consumer("t", "solo", SESSION).await.unwrap();
    store.detach_consumer("t", "solo", SESSION).await.unwrap(); // none left: a no-op
    store
        .attach_consumer("t", "solo", SESSION + 1, false)
        .await
        .unwrap();

    store
        .attach_consumer("t", "pool", SESSION, true)
        .await
        .unwrap();
    store
        .attach_consumer("t", "pool", SESSION, true)
        .await
        .unwrap();
    store
        .attach_consumer("t", "pool", SESSION + 1, true)
        .await
        .unwrap();
    in_use(
        store.attach_consumer("t", "pool", SESSION + 2, false).await,
        "an exclusive consumer of a consumed shared subscription",
    );
    // SESSION has two consumers on the pool: one detach leaves the other.
    store.detach_consumer("t", "pool", SESSION).await.unwrap();
    store.release_session(SESSION + 1).await.unwrap();
    in_use(store.unsubscribe("t", "pool").await, "one consumer is left");
    store.detach_consumer("t", "pool", SESSION).await.unwrap();
    store.unsubscribe("t", "pool").await.unwrap();
    // The session's end took its consumer of `solo` too.
    store.unsubscribe("t", "solo").await.unwrap();

    match store.attach_consumer("t", "gone", SESSION, false).await {
        Err(StoreError::SubscriptionNotFound(q)) => assert_eq!(q, "t:gone"),
        other => panic!("unknown subscription: expected SubscriptionNotFound, got {other:?}"),
    }
    match store.attach_consumer("nope", "solo", SESSION, false).await {
        Err(StoreError::TopicNotFound(t)) => assert_eq!(t, "nope"),
        other => panic!("unknown topic: expected TopicNotFound, got {other:?}"),
    }
    // Ending a consumer of what is gone is a no-op.
    store.detach_consumer("t", "gone", SESSION).await.unwrap();
    store
        .detach_consumer("nope", "solo", SESSION)
        .await
        .unwrap();
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
        store.subscribe_topic("t", "w", &pool, "c").await.unwrap(),
        "t:w"
    );
    store
        .attach_consumer("t", "w", SESSION, true)
        .await
        .unwrap();
    store.send(publish("t", "p", "x")).await.unwrap();
    // A second subscriber attaches to it: the backlog stays.
    store.subscribe_topic("t", "w", &pool, "d").await.unwrap();
    store
        .attach_consumer("t", "w", SESSION + 1, true)
        .await
        .unwrap();
    assert_eq!(
        peek_all(&store, "t:w").await.len(),
        1,
        "attached, not replaced"
    );
    let other = SubscriptionOptions {
        selector: "a = 1".into(),
        ..pool.clone()
    };
    match store.subscribe_topic("t", "w", &other, "d").await {
        Err(StoreError::InvalidArgument(_)) => {}
        r => panic!("another selector: expected InvalidArgument, got {r:?}"),
    }
    match store.attach_consumer("t", "w", SESSION + 2, false).await {
        Err(StoreError::SubscriptionInUse(_)) => {}
        r => panic!("an exclusive consumer: expected SubscriptionInUse, got {r:?}"),
    }
    store.detach_consumer("t", "w", SESSION).await.unwrap();
    assert_eq!(
        subscription_names(&store, "t").await,
        vec!["w"],
        "one consumer is left"
    );
    store.detach_consumer("t", "w", SESSION + 1).await.unwrap();
    assert!(
        subscription_names(&store, "t").await.is_empty(),
        "gone with its last consumer"
    );
    // Made again, it starts empty.
    store.subscribe_topic("t", "w", &pool, "c").await.unwrap();
    store
        .attach_consumer("t", "w", SESSION, true)
        .await
        .unwrap();
    assert!(peek_all(&store, "t:w").await.is_empty());
    // Its last consumer's session ending removes it too.
    store.release_session(SESSION).await.unwrap();
    assert!(
        subscription_names(&store, "t").await.is_empty(),
        "gone with its last session"
    );
    // Made and never consumed: the maker's detach (it had no consumer) removes it.
    store.subscribe_topic("t", "w", &pool, "c").await.unwrap();
    store.detach_consumer("t", "w", SESSION).await.unwrap();
    assert!(
        subscription_names(&store, "t").await.is_empty(),
        "never consumed"
    );
}
