//! Settling client-ack deliveries: ack, nack, release, expiry, unknown ids.

use std::sync::Arc;

use super::*;
use crate::error::StoreError;

/// A client-ack take leases the message; the ack removes it.
pub async fn client_ack_lease_then_ack(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["x"]);
    assert_ne!(d[0].delivery_id, 0);
    assert!(!d[0].message.redelivered());
    assert_eq!(depth(&store, "q").await, (0, 1));
    assert!(
        store
            .queues()
            .receive(&take("q", "c"), 1)
            .await
            .unwrap()
            .is_empty(),
        "leased is not ready"
    );
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert_eq!(
        store.queues().ack(SESSION, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id])),
        "a second ack of the same delivery is unknown"
    );
    store.upkeep().expire_leases(u64::MAX).await.unwrap();
    assert!(store
        .queues()
        .receive(&take("q", "c"), 1)
        .await
        .unwrap()
        .is_empty());
}

/// A requeued delivery comes back in its old position, flagged redelivered.
pub async fn nack_requeue_redelivers_in_old_position(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    for b in ["a", "b", "c"] {
        store.queues().send(msg(&["q"], "p", b)).await.unwrap();
    }
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["a"]);
    let queues = store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(queues, vec!["q"]);
    assert_eq!(depth(&store, "q").await, (3, 0));
    let d = store.queues().receive(&lease("q", "c"), 3).await.unwrap();
    assert_eq!(bodies(&d), vec!["a", "b", "c"]);
    assert_eq!(d[0].message.delivery_count, 1);
    assert!(d[0].message.redelivered());
    assert!(!d[1].message.redelivered());
    let ids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
    store.queues().nack(SESSION, &ids, true).await.unwrap();
    let d = store.queues().receive(&take("q", "c"), 1).await.unwrap();
    assert_eq!(d[0].message.delivery_count, 2);
}

/// A nack without requeue drops the message.
pub async fn nack_without_requeue_drops(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    let queues = store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], false)
        .await
        .unwrap();
    assert!(queues.is_empty());
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert!(store
        .queues()
        .receive(&take("q", "c"), 1)
        .await
        .unwrap()
        .is_empty());
}

/// Releasing a session returns all it holds, and only that.
pub async fn release_session_returns_deliveries(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q1", "q2"]).await;
    store.queues().send(msg(&["q1"], "p", "a")).await.unwrap();
    store.queues().send(msg(&["q2"], "p", "b")).await.unwrap();
    store.queues().send(msg(&["q2"], "p", "c")).await.unwrap();
    store.queues().receive(&lease("q1", "c"), 1).await.unwrap();
    store.queues().receive(&lease("q2", "c"), 1).await.unwrap();
    let mut other = lease("q2", "c");
    other.session = SESSION + 1;
    let kept = store.queues().receive(&other, 1).await.unwrap();
    assert_eq!(bodies(&kept), vec!["c"]);
    let queues = store.sessions().release_session(SESSION).await.unwrap();
    assert_eq!(queues, vec!["q1", "q2"]);
    assert_eq!(depth(&store, "q1").await, (1, 0));
    assert_eq!(depth(&store, "q2").await, (1, 1));
    let d = store.queues().receive(&take("q2", "c"), 5).await.unwrap();
    assert_eq!(bodies(&d), vec!["b"]);
    assert!(d[0].message.redelivered());
    assert!(store
        .sessions()
        .release_session(SESSION)
        .await
        .unwrap()
        .is_empty());
    store
        .queues()
        .ack(SESSION + 1, &[kept[0].delivery_id])
        .await
        .unwrap();
}

/// Leases expire at their deadline (inclusive), and the next deadline is reported.
pub async fn expire_leases_and_next_deadline(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "r"]).await;
    store.queues().send(msg(&["q"], "p", "a")).await.unwrap();
    store.queues().send(msg(&["r"], "p", "b")).await.unwrap();
    assert_eq!(store.upkeep().next_lease_deadline().await.unwrap(), None);
    let mut s = lease("q", "c");
    s.lease_until_ms = 5_000;
    let first = store.queues().receive(&s, 1).await.unwrap();
    let mut s = lease("r", "c");
    s.lease_until_ms = 3_000;
    store.queues().receive(&s, 1).await.unwrap();
    assert_eq!(
        store.upkeep().next_lease_deadline().await.unwrap(),
        Some(3_000)
    );
    assert!(store
        .upkeep()
        .expire_leases(2_999)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.upkeep().expire_leases(3_000).await.unwrap(),
        vec!["r"]
    );
    assert_eq!(
        store.upkeep().next_lease_deadline().await.unwrap(),
        Some(5_000)
    );
    assert_eq!(depth(&store, "r").await, (1, 0));
    assert_eq!(
        store.upkeep().expire_leases(10_000).await.unwrap(),
        vec!["q"]
    );
    assert_eq!(store.upkeep().next_lease_deadline().await.unwrap(), None);
    assert_eq!(
        store.queues().ack(SESSION, &[first[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![first[0].delivery_id])),
        "an expired delivery can no longer be acked"
    );
    let d = store.queues().receive(&take("q", "c"), 1).await.unwrap();
    assert!(d[0].message.redelivered());
}

/// Known ids are settled even when some are unknown; the error lists the unknown ones.
pub async fn unknown_delivery_ids_are_listed(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "a")).await.unwrap();
    store.queues().send(msg(&["q"], "p", "b")).await.unwrap();
    store.queues().send(msg(&["q"], "p", "c")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 3).await.unwrap();
    let (a, b, c) = (d[0].delivery_id, d[1].delivery_id, d[2].delivery_id);
    let bogus = a.max(b).max(c) + 1000;
    assert_eq!(
        store.queues().ack(SESSION, &[a, bogus]).await,
        Err(StoreError::DeliveriesNotFound(vec![bogus]))
    );
    assert_eq!(depth(&store, "q").await, (0, 2), "the known id was acked");
    assert_eq!(
        store.queues().nack(SESSION, &[bogus, b], true).await,
        Err(StoreError::DeliveriesNotFound(vec![bogus]))
    );
    assert_eq!(
        depth(&store, "q").await,
        (1, 1),
        "the known id was requeued"
    );
    assert_eq!(
        store.queues().nack(SESSION, &[c, bogus + 1], false).await,
        Err(StoreError::DeliveriesNotFound(vec![bogus + 1]))
    );
    assert_eq!(depth(&store, "q").await, (1, 0), "the known id was dropped");
    store.queues().ack(SESSION, &[]).await.unwrap();
}

/// A delivery held by one session cannot be settled by another.
pub async fn other_sessions_cannot_settle(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "a")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    let id = d[0].delivery_id;
    assert_eq!(
        store.queues().ack(SESSION + 1, &[id]).await,
        Err(StoreError::DeliveriesNotFound(vec![id]))
    );
    assert_eq!(
        store.queues().nack(SESSION + 1, &[id], true).await,
        Err(StoreError::DeliveriesNotFound(vec![id]))
    );
    assert!(store
        .sessions()
        .release_session(SESSION + 1)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(depth(&store, "q").await, (0, 1));
    store.queues().ack(SESSION, &[id]).await.unwrap();
}

/// A held auto-ack take hides the message from every other receive and writes nothing for it;
/// its ack removes it as the take would have, and it never expires as a lease does.
pub async fn held_take_is_removed_by_its_ack(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    store.queues().send(msg(&["q"], "p", "y")).await.unwrap();
    let d = store.queues().receive(&held("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["x"]);
    assert_ne!(
        d[0].delivery_id, 0,
        "a held take has a delivery id to settle"
    );
    assert_eq!(depth(&store, "q").await, (1, 1));
    let mut other = take("q", "c");
    other.session = SESSION + 1;
    assert_eq!(
        bodies(&store.queues().receive(&other, 5).await.unwrap()),
        vec!["y"],
        "a held message is invisible to other receives"
    );
    store
        .upkeep()
        .expire_leases(NOW + 1_000_000_000)
        .await
        .unwrap();
    assert_eq!(
        depth(&store, "q").await,
        (0, 1),
        "a held take has no deadline"
    );
    assert_eq!(
        store.queues().ack(SESSION + 1, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id])),
        "only its session settles it"
    );
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    store.sessions().release_session(SESSION).await.unwrap();
    assert_eq!(
        depth(&store, "q").await,
        (0, 0),
        "an acked take stays removed"
    );
}

/// A held take released with its session is back where it was, neither counted as a delivery
/// nor flagged redelivered, and a queue's maximum delivery count does not see it.
pub async fn held_take_comes_back_unchanged_on_release(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q.dead"]).await;
    let options = ferry_protocol::QueueOptions {
        max_deliveries: 1,
        dead_letter_queue: Some("q.dead".into()),
        expiry_queue: None,
    };
    store
        .queues()
        .create_queue_with("q", &options)
        .await
        .unwrap();
    for b in ["a", "b"] {
        store.queues().send(msg(&["q"], "p", b)).await.unwrap();
    }
    for _ in 0..3 {
        let d = store.queues().receive(&held("q", "c"), 1).await.unwrap();
        assert_eq!(bodies(&d), vec!["a"]);
        assert_eq!(d[0].message.delivery_count, 0);
        assert_eq!(
            store.sessions().release_session(SESSION).await.unwrap(),
            vec!["q"]
        );
    }
    assert_eq!(depth(&store, "q").await, (2, 0));
    assert_eq!(
        depth(&store, "q.dead").await,
        (0, 0),
        "nothing dead-lettered"
    );
    let d = store.queues().receive(&take("q", "c"), 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["a", "b"], "back in its old position");
    assert!(!d[0].message.redelivered());
}

/// A held take through a selector holds only what the selector picks.
pub async fn held_take_with_a_selector_is_held_too(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "skip")).await.unwrap();
    let mut m = msg(&["q"], "p", "pick");
    m.priority = 9;
    store.queues().send(m).await.unwrap();
    let spec = super::selecting::selecting(held("q", "c"), "priority > 5");
    let d = store.queues().receive(&spec, 5).await.unwrap();
    assert_eq!(bodies(&d), vec!["pick"]);
    assert_ne!(d[0].delivery_id, 0);
    assert_eq!(d[0].message.delivery_count, 0);
    assert_eq!(depth(&store, "q").await, (1, 1));
    store.sessions().release_session(SESSION).await.unwrap();
    assert_eq!(depth(&store, "q").await, (2, 0));
    let d = store.queues().receive(&spec, 5).await.unwrap();
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(depth(&store, "q").await, (1, 0));
}
