//! Queue and client metadata.

use std::sync::Arc;

use super::*;
use crate::error::StoreError;

/// Create, list (sorted, with depth), `QueueExists`, delete, `QueueNotFound`, re-create.
pub async fn queue_lifecycle(store: Arc<dyn Store>) {
    assert!(store.queues().list_queues().await.unwrap().is_empty());
    store.queues().create_queue("orders").await.unwrap();
    store.queues().create_queue("audit").await.unwrap();
    assert_eq!(
        store.queues().create_queue("orders").await,
        Err(StoreError::QueueExists("orders".into()))
    );
    let names: Vec<String> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(
        names,
        vec!["audit", "orders"],
        "list_queues is sorted by name"
    );
    assert_eq!(depth(&store, "orders").await, (0, 0));
    store.queues().delete_queue("orders", false).await.unwrap();
    assert_eq!(
        store.queues().delete_queue("orders", false).await,
        Err(StoreError::QueueNotFound("orders".into()))
    );
    assert_eq!(
        store.queues().delete_queue("never", true).await,
        Err(StoreError::QueueNotFound("never".into()))
    );
    let names: Vec<String> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, vec!["audit"]);
    store.queues().create_queue("orders").await.unwrap();
    assert_eq!(depth(&store, "orders").await, (0, 0));
}

/// `QueueNotEmpty` counts ready and in-flight messages; `force` drops them and makes the
/// in-flight deliveries unknown.
pub async fn delete_non_empty_queue(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "a")).await.unwrap();
    store.queues().send(msg(&["q"], "p", "b")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(depth(&store, "q").await, (1, 1));
    assert_eq!(
        store.queues().delete_queue("q", false).await,
        Err(StoreError::QueueNotEmpty {
            name: "q".into(),
            depth: 2
        })
    );
    store.queues().delete_queue("q", true).await.unwrap();
    assert!(store.queues().list_queues().await.unwrap().is_empty());
    let id = d[0].delivery_id;
    assert_eq!(
        store.queues().ack(SESSION, &[id]).await,
        Err(StoreError::DeliveriesNotFound(vec![id])),
        "deliveries of a force-deleted queue are unknown"
    );
    assert_eq!(store.upkeep().next_lease_deadline().await.unwrap(), None);
    store.queues().create_queue("q").await.unwrap();
    assert_eq!(
        depth(&store, "q").await,
        (0, 0),
        "a re-created queue starts empty"
    );
    assert!(store
        .queues()
        .receive(&take("q", "c"), 10)
        .await
        .unwrap()
        .is_empty());
}

/// A forced delete drops a message from that queue only.
pub async fn forced_delete_keeps_other_queues(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["a", "b"]).await;
    store
        .queues()
        .send(msg(&["a", "b"], "p", "both"))
        .await
        .unwrap();
    store.queues().delete_queue("a", true).await.unwrap();
    assert_eq!(depth(&store, "b").await, (1, 0));
    let d = store.queues().receive(&take("b", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["both"]);
    assert_eq!(d[0].message.queue, "b");
}

/// Registration is idempotent and remembered.
pub async fn clients_register_idempotently(store: Arc<dyn Store>) {
    assert!(!store.sessions().client_exists("alice").await.unwrap());
    store.sessions().register_client("alice").await.unwrap();
    store.sessions().register_client("alice").await.unwrap();
    assert!(store.sessions().client_exists("alice").await.unwrap());
    assert!(!store.sessions().client_exists("bob").await.unwrap());
}
