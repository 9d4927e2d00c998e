//! Publishing: a copy on every subscription whose selector is TRUE for the message, in
//! batches and from many publishers at once.

use std::sync::Arc;

use ferry_protocol::{subscription_queue, Name};

use super::super::*;
use super::*;
use crate::error::StoreError;

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
    let id = store.queues().send(m).await.unwrap();
    for s in ["a", "b", "c"] {
        assert_eq!(sub_depth(&store, "t", s).await, (1, 0), "subscription {s}");
    }
    let d = store.queues().receive(&take("t:b", "c"), 1).await.unwrap();
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
    let d = store.queues().receive(&take("t:c", "c"), 1).await.unwrap();
    assert_eq!((d[0].message.id, d[0].message.queue.as_str()), (id, "t:c"));
}

/// A subscription gets only the messages published after it exists.
pub async fn only_messages_published_after_subscribing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    store.queues().send(publish("t", "p", "m1")).await.unwrap();
    subscribe(&store, "t", "early", &durable("")).await;
    store.queues().send(publish("t", "p", "m2")).await.unwrap();
    subscribe(&store, "t", "late", &durable("")).await;
    store.queues().send(publish("t", "p", "m3")).await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "t:early").await), vec!["m2", "m3"]);
    assert_eq!(bodies(&peek_all(&store, "t:late").await), vec!["m3"]);
}

/// A publish with no subscription (or none that matches) gets an id and stores nothing.
pub async fn publish_without_subscriptions_stores_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.topics().create_topic("t").await.unwrap();
    let a = store
        .queues()
        .send(publish("t", "p", "lost"))
        .await
        .unwrap();
    subscribe(&store, "t", "picky", &durable("n = 1")).await;
    let b = store
        .queues()
        .send(publish("t", "p", "no match"))
        .await
        .unwrap();
    let c = store
        .queues()
        .send(msg(&["q"], "p", "plain"))
        .await
        .unwrap();
    assert!(a > 0 && b > a && c > b, "ids increase: {a} {b} {c}");
    assert_eq!(queue_names(&store).await, vec!["q"]);
    assert_eq!(depth(&store, "q").await, (1, 0));
    assert_eq!(sub_depth(&store, "t", "picky").await, (0, 0));
    subscribe(&store, "t", "all", &durable("")).await;
    assert!(peek_all(&store, "t:all").await.is_empty());
    assert!(peek_all(&store, "t:picky").await.is_empty());
    store
        .topics()
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
            .queues()
            .send(NewMessage {
                properties: properties.into(),
                ..publish("t", sender, body)
            })
            .await
            .unwrap();
    }
    let mut high = publish("t", "bank", "high");
    high.priority = 9;
    high.properties = vec![region("eu"), amount(101)].into();
    store.queues().send(high).await.unwrap();
    let mut to_bob = publish("t", "shop", "to-bob");
    to_bob.receiver = Some("bob".into());
    store.queues().send(to_bob).await.unwrap();
    let mut ctx = publish("t", "bank", "ctx7");
    ctx.context = 7;
    ctx.properties = vec![("ratio".into(), PropertyValue::Str("1.0".into()))].into();
    store.queues().send(ctx).await.unwrap();

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
        let got = bodies(&store.queues().receive(&spec, 100).await.unwrap());
        assert_eq!(got, want, "subscription '{sub}' ({})", {
            subs.iter().find(|(n, _)| *n == sub).unwrap().1
        });
    }
}

/// `send_batch` mixes sends and publishes; each succeeds or fails on its own, ids increase.
pub async fn publish_in_send_batch_mixed_with_sends(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c"], "t", &[("s", "")]).await;
    store.queues().create_queue("q").await.unwrap();
    let results = store
        .queues()
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
    let results = store.queues().send_batch(batch("")).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    // A transaction's publishes are stored together at commit, by the same path.
    store
        .transactions()
        .commit(SESSION, batch("t"), &[])
        .await
        .unwrap();
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

/// A publish addressed to an unknown client is `ClientNotFound` and stored nowhere; addressed
/// to a known one, it reaches every subscription, visible to that client only.
pub async fn publish_to_unknown_receiver_changes_nothing(store: Arc<dyn Store>) {
    topic_with(&store, &["p", "c", "bob"], "t", &[("a", ""), ("b", "")]).await;
    let mut ghost = publish("t", "p", "ghost");
    ghost.receiver = Some("ghost".into());
    assert_eq!(
        store.queues().send(ghost).await,
        Err(StoreError::ClientNotFound("ghost".into()))
    );
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert_eq!(sub_depth(&store, "t", "b").await, (0, 0));
    let mut to_bob = publish("t", "p", "for bob");
    to_bob.receiver = Some("bob".into());
    store.queues().send(to_bob).await.unwrap();
    assert_eq!(sub_depth(&store, "t", "a").await, (1, 0));
    assert!(store
        .queues()
        .receive(&take("t:a", "c"), 10)
        .await
        .unwrap()
        .is_empty());
    let got = store
        .queues()
        .receive(&take("t:a", "bob"), 10)
        .await
        .unwrap();
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
            ]
            .into(),
            ..publish("t", "p", &format!("{n}"))
        })
        .collect();
    for chunk in batch.chunks(400) {
        for r in store.queues().send_batch(chunk.to_vec()).await {
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
        let got = store.queues().receive(&spec, 2000).await.unwrap();
        assert!(bodies(&got) == want, "messages on {sub} differ");
    }
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
                    .queues()
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
    subscribe(&store, "t", "late", &durable("")).await;
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
                            .queues()
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
