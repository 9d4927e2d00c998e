//! Delayed delivery and time to live. Time is whatever the test says: each receive carries its
//! `now_ms`, so nothing here sleeps.

use std::sync::Arc;

use ferry_protocol::Source;

use super::selecting::selecting;
use super::*;

/// `spec` at time `now_ms`.
fn at(mut spec: ReceiveSpec, now_ms: u64) -> ReceiveSpec {
    spec.now_ms = now_ms;
    spec
}

fn delayed(queues: &[&str], body: &str, delay_ms: u64) -> NewMessage {
    NewMessage {
        deliver_at_ms: NOW + delay_ms,
        ..msg(queues, "p", body)
    }
}

fn expiring(queues: &[&str], body: &str, ttl_ms: u64) -> NewMessage {
    NewMessage {
        expires_at_ms: NOW + ttl_ms,
        ..msg(queues, "p", body)
    }
}

/// A delayed message is invisible to peeks and takes (by queue, by sender, with a selector)
/// before its delivery time and is delivered from then on, in its place by id; it counts in
/// the queue's depth all along.
pub async fn delayed_message_is_invisible_until_due(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store
        .queues()
        .send(delayed(&["q"], "later", 1_000))
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "p", "now")).await.unwrap();
    assert_eq!(
        depth(&store, "q").await,
        (2, 0),
        "a delayed message counts as ready"
    );
    let by_sender = ReceiveSpec {
        source: Source::Sender("p".into()),
        ..peek("q", "c")
    };
    for t in [NOW, NOW + 999] {
        let got = store
            .queues()
            .receive(&at(peek("q", "c"), t), 10)
            .await
            .unwrap();
        assert_eq!(bodies(&got), vec!["now"], "peek at +{}", t - NOW);
        let got = store
            .queues()
            .receive(&at(by_sender.clone(), t), 10)
            .await
            .unwrap();
        assert_eq!(bodies(&got), vec!["now"], "by sender at +{}", t - NOW);
        let got = store
            .queues()
            .receive(&at(selecting(peek("q", "c"), "priority = 5"), t), 10)
            .await
            .unwrap();
        assert_eq!(bodies(&got), vec!["now"], "selector at +{}", t - NOW);
    }
    let got = store
        .queues()
        .receive(&at(take("q", "c"), NOW + 999), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["now"]);
    let got = store
        .queues()
        .receive(&at(take("q", "c"), NOW + 999), 10)
        .await
        .unwrap();
    assert!(got.is_empty(), "nothing due yet, got {:?}", bodies(&got));
    assert_eq!(depth(&store, "q").await, (1, 0));
    let got = store
        .queues()
        .receive(&at(lease("q", "c"), NOW + 1_000), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["later"], "due at its delivery time");
    assert_eq!(got[0].message.delivery_count, 0);
    // Once due, it behaves like any message: a nack puts it back, visible at once.
    store
        .queues()
        .nack(SESSION, &[got[0].delivery_id], true)
        .await
        .unwrap();
    let got = store
        .queues()
        .receive(&at(take("q", "c"), NOW + 1_001), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["later"]);
    assert_eq!(got[0].message.delivery_count, 1);
}

/// Times at the end of the range (a hostile time to live or delay) mean "never", not a time
/// in the past: such a message is delivered and never expires; such a delay never ends.
pub async fn times_at_the_end_of_the_range_mean_never(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    let forever = NewMessage {
        expires_at_ms: u64::MAX,
        ..msg(&["q"], "p", "forever")
    };
    store.queues().send(forever).await.unwrap();
    let never = NewMessage {
        deliver_at_ms: u64::MAX,
        ..msg(&["q"], "p", "never")
    };
    store.queues().send(never).await.unwrap();
    let got = store
        .queues()
        .receive(&at(take("q", "c"), NOW + 1_000_000), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["forever"]);
}

/// `waiting_queues` names a queue for an addressed delayed message only once it is due.
pub async fn delayed_addressed_message_waits_only_once_due(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    let m = NewMessage {
        receiver: Some("c".into()),
        ..delayed(&["q"], "later", 1_000)
    };
    store.queues().send(m).await.unwrap();
    assert!(
        store
            .queues()
            .waiting_queues("c", NOW + 999)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    assert_eq!(
        store
            .queues()
            .waiting_queues("c", NOW + 1_000)
            .await
            .unwrap(),
        vec!["q"]
    );
}

/// `delayed_due` names the queues whose delayed messages became due in the span asked about
/// and the next delivery time after it.
pub async fn delayed_messages_due_name_their_queues(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["a", "b", "c"]).await;
    store
        .queues()
        .send(delayed(&["a"], "a1", 100))
        .await
        .unwrap();
    store
        .queues()
        .send(delayed(&["b", "c"], "bc", 200))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["c"], "p", "plain"))
        .await
        .unwrap();
    let (due, next) = store.upkeep().delayed_due(NOW, NOW + 99).await.unwrap();
    assert!(due.is_empty(), "nothing due before +100: {due:?}");
    assert_eq!(next, Some(NOW + 100));
    let (due, next) = store
        .upkeep()
        .delayed_due(NOW + 99, NOW + 150)
        .await
        .unwrap();
    assert_eq!(due, vec!["a".to_string()]);
    assert_eq!(next, Some(NOW + 200));
    let (due, next) = store
        .upkeep()
        .delayed_due(NOW + 150, NOW + 500)
        .await
        .unwrap();
    assert_eq!(due, vec!["b".to_string(), "c".to_string()]);
    assert_eq!(next, None);
    let got = store
        .queues()
        .receive(&at(take("c", "c"), NOW + 500), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["bc", "plain"], "in id order once due");
}

/// A message past its expiry time is never delivered: not to peeks, takes, by-sender or
/// selector receives; one not yet expired is, and carries its expiry time.
pub async fn expired_message_is_never_delivered(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store
        .queues()
        .send(expiring(&["q"], "short", 500))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["q"], "p", "forever"))
        .await
        .unwrap();
    let got = store
        .queues()
        .receive(&at(peek("q", "c"), NOW + 499), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["short", "forever"]);
    assert_eq!(got[0].message.expires_at, NOW + 500);
    assert_eq!(
        got[1].message.expires_at, 0,
        "no time to live: never expires"
    );
    let t = NOW + 500;
    let by_sender = ReceiveSpec {
        source: Source::Sender("p".into()),
        ..peek("q", "c")
    };
    for spec in [
        peek("q", "c"),
        by_sender,
        selecting(peek("q", "c"), "priority = 5"),
    ] {
        let got = store.queues().receive(&at(spec, t), 10).await.unwrap();
        assert_eq!(bodies(&got), vec!["forever"], "expired at its expiry time");
    }
    let got = store
        .queues()
        .receive(&at(lease("q", "c"), t), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["forever"]);
    store
        .queues()
        .ack(SESSION, &[got[0].delivery_id])
        .await
        .unwrap();
    let got = store
        .queues()
        .receive(&at(take("q", "c"), t), 10)
        .await
        .unwrap();
    assert!(got.is_empty(), "got {:?}", bodies(&got));
    // Later still, nothing comes back.
    let got = store
        .queues()
        .receive(&at(take("q", "c"), NOW + 10_000), 10)
        .await
        .unwrap();
    assert!(got.is_empty());
}

/// `purge_expired` removes expired ready messages from every queue they are on and leaves the
/// others (and those that expire later).
pub async fn expired_messages_are_purged(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["a", "b"]).await;
    store
        .queues()
        .send(expiring(&["a", "b"], "both", 100))
        .await
        .unwrap();
    store
        .queues()
        .send(expiring(&["a"], "later", 1_000))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["b"], "p", "plain"))
        .await
        .unwrap();
    assert_eq!(store.upkeep().purge_expired(NOW + 99).await.unwrap(), 0);
    assert_eq!(store.upkeep().purge_expired(NOW + 100).await.unwrap(), 2);
    assert_eq!(depth(&store, "a").await, (1, 0));
    assert_eq!(depth(&store, "b").await, (1, 0));
    let got = store
        .queues()
        .receive(&at(take("a", "c"), NOW + 100), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["later"]);
    let got = store
        .queues()
        .receive(&at(take("b", "c"), NOW + 100), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["plain"]);
}

/// A message taken with client ack before it expired and returned after is not delivered again.
pub async fn expired_leased_message_is_not_redelivered(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store
        .queues()
        .send(expiring(&["q"], "short", 500))
        .await
        .unwrap();
    let got = store
        .queues()
        .receive(&at(lease("q", "c"), NOW), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&got), vec!["short"]);
    // An expired message in flight is not purged: its lease decides.
    assert_eq!(store.upkeep().purge_expired(NOW + 600).await.unwrap(), 0);
    store
        .queues()
        .nack(SESSION, &[got[0].delivery_id], true)
        .await
        .unwrap();
    let got = store
        .queues()
        .receive(&at(lease("q", "c"), NOW + 600), 10)
        .await
        .unwrap();
    assert!(got.is_empty(), "got {:?}", bodies(&got));
    // Whether the receive already dropped it (embedded) or only passed over it (PostgreSQL),
    // the upkeep leaves nothing behind.
    store.upkeep().purge_expired(NOW + 600).await.unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
}
