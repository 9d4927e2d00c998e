//! Non-persistent messages (`persistent: false`) behave like any other while the store runs:
//! received, peeked, acked, nacked, released, expired, dead-lettered, published and committed.
//! That the embedded engine keeps them in memory only is checked by its restart tests.

use std::sync::Arc;

use ferry_protocol::QueueOptions;

use super::*;

/// `m` made non-persistent.
fn transient(m: NewMessage) -> NewMessage {
    NewMessage {
        persistent: false,
        ..m
    }
}

/// Every ready message of a queue, in time order, without taking it.
async fn peek_all(store: &Arc<dyn Store>, queue: &str) -> Vec<Delivery> {
    let mut spec = peek(queue, "c");
    spec.order = Order::Time;
    store.queues().receive(&spec, 1000).await.unwrap()
}

/// Non-persistent messages are peeked, taken and acked in order among persistent ones, with
/// their fields, on every queue they were sent to.
pub async fn non_persistent_messages_are_received_and_acked(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "r"]).await;
    let mut a = transient(msg(&["q", "r"], "p", "a"));
    a.properties = sample_properties();
    a.priority = 7;
    let a_id = store.queues().send(a).await.unwrap();
    store.queues().send(msg(&["q"], "p", "b")).await.unwrap();
    store
        .queues()
        .send(transient(msg(&["q"], "p", "c")))
        .await
        .unwrap();
    assert_eq!(depth(&store, "q").await, (3, 0));
    let all = peek_all(&store, "q").await;
    assert_eq!(bodies(&all), vec!["a", "b", "c"]);
    assert_eq!(all[0].message.id, a_id);
    assert_eq!(all[0].message.properties, sample_properties());
    assert_eq!(all[0].message.priority, 7);
    let mut spec = lease("q", "c");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["a", "b"]);
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(
        bodies(&store.queues().receive(&take("q", "c"), 1).await.unwrap()),
        vec!["c"]
    );
    assert_eq!(depth(&store, "q").await, (0, 1));
    store
        .queues()
        .ack(SESSION, &[d[1].delivery_id])
        .await
        .unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    let r = store.queues().receive(&take("r", "c"), 1).await.unwrap();
    assert_eq!(
        (bodies(&r), r[0].message.id),
        (vec!["a".to_string()], a_id),
        "the copy on the other queue is still there"
    );
}

/// A non-persistent delivery comes back in its old place, flagged redelivered, when nacked
/// with requeue, released or its lease expires; a nack without requeue drops it.
pub async fn non_persistent_messages_are_nacked_released_and_expired(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store
        .queues()
        .send(transient(msg(&["q"], "p", "a")))
        .await
        .unwrap();
    store
        .queues()
        .send(transient(msg(&["q"], "p", "b")))
        .await
        .unwrap();
    let mut spec = lease("q", "c");
    spec.order = Order::Time;
    spec.lease_until_ms = 5_000;
    let d = store.queues().receive(&spec, 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["a"]);
    assert_eq!(
        store
            .queues()
            .nack(SESSION, &[d[0].delivery_id], true)
            .await,
        Ok(vec!["q".to_string()])
    );
    let d = store.queues().receive(&spec, 1).await.unwrap();
    assert_eq!(
        (bodies(&d), d[0].message.delivery_count),
        (vec!["a".into()], 1)
    );
    assert_eq!(
        store.sessions().release_session(SESSION).await,
        Ok(vec!["q".to_string()])
    );
    let d = store.queues().receive(&spec, 1).await.unwrap();
    assert_eq!(
        (bodies(&d), d[0].message.delivery_count),
        (vec!["a".into()], 2)
    );
    assert_eq!(store.upkeep().next_lease_deadline().await, Ok(Some(5_000)));
    assert_eq!(
        store.upkeep().expire_leases(5_000).await,
        Ok(vec!["q".to_string()])
    );
    let d = store.queues().receive(&spec, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["a", "b"], "back in its old place");
    assert_eq!(d[0].message.delivery_count, 3);
    let ids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
    assert_eq!(
        store.queues().nack(SESSION, &ids, false).await,
        Ok(Vec::new())
    );
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert!(peek_all(&store, "q").await.is_empty());
}

/// Non-persistent messages published to a topic reach its subscriptions, and a commit stores
/// non-persistent sends and publishes and acks non-persistent deliveries.
pub async fn non_persistent_publish_and_commit(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store
        .queues()
        .send(transient(publish("t", "p", "pub")))
        .await
        .unwrap();
    store
        .queues()
        .send(transient(msg(&["q"], "p", "sent")))
        .await
        .unwrap();
    let from_sub = store.queues().receive(&lease("t:s", "c"), 1).await.unwrap();
    assert_eq!(bodies(&from_sub), vec!["pub"]);
    let from_q = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    let ids = store
        .transactions()
        .commit(
            SESSION,
            vec![
                transient(msg(&["q"], "p", "tx-sent")),
                transient(publish("t", "p", "tx-pub")),
                msg(&["q"], "p", "tx-persistent"),
            ],
            &[from_sub[0].delivery_id, from_q[0].delivery_id],
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(
        bodies(&peek_all(&store, "q").await),
        vec!["tx-sent", "tx-persistent"]
    );
    assert_eq!(bodies(&peek_all(&store, "t:s").await), vec!["tx-pub"]);
    assert_eq!(depth(&store, "q").await, (2, 0), "the acked one is gone");
    assert_eq!(sub_depth(&store, "t", "s").await, (1, 0));
}

/// A non-persistent message over its queue's maximum delivery count goes to the dead-letter
/// queue; an expired one to the expiry queue; from there they are received like any other.
pub async fn non_persistent_messages_are_dead_lettered(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["dlq", "exp"]).await;
    let options = QueueOptions {
        max_deliveries: 1,
        dead_letter_queue: Some("dlq".into()),
        expiry_queue: Some("exp".into()),
    };
    store
        .queues()
        .create_queue_with("q", &options)
        .await
        .unwrap();
    store
        .queues()
        .send(transient(msg(&["q"], "p", "poison")))
        .await
        .unwrap();
    let mut expiring = transient(msg(&["q"], "p", "stale"));
    expiring.expires_at_ms = NOW + 10;
    store.queues().send(expiring).await.unwrap();
    let mut spec = lease("q", "c");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["poison"]);
    store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    store.upkeep().purge_expired(NOW + 10).await.unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    let d = store.queues().receive(&lease("dlq", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["poison"]);
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    let d = store.queues().receive(&take("exp", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["stale"]);
    assert_eq!(depth(&store, "dlq").await, (0, 0));
    assert_eq!(depth(&store, "exp").await, (0, 0));
}
