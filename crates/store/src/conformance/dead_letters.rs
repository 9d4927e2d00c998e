//! Per-queue maximum delivery count and dead-letter queue.

use std::sync::Arc;

use ferry_protocol::{PropertyValue, QueueOptions};

use super::*;
use crate::api::dead_letter;
use crate::error::StoreError;

fn limited(max_deliveries: u32, dead_letter_queue: Option<&str>) -> QueueOptions {
    QueueOptions {
        max_deliveries,
        dead_letter_queue: dead_letter_queue.map(str::to_owned),
        expiry_queue: None,
    }
}

fn property<'a>(d: &'a Delivery, name: &str) -> Option<&'a PropertyValue> {
    d.message
        .properties
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

/// A message whose delivery comes back after the queue's maximum number of deliveries goes to
/// the dead-letter queue (by nack with requeue, and by lease expiry), with its history; below
/// the maximum it comes back as usual.
pub async fn dead_lettered_after_max_deliveries_with_history(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["dlq"]).await;
    store
        .queues()
        .create_queue_with("q", &limited(2, Some("dlq")))
        .await
        .unwrap();
    let mut m = msg(&["q"], "p", "poison");
    m.properties = vec![("k".into(), PropertyValue::Int(1))].into();
    m.priority = 7;
    let id = store.queues().send(m).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    let back = store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(
        back,
        vec!["q".to_string()],
        "below the maximum: back on its queue"
    );
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(d[0].message.delivery_count, 1);
    let back = store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert!(back.contains(&"dlq".to_string()), "{back:?}");
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert_eq!(depth(&store, "dlq").await, (1, 0));
    let got = store.queues().receive(&take("dlq", "c"), 1).await.unwrap();
    assert_eq!(bodies(&got), vec!["poison"]);
    let dl = &got[0];
    assert_eq!(dl.message.sender, "p");
    assert_eq!(dl.message.priority, 7);
    assert_eq!(dl.message.created_at, NOW, "the original arrival time");
    assert_eq!(
        dl.message.delivery_count, 0,
        "fresh on the dead-letter queue"
    );
    assert_ne!(dl.message.id, id, "a new message");
    assert_eq!(property(dl, "k"), Some(&PropertyValue::Int(1)));
    assert_eq!(
        property(dl, dead_letter::ORIGINAL_QUEUE),
        Some(&PropertyValue::Str("q".into()))
    );
    assert_eq!(
        property(dl, dead_letter::ORIGINAL_ID),
        Some(&PropertyValue::Int(id as i64))
    );
    assert_eq!(
        property(dl, dead_letter::DELIVERY_COUNT),
        Some(&PropertyValue::Int(2))
    );
    assert_eq!(
        property(dl, dead_letter::REASON),
        Some(&PropertyValue::Str(dead_letter::MAX_DELIVERIES.into()))
    );

    // The same by lease expiry.
    store.queues().send(msg(&["q"], "p", "slow")).await.unwrap();
    for _ in 0..2 {
        let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
        assert_eq!(bodies(&d), vec!["slow"]);
        store.upkeep().expire_leases(u64::MAX / 2).await.unwrap();
    }
    assert_eq!(depth(&store, "q").await, (0, 0));
    let got = store.queues().receive(&take("dlq", "c"), 1).await.unwrap();
    assert_eq!(bodies(&got), vec!["slow"]);
    assert_eq!(
        property(&got[0], dead_letter::DELIVERY_COUNT),
        Some(&PropertyValue::Int(2))
    );
}

/// Over the maximum without a dead-letter queue, a message is dropped (here: by a released
/// session); a nack without requeue drops as always.
pub async fn over_max_without_dead_letter_queue_is_dropped(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &[]).await;
    store
        .queues()
        .create_queue_with("q", &limited(1, None))
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "p", "once")).await.unwrap();
    store
        .queues()
        .send(msg(&["q"], "p", "other"))
        .await
        .unwrap();
    let d = store.queues().receive(&lease("q", "c"), 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["once", "other"]);
    store.sessions().release_session(SESSION).await.unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert!(store
        .queues()
        .receive(&take("q", "c"), 1)
        .await
        .unwrap()
        .is_empty());
}

/// The dead-letter queue must exist, and cannot be the queue itself; nothing is created then.
pub async fn dead_letter_queue_must_exist(store: Arc<dyn Store>) {
    setup(&store, &["p"], &[]).await;
    match store
        .queues()
        .create_queue_with("q", &limited(3, Some("nope")))
        .await
    {
        Err(StoreError::QueueNotFound(name)) => assert_eq!(name, "nope"),
        other => panic!("expected QueueNotFound, got {other:?}"),
    }
    match store
        .queues()
        .create_queue_with("q", &limited(3, Some("q")))
        .await
    {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(store.queues().list_queues().await.unwrap().is_empty());
}

/// Expired messages of a queue with an expiry queue go there, with their history, once: the
/// ones a receive passes over and the ones the upkeep purges (delayed ones included).
pub async fn expired_messages_move_to_the_expiry_queue(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["exp"]).await;
    let options = QueueOptions {
        expiry_queue: Some("exp".into()),
        ..QueueOptions::default()
    };
    store
        .queues()
        .create_queue_with("q", &options)
        .await
        .unwrap();
    let mut gone = msg(&["q"], "p", "gone");
    gone.expires_at_ms = NOW + 100;
    let gone_id = store.queues().send(gone).await.unwrap();
    let mut never = msg(&["q"], "p", "never visible");
    never.deliver_at_ms = NOW + 1_000;
    never.expires_at_ms = NOW + 500;
    store.queues().send(never).await.unwrap();
    store
        .queues()
        .send(msg(&["q"], "p", "plain"))
        .await
        .unwrap();
    let mut spec = take("q", "c");
    spec.now_ms = NOW + 100;
    assert_eq!(
        bodies(&store.queues().receive(&spec, 10).await.unwrap()),
        vec!["plain"]
    );
    store.upkeep().purge_expired(NOW + 600).await.unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    let got = store.queues().receive(&take("exp", "c"), 10).await.unwrap();
    assert_eq!(bodies(&got), vec!["gone", "never visible"]);
    assert_eq!(
        got[0].message.expires_at, 0,
        "no time to live on the expiry queue"
    );
    assert_eq!(
        property(&got[0], dead_letter::REASON),
        Some(&PropertyValue::Str(dead_letter::EXPIRED.into()))
    );
    assert_eq!(
        property(&got[0], dead_letter::ORIGINAL_QUEUE),
        Some(&PropertyValue::Str("q".into()))
    );
    assert_eq!(
        property(&got[0], dead_letter::ORIGINAL_ID),
        Some(&PropertyValue::Int(gone_id as i64))
    );
    assert_eq!(
        property(&got[0], dead_letter::DELIVERY_COUNT),
        Some(&PropertyValue::Int(0))
    );
    store.upkeep().purge_expired(NOW + 10_000).await.unwrap();
    assert!(store
        .queues()
        .receive(&take("exp", "c"), 10)
        .await
        .unwrap()
        .is_empty());
}
