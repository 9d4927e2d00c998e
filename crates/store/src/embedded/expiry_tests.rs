//! The expiry index: a purge of expired messages looks only at messages with a time to live,
//! so the index must hold exactly those still stored, whichever way they go, and must be
//! rebuilt when the store is reopened.

use std::sync::Arc;

use super::engine_tests::open;
use super::{EmbeddedStore, FaultyBackend};
use crate::api::{NewMessage, Store};
use crate::conformance::{depth, lease, msg, setup, take, NOW, SESSION};

const PLAIN: usize = 200;

fn expiring(queues: &[&str], body: &str, ttl_ms: u64) -> NewMessage {
    NewMessage {
        expires_at_ms: NOW + ttl_ms,
        ..msg(queues, "p", body)
    }
}

fn index_len(store: &EmbeddedStore) -> usize {
    store.state().expiry_index_len()
}

/// Sends `PLAIN` messages without a time to live to queue "plain".
async fn send_plain(store: &Arc<dyn Store>) {
    for i in 0..PLAIN {
        store
            .queues()
            .send(msg(&["plain"], "p", &format!("plain {i}")))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_expiry_index_forgets_every_message_that_goes() {
    let disk = FaultyBackend::new();
    let embedded = open(&disk, 1 << 20).await;
    let store: Arc<dyn Store> = embedded.clone();
    let queues = ["plain", "a", "b", "taken", "acked", "flight", "doomed"];
    setup(&store, &["p", "c"], &queues).await;
    send_plain(&store).await;
    assert_eq!(index_len(&embedded), 0, "plain messages are not indexed");

    let expiring_messages: [(&[&str], &str, u64); 5] = [
        (&["a", "b"], "on two queues", 100),
        (&["taken"], "taken", 1_000),
        (&["acked"], "acked", 1_000),
        (&["flight"], "in flight", 100),
        (&["doomed"], "queue deleted", 1_000),
    ];
    for (queues, body, ttl_ms) in expiring_messages {
        store
            .queues()
            .send(expiring(queues, body, ttl_ms))
            .await
            .unwrap();
    }
    assert_eq!(index_len(&embedded), 5);

    // Taken before it expires, with auto ack and with client ack.
    assert_eq!(
        store
            .queues()
            .receive(&take("taken", "c"), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let got = store
        .queues()
        .receive(&lease("acked", "c"), 10)
        .await
        .unwrap();
    store
        .queues()
        .ack(SESSION, &[got[0].delivery_id])
        .await
        .unwrap();
    // Gone with its queue.
    store.queues().delete_queue("doomed", true).await.unwrap();
    assert_eq!(index_len(&embedded), 2);

    // Expired: purged from both of its queues; the one in flight stays until its lease ends.
    let flight = store
        .queues()
        .receive(&lease("flight", "c"), 10)
        .await
        .unwrap();
    assert_eq!(store.upkeep().purge_expired(NOW + 100).await.unwrap(), 2);
    assert_eq!(depth(&store, "a").await, (0, 0));
    assert_eq!(depth(&store, "b").await, (0, 0));
    assert_eq!(
        index_len(&embedded),
        1,
        "the message in flight stays indexed"
    );
    store
        .queues()
        .nack(SESSION, &[flight[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(store.upkeep().purge_expired(NOW + 200).await.unwrap(), 1);
    assert_eq!(depth(&store, "flight").await, (0, 0));
    assert_eq!(index_len(&embedded), 0);
    assert_eq!(
        depth(&store, "plain").await,
        (PLAIN as u64, 0),
        "purges leave messages without a time to live"
    );
}

#[tokio::test]
async fn expired_messages_are_purged_after_a_restart() {
    let disk = FaultyBackend::new();
    {
        let embedded = open(&disk, 1 << 20).await;
        let store: Arc<dyn Store> = embedded;
        setup(&store, &["p", "c"], &["plain", "q"]).await;
        send_plain(&store).await;
        for i in 0..10 {
            store
                .queues()
                .send(expiring(&["q"], &format!("short {i}"), 100))
                .await
                .unwrap();
        }
        store
            .queues()
            .send(expiring(&["q"], "long", 10_000))
            .await
            .unwrap();
    }
    let embedded = open(&disk, 1 << 20).await;
    assert_eq!(index_len(&embedded), 11, "recovery rebuilds the index");
    let store: Arc<dyn Store> = embedded.clone();
    assert_eq!(store.upkeep().purge_expired(NOW + 100).await.unwrap(), 10);
    assert_eq!(depth(&store, "q").await, (1, 0));
    assert_eq!(depth(&store, "plain").await, (PLAIN as u64, 0));
    assert_eq!(index_len(&embedded), 1);
}
