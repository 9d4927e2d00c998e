//! Wildcard subscriptions: a subscription on a pattern (`prices.*.fish`, `prices.>`) gets a
//! copy of every message published to a topic the pattern matches, one per publish however
//! many other subscriptions overlap it; patterns need no topic, publishes still do.
//!
//! [`durable_pattern_subscriptions_survive_restart`] needs the store reopened and is called by
//! each engine's tests with a way to do so.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ferry_protocol::{subscription_queue, TopicInfo};

use super::*;
use crate::error::StoreError;

/// Bodies of every ready message of subscription `name` of `topic`, in time order (peeked).
async fn ready(store: &Arc<dyn Store>, topic: &str, name: &str) -> Vec<String> {
    let mut spec = peek(&subscription_queue(topic, name), "c");
    spec.order = Order::Time;
    bodies(&store.queues().receive(&spec, 1000).await.unwrap())
}

/// Registers "p" and "c" and creates `topics`.
async fn topics(store: &Arc<dyn Store>, topics: &[&str]) {
    setup(store, &["p", "c"], &[]).await;
    for t in topics {
        store.topics().create_topic(t).await.unwrap();
    }
}

/// Subscribes a durable subscription `name` to `filter` (a topic or a pattern), no selector.
async fn sub(store: &Arc<dyn Store>, filter: &str, name: &str) {
    let queue = store
        .topics()
        .subscribe_topic(filter, name, &durable(""), "c")
        .await
        .unwrap();
    assert_eq!(queue, subscription_queue(filter, name));
}

/// An exact subscription, `*` and `>` each get what they match and nothing else.
pub async fn exact_one_word_and_trailing_patterns_match(store: Arc<dyn Store>) {
    topics(
        &store,
        &[
            "prices",
            "prices.eu",
            "prices.eu.fish",
            "prices.us.fish",
            "prices.eu.fish.cod",
        ],
    )
    .await;
    for (filter, name) in [
        ("prices.eu.fish", "exact"),
        ("prices.*.fish", "one"),
        ("prices.>", "tail"),
        ("prices.*", "short"),
        ("*", "single"),
    ] {
        sub(&store, filter, name).await;
    }
    for t in [
        "prices",
        "prices.eu",
        "prices.eu.fish",
        "prices.us.fish",
        "prices.eu.fish.cod",
    ] {
        store.queues().send(publish(t, "p", t)).await.unwrap();
    }
    assert_eq!(
        ready(&store, "prices.eu.fish", "exact").await,
        vec!["prices.eu.fish"]
    );
    assert_eq!(
        ready(&store, "prices.*.fish", "one").await,
        vec!["prices.eu.fish", "prices.us.fish"],
        "* is exactly one word"
    );
    assert_eq!(
        ready(&store, "prices.>", "tail").await,
        vec![
            "prices.eu",
            "prices.eu.fish",
            "prices.us.fish",
            "prices.eu.fish.cod"
        ],
        "> is one or more trailing words, so not 'prices' itself"
    );
    assert_eq!(ready(&store, "prices.*", "short").await, vec!["prices.eu"]);
    assert_eq!(ready(&store, "*", "single").await, vec!["prices"]);
}

/// Overlapping patterns (and the exact topic) each get exactly one copy of every publish,
/// alone, in a batch and in a commit; a subscription's copy is consumed without touching the
/// others'.
pub async fn overlapping_patterns_each_get_one_copy(store: Arc<dyn Store>) {
    topics(&store, &["prices.eu.fish"]).await;
    let subs = [
        ("prices.eu.fish", "exact"),
        ("prices.*.fish", "a"),
        ("prices.eu.*", "b"),
        ("*.eu.fish", "c"),
        ("*.*.*", "d"),
        ("prices.>", "e"),
        ("prices.eu.>", "f"),
        (">", "g"),
        ("prices.*.fish", "a2"),
    ];
    for (filter, name) in subs {
        sub(&store, filter, name).await;
    }
    store
        .queues()
        .send(publish("prices.eu.fish", "p", "one"))
        .await
        .unwrap();
    let batch = store
        .queues()
        .send_batch(vec![
            publish("prices.eu.fish", "p", "two"),
            publish("prices.eu.fish", "p", "three"),
        ])
        .await;
    assert!(batch.iter().all(Result::is_ok), "{batch:?}");
    store
        .transactions()
        .commit(SESSION, vec![publish("prices.eu.fish", "p", "four")], &[])
        .await
        .unwrap();
    for (filter, name) in subs {
        assert_eq!(
            ready(&store, filter, name).await,
            vec!["one", "two", "three", "four"],
            "subscription {name} on {filter}: one copy of each publish"
        );
    }
    let queue = subscription_queue("prices.>", "e");
    let taken = store
        .queues()
        .receive(&take(&queue, "c"), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&taken), vec!["one", "two", "three", "four"]);
    assert_eq!(
        taken[0].message.queue, queue,
        "deliveries name the pattern's queue"
    );
    assert!(ready(&store, "prices.>", "e").await.is_empty());
    assert_eq!(ready(&store, "prices.*.fish", "a").await.len(), 4);
}

/// A pattern subscription needs no topic, and keeps waiting for topics that appear later; a
/// publish still needs its topic, and nothing is created or published by a pattern.
pub async fn patterns_need_no_topic_and_publishes_still_do(store: Arc<dyn Store>) {
    topics(&store, &[]).await;
    sub(&store, "news.>", "all").await;
    assert_eq!(
        store.queues().send(publish("news.sport", "p", "x")).await,
        Err(StoreError::TopicNotFound("news.sport".into())),
        "a publish needs its topic, patterns or not"
    );
    store.topics().create_topic("news.sport").await.unwrap();
    store
        .queues()
        .send(publish("news.sport", "p", "goal"))
        .await
        .unwrap();
    assert_eq!(ready(&store, "news.>", "all").await, vec!["goal"]);
    for bad in [
        store.topics().create_topic("news.*").await,
        store.topics().delete_topic("news.>", true).await,
        store
            .queues()
            .send(publish("news.>", "p", "x"))
            .await
            .map(|_| ()),
    ] {
        assert!(
            matches!(bad, Err(StoreError::InvalidArgument(_))),
            "a pattern is no topic to create, delete or publish to: {bad:?}"
        );
    }
    for bad in ["news.>.x", "news.sp*rt"] {
        assert!(
            matches!(
                store
                    .topics()
                    .subscribe_topic(bad, "s", &durable(""), "c")
                    .await,
                Err(StoreError::InvalidArgument(_))
            ),
            "{bad} is no pattern"
        );
    }
    store
        .topics()
        .delete_topic("news.sport", true)
        .await
        .unwrap();
    assert_eq!(
        ready(&store, "news.>", "all").await,
        vec!["goal"],
        "deleting a topic leaves the patterns that matched it, with their backlog"
    );
}

/// Patterns are listed among the topics, by name, with their subscriptions while they have
/// any; unsubscribing the last one removes the pattern from the listing.
pub async fn pattern_subscriptions_are_listed_and_removed(store: Arc<dyn Store>) {
    topics(&store, &["prices.eu"]).await;
    sub(&store, "prices.*", "b").await;
    sub(&store, "prices.*", "a").await;
    store
        .topics()
        .subscribe_topic("prices.>", "~c.1", &non_durable(""), "c")
        .await
        .unwrap();
    store
        .queues()
        .send(publish("prices.eu", "p", "x"))
        .await
        .unwrap();
    let list = store.topics().list_topics().await.unwrap();
    let names: Vec<&str> = list.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["prices.*", "prices.>", "prices.eu"]);
    let subs: Vec<(&str, bool, u64)> = list[0]
        .subscriptions
        .iter()
        .map(|s| (s.name.as_str(), s.durable, s.ready))
        .collect();
    assert_eq!(subs, vec![("a", true, 1), ("b", true, 1)]);
    assert_eq!(list[1].subscriptions[0].name, "~c.1");
    assert!(!list[1].subscriptions[0].durable);
    assert!(list[2].subscriptions.is_empty());
    assert_eq!(
        store.topics().unsubscribe("prices.*", "zz").await,
        Err(StoreError::SubscriptionNotFound("prices.*:zz".into()))
    );
    assert_eq!(
        store.topics().unsubscribe("nothing.>", "a").await,
        Err(StoreError::SubscriptionNotFound("nothing.>:a".into())),
        "a pattern without subscriptions is no missing topic"
    );
    store.topics().unsubscribe("prices.*", "a").await.unwrap();
    store.topics().unsubscribe("prices.*", "b").await.unwrap();
    store
        .topics()
        .unsubscribe("prices.>", "~c.1")
        .await
        .unwrap();
    let names: Vec<String> = store
        .topics()
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        vec!["prices.eu"],
        "patterns go with their last subscription"
    );
    store
        .queues()
        .send(publish("prices.eu", "p", "y"))
        .await
        .unwrap();
    sub(&store, "prices.*", "a").await;
    assert!(
        ready(&store, "prices.*", "a").await.is_empty(),
        "a pattern made again starts empty"
    );
}

/// Durable, shared and selecting subscriptions may name patterns, with the same rules as on a
/// topic: settings are checked on resubscribe, consumers exclude each other unless shared, a
/// shared non-durable one lives while consumed, and selectors pick per subscription.
pub async fn pattern_subscriptions_are_durable_shared_and_selecting(store: Arc<dyn Store>) {
    topics(&store, &["orders.eu", "orders.us"]).await;
    let shared = SubscriptionOptions {
        shared: true,
        ..durable("")
    };
    store
        .topics()
        .subscribe_topic("orders.*", "big", &durable("amount > 100"), "c")
        .await
        .unwrap();
    store
        .topics()
        .subscribe_topic("orders.*", "pool", &shared, "c")
        .await
        .unwrap();
    assert!(
        matches!(
            store
                .topics()
                .subscribe_topic("orders.*", "big", &durable(""), "c")
                .await,
            Err(StoreError::InvalidArgument(_))
        ),
        "a different selector is refused"
    );
    for (topic, amount) in [("orders.eu", 50), ("orders.us", 500)] {
        let mut m = publish(topic, "p", &format!("{topic} {amount}"));
        m.properties = vec![("amount".into(), PropertyValue::Int(amount))].into();
        store.queues().send(m).await.unwrap();
    }
    assert_eq!(
        ready(&store, "orders.*", "big").await,
        vec!["orders.us 500"]
    );
    assert_eq!(ready(&store, "orders.*", "pool").await.len(), 2);
    store
        .topics()
        .attach_consumer("orders.*", "big", 1, false)
        .await
        .unwrap();
    assert_eq!(
        store
            .topics()
            .attach_consumer("orders.*", "big", 2, false)
            .await,
        Err(StoreError::SubscriptionInUse("orders.*:big".into()))
    );
    store
        .topics()
        .attach_consumer("orders.*", "pool", 1, true)
        .await
        .unwrap();
    store
        .topics()
        .attach_consumer("orders.*", "pool", 2, true)
        .await
        .unwrap();
    assert_eq!(
        store.topics().unsubscribe("orders.*", "big").await,
        Err(StoreError::SubscriptionInUse("orders.*:big".into()))
    );
    // A shared non-durable one on a pattern: gone with its last consumer.
    let transient = SubscriptionOptions {
        shared: true,
        ..non_durable("")
    };
    store
        .topics()
        .subscribe_topic("orders.>", "live", &transient, "c")
        .await
        .unwrap();
    store
        .topics()
        .attach_consumer("orders.>", "live", 3, true)
        .await
        .unwrap();
    store
        .queues()
        .send(publish("orders.eu", "p", "z"))
        .await
        .unwrap();
    assert_eq!(ready(&store, "orders.>", "live").await, vec!["z"]);
    store
        .topics()
        .detach_consumer("orders.>", "live", 3)
        .await
        .unwrap();
    assert!(
        find_pattern(&store, "orders.>").await.is_none(),
        "the pattern went with its last subscription"
    );
}

/// The listing entry of pattern `pattern`, if listed.
async fn find_pattern(store: &Arc<dyn Store>, pattern: &str) -> Option<TopicInfo> {
    store
        .topics()
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == pattern)
}

/// Publishes to topics a pattern does not match, from many subscriptions on many patterns,
/// reach exactly the subscriptions whose patterns match, once each.
pub async fn many_patterns_reach_exactly_the_matching_ones(store: Arc<dyn Store>) {
    let regions = ["eu", "us", "asia"];
    let goods = ["fish", "corn", "oil"];
    let mut names = Vec::new();
    for r in regions {
        for g in goods {
            names.push(format!("prices.{r}.{g}"));
        }
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    topics(&store, &refs).await;
    let mut patterns = vec!["prices.>".to_string(), ">".to_string()];
    for r in regions {
        patterns.push(format!("prices.{r}.*"));
        patterns.push(format!("prices.{r}.>"));
    }
    for g in goods {
        patterns.push(format!("prices.*.{g}"));
        patterns.push(format!("*.*.{g}"));
    }
    for (i, p) in patterns.iter().enumerate() {
        sub(&store, p, &format!("s{i}")).await;
    }
    for t in &names {
        store.queues().send(publish(t, "p", t)).await.unwrap();
    }
    for (i, p) in patterns.iter().enumerate() {
        let expected: Vec<String> = names
            .iter()
            .filter(|t| ferry_protocol::topic::matches(p, t))
            .cloned()
            .collect();
        assert_eq!(ready(&store, p, &format!("s{i}")).await, expected, "{p}");
    }
}

/// What reopens a store: drops nothing itself (the caller drops the previous one first) and
/// returns the store on the same data.
pub type Reopen = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send>;

/// Durable pattern subscriptions keep their pattern, settings and backlog across a restart
/// and go on matching; non-durable ones are gone.
pub async fn durable_pattern_subscriptions_survive_restart(reopen: Reopen) {
    let store = reopen().await;
    topics(&store, &["prices.eu.fish"]).await;
    store
        .topics()
        .subscribe_topic("prices.*.fish", "eu", &durable("region = 'eu'"), "c")
        .await
        .unwrap();
    sub(&store, "prices.>", "all").await;
    store
        .sessions()
        .claim_session("c", 7, crate::api::Registration::Permanent)
        .await
        .unwrap();
    store
        .topics()
        .subscribe_topic("prices.>", "~c.1", &non_durable(""), "c")
        .await
        .unwrap();
    let mut m = publish("prices.eu.fish", "p", "before");
    m.properties = vec![("region".into(), PropertyValue::Str("eu".into()))].into();
    store.queues().send(m.clone()).await.unwrap();
    store.upkeep().flush().await.unwrap();
    drop(store);

    let store = reopen().await;
    let listed = find_pattern(&store, "prices.*.fish")
        .await
        .expect("the durable pattern subscription is listed after the restart");
    assert_eq!(listed.subscriptions.len(), 1);
    assert_eq!(listed.subscriptions[0].selector, "region = 'eu'");
    assert!(listed.subscriptions[0].durable);
    assert_eq!(ready(&store, "prices.*.fish", "eu").await, vec!["before"]);
    assert_eq!(ready(&store, "prices.>", "all").await, vec!["before"]);
    let all = find_pattern(&store, "prices.>").await.unwrap();
    let names: Vec<&str> = all.subscriptions.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["all"], "the non-durable one is gone");
    m.body = "after".into();
    store.queues().send(m).await.unwrap();
    assert_eq!(
        ready(&store, "prices.*.fish", "eu").await,
        vec!["before", "after"],
        "the pattern goes on matching"
    );
    assert_eq!(
        ready(&store, "prices.>", "all").await,
        vec!["before", "after"]
    );
}
