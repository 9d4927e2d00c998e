//! Session claims: one live session per client name, whichever node serves it.

use std::sync::Arc;

use super::*;
use crate::error::StoreError;
use crate::{Heartbeat, Registration};

/// A claim registers the client; another session is refused until the holder ends.
pub async fn claim_is_exclusive_until_ended(store: Arc<dyn Store>) {
    store
        .sessions()
        .claim_session("alice", 1, Registration::Permanent)
        .await
        .unwrap();
    assert!(
        store.sessions().client_exists("alice").await.unwrap(),
        "a claim registers the client"
    );
    store
        .sessions()
        .claim_session("alice", 1, Registration::Permanent)
        .await
        .expect("claiming again for the holding session succeeds");
    assert_eq!(
        store
            .sessions()
            .claim_session("alice", 2, Registration::Permanent)
            .await,
        Err(StoreError::AlreadyOnline("alice".into()))
    );
    store
        .sessions()
        .claim_session("bob", 2, Registration::Permanent)
        .await
        .unwrap();
    // Ending by a session that does not hold the claim changes nothing.
    store.sessions().end_session("alice", 2).await.unwrap();
    assert_eq!(
        store
            .sessions()
            .claim_session("alice", 3, Registration::Permanent)
            .await,
        Err(StoreError::AlreadyOnline("alice".into()))
    );
    store.sessions().end_session("alice", 1).await.unwrap();
    store.sessions().end_session("alice", 1).await.unwrap();
    store
        .sessions()
        .claim_session("alice", 3, Registration::Permanent)
        .await
        .unwrap();
    assert_eq!(
        store
            .sessions()
            .claim_session("bob", 1, Registration::Permanent)
            .await,
        Err(StoreError::AlreadyOnline("bob".into()))
    );
}

/// Claims and session leases are independent: releasing a session's deliveries leaves its
/// claim, ending the claim leaves its deliveries.
pub async fn claims_and_leases_are_independent(store: Arc<dyn Store>) {
    setup(&store, &["p"], &["q"]).await;
    store
        .sessions()
        .claim_session("c", SESSION, Registration::Permanent)
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    store.sessions().end_session("c", SESSION).await.unwrap();
    assert_eq!(
        depth(&store, "q").await,
        (0, 1),
        "the lease outlives the claim"
    );
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    store
        .sessions()
        .claim_session("c", SESSION + 1, Registration::Permanent)
        .await
        .unwrap();
    store.sessions().release_session(SESSION + 1).await.unwrap();
    assert_eq!(
        store
            .sessions()
            .claim_session("c", SESSION + 2, Registration::Permanent)
            .await,
        Err(StoreError::AlreadyOnline("c".into())),
        "releasing deliveries does not end the claim"
    );
}

/// A heartbeat of the only node frees nothing.
pub async fn heartbeat_of_a_lone_node_frees_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p"], &["q"]).await;
    store
        .sessions()
        .claim_session("c", SESSION, Registration::Permanent)
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(
        store.sessions().heartbeat(1).await.unwrap(),
        Heartbeat::default()
    );
    assert_eq!(
        store.sessions().heartbeat(1).await.unwrap(),
        Heartbeat::default()
    );
    assert_eq!(depth(&store, "q").await, (0, 1));
    assert_eq!(
        store
            .sessions()
            .claim_session("c", SESSION + 1, Registration::Permanent)
            .await,
        Err(StoreError::AlreadyOnline("c".into()))
    );
}
