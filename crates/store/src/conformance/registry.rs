//! The client registry: names that hold nothing expire, ephemeral names go with their session,
//! and names that hold something (a message sent by or addressed to them, a durable
//! subscription of their own) or have a session stay.
//!
//! Session ends are stamped by the store's own clock ([`wall_ms`]); the tests pass times around
//! it to [`Upkeep::expire_clients`](crate::Upkeep::expire_clients), so none of them waits.

use std::sync::Arc;

use super::*;
use crate::api::Registration;
use crate::clock::wall_ms;
use crate::error::StoreError;

/// Long enough that no name of a test is that old.
const HOUR: u64 = 3_600_000;

/// A time at which every session a test ended is older than `HOUR`.
fn later() -> u64 {
    wall_ms() + 2 * HOUR
}

/// Registers `name` through a session that ends at once.
async fn visit(store: &Arc<dyn Store>, name: &str, session: SessionId, how: Registration) {
    store
        .sessions()
        .claim_session(name, session, how)
        .await
        .unwrap();
    store.sessions().end_session(name, session).await.unwrap();
}

/// A permanent name that holds nothing expires once offline for the idle time, not before;
/// it is registered again by its next session.
pub async fn idle_names_that_hold_nothing_expire(store: Arc<dyn Store>) {
    visit(&store, "gone", 1, Registration::Permanent).await;
    store
        .sessions()
        .register_client("never-connected")
        .await
        .unwrap();
    assert_eq!(
        store
            .upkeep()
            .expire_clients(wall_ms(), HOUR)
            .await
            .unwrap(),
        0,
        "nothing is an hour old yet"
    );
    assert!(store.sessions().client_exists("gone").await.unwrap());
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        2
    );
    assert!(!store.sessions().client_exists("gone").await.unwrap());
    assert!(!store
        .sessions()
        .client_exists("never-connected")
        .await
        .unwrap());
    store.queues().create_queue("q").await.unwrap();
    assert_eq!(
        store.queues().send(msg_to(&["q"], "p", "gone", "x")).await,
        Err(StoreError::ClientNotFound("gone".into())),
        "a forgotten name cannot be addressed"
    );
    visit(&store, "gone", 2, Registration::Permanent).await;
    assert!(
        store.sessions().client_exists("gone").await.unwrap(),
        "registered again"
    );
    store
        .queues()
        .send(msg_to(&["q"], "p", "gone", "x"))
        .await
        .expect("addressed again");
}

/// Names named by stored messages (as sender or receiver) or owning a durable subscription
/// stay, whatever their age; once the messages are gone, they expire.
pub async fn names_that_hold_something_stay(store: Arc<dyn Store>) {
    setup(&store, &["sender", "receiver", "owner", "c"], &["q"]).await;
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "owner")
        .await
        .unwrap();
    store
        .queues()
        .send(msg_to(&["q"], "sender", "receiver", "x"))
        .await
        .unwrap();
    store
        .sessions()
        .claim_session("c", 9, Registration::Permanent)
        .await
        .unwrap();
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        0
    );
    for name in ["sender", "receiver", "owner", "c"] {
        assert!(
            store.sessions().client_exists(name).await.unwrap(),
            "{name} stays"
        );
    }
    // The receiver takes its message: sender and receiver hold nothing any more.
    assert_eq!(
        bodies(
            &store
                .queues()
                .receive(&take("q", "receiver"), 1)
                .await
                .unwrap()
        ),
        ["x"]
    );
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        2
    );
    assert!(!store.sessions().client_exists("sender").await.unwrap());
    assert!(!store.sessions().client_exists("receiver").await.unwrap());
    assert!(store.sessions().client_exists("owner").await.unwrap());
    assert!(
        store.sessions().client_exists("c").await.unwrap(),
        "online names stay"
    );
    store.topics().unsubscribe("t", "s").await.unwrap();
    store.sessions().end_session("c", 9).await.unwrap();
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        2
    );
    assert!(!store.sessions().client_exists("owner").await.unwrap());
}

/// A message in flight (leased) or waiting for its delivery time holds its names too.
pub async fn leased_and_delayed_messages_hold_their_names(store: Arc<dyn Store>) {
    setup(&store, &["a", "b", "c"], &["q"]).await;
    store
        .queues()
        .send(msg(&["q"], "a", "leased"))
        .await
        .unwrap();
    let delayed = NewMessage {
        deliver_at_ms: NOW + HOUR,
        ..msg_to(&["q"], "b", "c", "later")
    };
    store.queues().send(delayed).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), ["leased"]);
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        0
    );
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        1,
        "a"
    );
    assert!(store.sessions().client_exists("b").await.unwrap());
    assert!(store.sessions().client_exists("c").await.unwrap());
}

/// An ephemeral name is forgotten once its session ended and it holds nothing (by the end of
/// the session, or at the latest by the next expiry run, whatever the idle time); while it
/// holds a message it stays, and it can be addressed.
pub async fn ephemeral_names_go_with_their_session(store: Arc<dyn Store>) {
    store.queues().create_queue("q").await.unwrap();
    store
        .sessions()
        .claim_session("cli-1", 1, Registration::Ephemeral)
        .await
        .unwrap();
    assert!(store.sessions().client_exists("cli-1").await.unwrap());
    store
        .sessions()
        .claim_session("cli-2", 2, Registration::Ephemeral)
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["q"], "cli-2", "kept"))
        .await
        .unwrap();
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        0,
        "online ephemeral names stay"
    );
    store.sessions().end_session("cli-1", 1).await.unwrap();
    store.sessions().end_session("cli-2", 2).await.unwrap();
    store
        .upkeep()
        .expire_clients(wall_ms(), HOUR)
        .await
        .unwrap();
    assert!(
        !store.sessions().client_exists("cli-1").await.unwrap(),
        "gone at once"
    );
    assert!(
        store.sessions().client_exists("cli-2").await.unwrap(),
        "its message holds it"
    );
    store.queues().receive(&take("q", "c"), 1).await.unwrap();
    store
        .upkeep()
        .expire_clients(wall_ms(), HOUR)
        .await
        .unwrap();
    assert!(!store.sessions().client_exists("cli-2").await.unwrap());
}

/// Ephemeral and permanent registrations of one name: a permanent name stays permanent when
/// claimed ephemerally, an ephemeral one becomes permanent when claimed so.
pub async fn ephemeral_and_permanent_claims_of_one_name(store: Arc<dyn Store>) {
    visit(&store, "app", 1, Registration::Permanent).await;
    visit(&store, "app", 2, Registration::Ephemeral).await;
    store
        .upkeep()
        .expire_clients(wall_ms(), HOUR)
        .await
        .unwrap();
    assert!(
        store.sessions().client_exists("app").await.unwrap(),
        "still permanent"
    );
    store
        .sessions()
        .claim_session("tool", 3, Registration::Ephemeral)
        .await
        .unwrap();
    store
        .sessions()
        .claim_session("tool", 3, Registration::Permanent)
        .await
        .unwrap();
    store.sessions().end_session("tool", 3).await.unwrap();
    store
        .upkeep()
        .expire_clients(wall_ms(), HOUR)
        .await
        .unwrap();
    assert!(
        store.sessions().client_exists("tool").await.unwrap(),
        "made permanent"
    );
    assert_eq!(
        store.upkeep().expire_clients(later(), HOUR).await.unwrap(),
        2
    );
}
