//! Topics themselves: create, list, delete (forced or not), and their names beside queues'.

use std::sync::Arc;

use super::super::*;
use super::*;
use crate::error::StoreError;

/// Create, `TopicExists`, list (sorted), delete, `TopicNotFound`, re-create.
pub async fn topic_lifecycle(store: Arc<dyn Store>) {
    assert!(
        store.topics().list_topics().await.unwrap().is_empty(),
        "a fresh store has no topics"
    );
    store.topics().create_topic("prices").await.unwrap();
    store.topics().create_topic("alerts").await.unwrap();
    store.topics().create_topic("news").await.unwrap();
    assert_eq!(
        store.topics().create_topic("prices").await,
        Err(StoreError::TopicExists("prices".into()))
    );
    assert_eq!(
        topic_names(&store).await,
        vec!["alerts", "news", "prices"],
        "list_topics is sorted by name"
    );
    for t in store.topics().list_topics().await.unwrap() {
        assert!(t.subscriptions.is_empty(), "{t:?} has no subscriptions");
    }
    store.topics().delete_topic("news", false).await.unwrap();
    assert_eq!(
        store.topics().delete_topic("news", false).await,
        Err(StoreError::TopicNotFound("news".into())),
        "a deleted topic is gone"
    );
    assert_eq!(topic_names(&store).await, vec!["alerts", "prices"]);
    store.topics().create_topic("news").await.unwrap();
    assert_eq!(topic_names(&store).await, vec!["alerts", "news", "prices"]);
    assert!(
        store.queues().list_queues().await.unwrap().is_empty(),
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
    assert_eq!(store.topics().delete_topic("nope", false).await, missing());
    assert_eq!(store.topics().delete_topic("nope", true).await, missing());
    assert_eq!(
        store.queues().send(publish("nope", "p", "x")).await,
        missing()
    );
    assert_eq!(
        store
            .queues()
            .send_batch(vec![publish("nope", "p", "x")])
            .await,
        vec![missing()]
    );
    assert_eq!(
        store
            .topics()
            .subscribe_topic("nope", "s", &durable(""), "c")
            .await,
        missing()
    );
    assert_eq!(
        store
            .topics()
            .subscribe_topic("nope", "~c.1", &non_durable(""), "c")
            .await,
        missing()
    );
    assert_eq!(store.topics().unsubscribe("nope", "s").await, missing());
    assert!(store.topics().list_topics().await.unwrap().is_empty());
    assert_eq!(queue_names(&store).await, vec!["q"]);
    // A queue of that name is no topic either.
    store.queues().create_queue("nope").await.unwrap();
    assert_eq!(
        store.queues().send(publish("nope", "p", "x")).await,
        missing()
    );
    assert_eq!(depth(&store, "nope").await, (0, 0));
}

/// A queue and a topic may share a name: each is created, listed, used and deleted on its own.
pub async fn topic_and_queue_names_are_independent(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["shared"]).await;
    store
        .topics()
        .create_topic("shared")
        .await
        .expect("a topic may have the name of a queue");
    store.topics().create_topic("only-topic").await.unwrap();
    store
        .queues()
        .create_queue("only-topic")
        .await
        .expect("a queue may have the name of a topic");
    subscribe(&store, "shared", "s", &durable("")).await;
    assert_eq!(queue_names(&store).await, vec!["only-topic", "shared"]);
    assert_eq!(topic_names(&store).await, vec!["only-topic", "shared"]);
    store
        .queues()
        .send(msg(&["shared"], "p", "to queue"))
        .await
        .unwrap();
    store
        .queues()
        .send(publish("shared", "p", "to topic"))
        .await
        .unwrap();
    assert_eq!(bodies(&peek_all(&store, "shared").await), vec!["to queue"]);
    assert_eq!(
        bodies(&peek_all(&store, "shared:s").await),
        vec!["to topic"]
    );
    store.queues().delete_queue("shared", true).await.unwrap();
    assert_eq!(
        topic_names(&store).await,
        vec!["only-topic", "shared"],
        "deleting a queue leaves the topic of that name"
    );
    assert_eq!(sub_depth(&store, "shared", "s").await, (1, 0));
    store
        .topics()
        .delete_topic("only-topic", false)
        .await
        .unwrap();
    assert_eq!(
        queue_names(&store).await,
        vec!["only-topic"],
        "deleting a topic leaves the queue of that name"
    );
    assert_eq!(
        store.queues().create_queue("only-topic").await,
        Err(StoreError::QueueExists("only-topic".into()))
    );
    assert_eq!(
        store.topics().create_topic("shared").await,
        Err(StoreError::TopicExists("shared".into()))
    );
}

/// `list_topics` lists each topic's subscriptions sorted by name, with their settings and the
/// ready and in-flight counts of their queues.
pub async fn list_topics_shows_subscriptions_sorted_with_counts(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store.topics().create_topic("t").await.unwrap();
    store.topics().create_topic("empty").await.unwrap();
    subscribe(&store, "t", "zeta", &durable("")).await;
    let shared = SubscriptionOptions {
        shared: true,
        ..durable("n > 1")
    };
    subscribe(&store, "t", "alpha", &shared).await;
    subscribe(&store, "t", "~c.1", &non_durable("")).await;
    subscribe(&store, "t", "mid", &durable("")).await;
    for n in 1..=3 {
        let mut m = publish("t", "p", &format!("m{n}"));
        m.properties = vec![("n".into(), PropertyValue::Int(n))].into();
        store.queues().send(m).await.unwrap();
    }
    // zeta: one leased, one taken, one ready.
    store
        .queues()
        .receive(&lease("t:zeta", "c"), 1)
        .await
        .unwrap();
    store
        .queues()
        .receive(&take("t:zeta", "c"), 1)
        .await
        .unwrap();
    // alpha (n > 1 only): both leased.
    store
        .queues()
        .receive(&lease("t:alpha", "c"), 2)
        .await
        .unwrap();
    let list = store.topics().list_topics().await.unwrap();
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
    store.queues().send(publish("t", "p", "one")).await.unwrap();
    store.queues().send(publish("t", "p", "two")).await.unwrap();
    assert_eq!(
        store.topics().delete_topic("t", false).await,
        Err(StoreError::TopicNotEmpty {
            name: "t".into(),
            depth: 4
        }),
        "ready messages on two subscriptions"
    );
    // Only in-flight messages left: still not empty.
    store.queues().receive(&take("t:a", "c"), 2).await.unwrap();
    let d = store.queues().receive(&lease("t:b", "c"), 2).await.unwrap();
    assert_eq!(sub_depth(&store, "t", "b").await, (0, 2));
    assert_eq!(
        store.topics().delete_topic("t", false).await,
        Err(StoreError::TopicNotEmpty {
            name: "t".into(),
            depth: 2
        }),
        "in-flight messages count"
    );
    assert_eq!(subscription_names(&store, "t").await, vec!["a", "b"]);
    let ids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
    store.queues().ack(SESSION, &ids).await.unwrap();
    store
        .topics()
        .delete_topic("t", false)
        .await
        .expect("a topic whose subscriptions are empty is deleted without force");
    assert!(store.topics().list_topics().await.unwrap().is_empty());
    store.topics().create_topic("t").await.unwrap();
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
    store.topics().create_topic("other").await.unwrap();
    subscribe(&store, "other", "a", &durable("")).await;
    store.queues().send(publish("t", "p", "one")).await.unwrap();
    store.queues().send(publish("t", "p", "two")).await.unwrap();
    store
        .queues()
        .send(publish("other", "p", "kept"))
        .await
        .unwrap();
    let d = store.queues().receive(&lease("t:a", "c"), 1).await.unwrap();
    let id = d[0].delivery_id;
    store.topics().delete_topic("t", true).await.unwrap();
    assert_eq!(topic_names(&store).await, vec!["other"]);
    assert_gone_with_delivery(
        &store,
        "t:a",
        id,
        "deliveries of a force-deleted topic's subscription are unknown",
    )
    .await;
    assert_eq!(sub_depth(&store, "other", "a").await, (1, 0));
    // Re-created with a subscription of the same name: nothing of the old one comes back.
    store.topics().create_topic("t").await.unwrap();
    subscribe(&store, "t", "a", &durable("")).await;
    assert_eq!(sub_depth(&store, "t", "a").await, (0, 0));
    assert!(store
        .queues()
        .receive(&take("t:a", "c"), 10)
        .await
        .unwrap()
        .is_empty());
}

/// Topics, and the subscriptions of each, are listed sorted by name as bytes (upper case
/// before lower case, punctuation by its code), as `list_queues` sorts queues.
pub async fn topics_and_subscriptions_sort_by_name(store: Arc<dyn Store>) {
    setup(&store, &["c"], &[]).await;
    let names = [
        "beta_3", "Zeta", "alpha", "beta.1", "beta-2", "B", "a9", "a10",
    ];
    for n in names {
        store.topics().create_topic(n).await.unwrap();
        store.queues().create_queue(n).await.unwrap();
    }
    for n in names {
        subscribe(&store, "alpha", n, &durable("")).await;
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
