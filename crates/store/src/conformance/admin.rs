//! The operator's role ([`crate::Admin`]) beyond browsing: queue figures and settings, purge,
//! deleting and moving messages (redrive), registered clients, the engine's counters, the
//! refusal to delete a queue another one uses, and readiness.

use std::sync::Arc;

use ferry_protocol::{PropertyValue, QueueOptions};

use super::browsing::browse_spec;
use super::*;
use crate::admin::{MessageCounters, MoveTarget};
use crate::api::{dead_letter, Registration};
use crate::error::StoreError;

fn with_dead_letters(max_deliveries: u32, dlq: Option<&str>, expiry: Option<&str>) -> QueueOptions {
    QueueOptions {
        max_deliveries,
        dead_letter_queue: dlq.map(str::to_owned),
        expiry_queue: expiry.map(str::to_owned),
    }
}

/// A message with a body and a creation time of its own.
fn at(queue: &str, body: &str, created_at: u64) -> NewMessage {
    NewMessage {
        created_at,
        ..msg(&[queue], "p", body)
    }
}

/// Dead-letters the head of `queue` (max deliveries 1) by one client-ack delivery and a nack
/// with requeue.
async fn dead_letter_head(store: &Arc<dyn Store>, queue: &str) {
    let d = store.queues().receive(&lease(queue, "c"), 1).await.unwrap();
    assert_eq!(d.len(), 1, "a message to dead-letter on {queue}");
    store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
}

/// Ready, delayed and in-flight counts, the bytes of the ready bodies, the oldest ready
/// message, the settings, and the messages that entered and left, for every queue (sorted by
/// name, subscription queues included).
pub async fn queue_details_count_every_state(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "b.dead"]).await;
    store
        .admin()
        .set_queue_options("q", &with_dead_letters(3, Some("b.dead"), None))
        .await
        .unwrap();
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store.queues().send(at("q", "a", NOW)).await.unwrap();
    store.queues().send(at("q", "bb", NOW + 1)).await.unwrap();
    store.queues().send(at("q", "ccc", NOW + 2)).await.unwrap();
    let mut later = at("q", "dddd", NOW + 3);
    later.deliver_at_ms = FAR_FUTURE;
    store.queues().send(later).await.unwrap();
    let all = store.admin().queue_details().await.unwrap();
    let names: Vec<&str> = all.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["b.dead", "q", "t:s"],
        "sorted, subscription queues included"
    );

    let q = details(&store, "q").await;
    assert_eq!((q.ready, q.delayed, q.in_flight), (3, 1, 0));
    assert_eq!(q.ready_bytes, Some(6), "bytes of the ready bodies");
    assert_eq!(q.oldest_created_at, Some(NOW));
    assert_eq!(q.options, with_dead_letters(3, Some("b.dead"), None));
    assert_eq!((q.entered_total, q.left_total), (Some(4), Some(0)));

    // A lease moves one from ready to in flight; an ack makes it leave.
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["a"]);
    let q = details(&store, "q").await;
    assert_eq!((q.ready, q.delayed, q.in_flight), (2, 1, 1));
    assert_eq!(q.ready_bytes, Some(5));
    assert_eq!(q.oldest_created_at, Some(NOW + 1), "the oldest ready one");
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    store.queues().receive(&take("q", "c"), 1).await.unwrap();
    let q = details(&store, "q").await;
    assert_eq!((q.ready, q.delayed, q.in_flight), (1, 1, 0));
    assert_eq!((q.entered_total, q.left_total), (Some(4), Some(2)));

    store
        .queues()
        .send(publish("t", "p", "news"))
        .await
        .unwrap();
    let s = details(&store, "t:s").await;
    assert_eq!((s.ready, s.ready_bytes), (1, Some(4)));
    let empty = details(&store, "b.dead").await;
    assert_eq!((empty.ready, empty.oldest_created_at), (0, None));
    assert_eq!(empty.ready_bytes, Some(0));
}

/// A settings change applies from then on: a delivery that comes back later counts against
/// the new maximum and goes to the new dead-letter queue; a subscription's queue can be
/// changed too; nothing else moves.
pub async fn queue_settings_change_applies_from_then_on(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "dead"]).await;
    store.queues().send(msg(&["q"], "p", "one")).await.unwrap();
    // Two deliveries under no limit.
    for _ in 0..2 {
        dead_letter_head(&store, "q").await;
    }
    assert_eq!(depth(&store, "q").await, (1, 0), "no limit yet");
    store
        .admin()
        .set_queue_options("q", &with_dead_letters(3, Some("dead"), None))
        .await
        .unwrap();
    assert_eq!(
        details(&store, "q").await.options,
        with_dead_letters(3, Some("dead"), None)
    );
    assert_eq!(depth(&store, "dead").await, (0, 0), "nothing moves at once");
    dead_letter_head(&store, "q").await;
    assert_eq!(
        depth(&store, "q").await,
        (0, 0),
        "the third delivery reached the new maximum"
    );
    assert_eq!(depth(&store, "dead").await, (1, 0));
    // Back to no limit.
    store
        .admin()
        .set_queue_options("q", &QueueOptions::default())
        .await
        .unwrap();
    assert_eq!(details(&store, "q").await.options, QueueOptions::default());
    // A subscription's queue.
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "c")
        .await
        .unwrap();
    store
        .admin()
        .set_queue_options("t:s", &with_dead_letters(1, Some("dead"), Some("dead")))
        .await
        .unwrap();
    assert_eq!(
        details(&store, "t:s").await.options,
        with_dead_letters(1, Some("dead"), Some("dead"))
    );
    store
        .queues()
        .send(publish("t", "p", "news"))
        .await
        .unwrap();
    dead_letter_head(&store, "t:s").await;
    assert_eq!(depth(&store, "dead").await, (2, 0));
}

/// A settings change is refused, changing nothing, for an unknown queue or target, a target
/// that is the queue itself, and a change closing a cycle of dead-letter or expiry queues.
pub async fn queue_settings_refuse_unknown_self_and_cycles(store: Arc<dyn Store>) {
    setup(&store, &[], &["a", "b", "c", "d"]).await;
    let set = |name: &'static str, options: QueueOptions| {
        let store = store.clone();
        async move { store.admin().set_queue_options(name, &options).await }
    };
    assert_eq!(
        set("nope", QueueOptions::default()).await,
        Err(StoreError::QueueNotFound("nope".into()))
    );
    assert_eq!(
        set("a", with_dead_letters(1, Some("gone"), None)).await,
        Err(StoreError::QueueNotFound("gone".into()))
    );
    assert_eq!(
        set("a", with_dead_letters(0, None, Some("gone"))).await,
        Err(StoreError::QueueNotFound("gone".into()))
    );
    for options in [
        with_dead_letters(1, Some("a"), None),
        with_dead_letters(0, None, Some("a")),
    ] {
        match set("a", options).await {
            Err(StoreError::InvalidArgument(m)) => assert!(m.contains("own"), "{m}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    set("a", with_dead_letters(1, Some("b"), None))
        .await
        .unwrap();
    set("b", with_dead_letters(0, None, Some("c")))
        .await
        .unwrap();
    match set("c", with_dead_letters(1, Some("a"), None)).await {
        Err(StoreError::InvalidArgument(m)) => {
            assert!(m.contains("cycle") && m.contains("'a'"), "{m}")
        }
        other => panic!("expected InvalidArgument for a cycle, got {other:?}"),
    }
    assert_eq!(details(&store, "c").await.options, QueueOptions::default());
    // A chain is fine: a -> b -> c -> d.
    set("c", with_dead_letters(1, Some("d"), None))
        .await
        .unwrap();
}

/// A purge removes the ready and delayed messages of one queue and says how many; in-flight
/// deliveries stay and settle as usual; a message also on another queue stays there.
pub async fn purge_removes_ready_and_delayed_only(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "other"]).await;
    for b in ["1", "2", "3"] {
        store.queues().send(msg(&["q"], "p", b)).await.unwrap();
    }
    store
        .queues()
        .send(msg(&["q", "other"], "p", "both"))
        .await
        .unwrap();
    let mut later = msg(&["q"], "p", "later");
    later.deliver_at_ms = FAR_FUTURE;
    store.queues().send(later).await.unwrap();
    let held = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(store.admin().purge_queue("q").await, Ok(4));
    let q = details(&store, "q").await;
    assert_eq!((q.ready, q.delayed, q.in_flight), (0, 0, 1));
    assert_eq!(depth(&store, "other").await, (1, 0));
    assert_eq!(
        bodies(
            &store
                .queues()
                .receive(&take("other", "c"), 5)
                .await
                .unwrap()
        ),
        vec!["both"]
    );
    store
        .queues()
        .ack(SESSION, &[held[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert_eq!(store.admin().purge_queue("q").await, Ok(0));
    assert_eq!(
        store.admin().purge_queue("nope").await,
        Err(StoreError::QueueNotFound("nope".into()))
    );
}

/// Deleting one message removes it from that queue only (ready or delayed); one in flight, or
/// not on the queue, is `MessageNotFound`.
pub async fn delete_message_removes_one_waiting_message(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "other"]).await;
    let first = store
        .queues()
        .send(msg(&["q"], "p", "first"))
        .await
        .unwrap();
    let both = store
        .queues()
        .send(msg(&["q", "other"], "p", "both"))
        .await
        .unwrap();
    let mut later = msg(&["q"], "p", "later");
    later.deliver_at_ms = FAR_FUTURE;
    let delayed = store.queues().send(later).await.unwrap();
    store.admin().delete_message("q", both).await.unwrap();
    store.admin().delete_message("q", delayed).await.unwrap();
    let q = details(&store, "q").await;
    assert_eq!((q.ready, q.delayed), (1, 0));
    assert_eq!(
        depth(&store, "other").await,
        (1, 0),
        "still on the other queue"
    );
    assert_eq!(
        store.admin().delete_message("q", both).await,
        Err(StoreError::MessageNotFound {
            queue: "q".into(),
            id: both
        })
    );
    let held = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    assert_eq!(held[0].message.id, first);
    assert_eq!(
        store.admin().delete_message("q", first).await,
        Err(StoreError::MessageNotFound {
            queue: "q".into(),
            id: first
        }),
        "an in-flight message is not deleted"
    );
    assert_eq!(
        store.admin().delete_message("nope", first).await,
        Err(StoreError::QueueNotFound("nope".into()))
    );
    store
        .queues()
        .ack(SESSION, &[held[0].delivery_id])
        .await
        .unwrap();
    assert_eq!(
        bodies(
            &store
                .queues()
                .receive(&take("other", "c"), 5)
                .await
                .unwrap()
        ),
        vec!["both"]
    );
}

/// A move takes the named messages (or the first `limit` in time order) to another queue with
/// their id, body and properties, delivery count restarted; messages not ready there are
/// skipped with a reason; an unknown queue is `QueueNotFound`.
pub async fn move_keeps_the_message_and_skips_what_is_not_ready(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["from", "to"]).await;
    let mut ids = Vec::new();
    for (i, b) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let mut m = msg_prio(&["from"], "p", b, 9 - i as u8);
        m.properties = sample_properties();
        ids.push(store.queues().send(m).await.unwrap());
    }
    // "a" was delivered once and came back: its count restarts on the new queue.
    dead_letter_head(&store, "from").await;
    let held = store
        .queues()
        .receive(&lease("from", "c"), 1)
        .await
        .unwrap();
    assert_eq!(held[0].message.id, ids[0]);
    let report = store
        .admin()
        .move_messages(
            "from",
            &MoveTarget::Queue("to".into()),
            Some(&[ids[0], ids[1]]),
            0,
        )
        .await
        .unwrap();
    assert_eq!(report.moved, vec![(ids[1], "to".to_string())]);
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].0, ids[0], "the in-flight one stays");
    store
        .queues()
        .nack(SESSION, &[held[0].delivery_id], true)
        .await
        .unwrap();
    let report = store
        .admin()
        .move_messages("from", &MoveTarget::Queue("to".into()), None, 2)
        .await
        .unwrap();
    let moved: Vec<u64> = report.moved.iter().map(|m| m.0).collect();
    assert_eq!(moved, vec![ids[0], ids[2]], "the first two in time order");
    assert_eq!(depth(&store, "from").await, (1, 0));
    assert_eq!(depth(&store, "to").await, (3, 0));
    let got = store.queues().receive(&take("to", "c"), 10).await.unwrap();
    assert_eq!(
        bodies(&got),
        vec!["a", "b", "c"],
        "priority order on the new queue"
    );
    for (d, want) in got.iter().zip([ids[0], ids[1], ids[2]]) {
        assert_eq!(d.message.id, want, "the id is kept");
        assert_eq!(d.message.queue.as_ref(), "to");
        assert_eq!(d.message.properties, sample_properties());
        assert_eq!(d.message.delivery_count, 0, "the count restarts");
    }
    for (from, to) in [("nope", "to"), ("from", "nope")] {
        assert_eq!(
            store
                .admin()
                .move_messages(from, &MoveTarget::Queue(to.into()), None, 10)
                .await
                .map(|_| ()),
            Err(StoreError::QueueNotFound("nope".into()))
        );
    }
    let report = store
        .admin()
        .move_messages("from", &MoveTarget::Queue("from".into()), None, 10)
        .await
        .unwrap();
    assert!(
        report.moved.is_empty() && report.skipped.len() == 1,
        "{report:?}"
    );
}

/// A redrive sends each dead letter (or expired message) back to the queue it came from, by id
/// or all at once, with its history; a message that is no dead letter, or whose queue is gone,
/// stays with a reason.
pub async fn redrive_returns_dead_letters_with_their_history(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["dead", "gone"]).await;
    for q in ["a", "b"] {
        store
            .queues()
            .create_queue_with(q, &with_dead_letters(1, Some("dead"), Some("dead")))
            .await
            .unwrap();
    }
    store
        .admin()
        .set_queue_options("gone", &with_dead_letters(1, Some("dead"), None))
        .await
        .unwrap();
    for q in ["a", "b", "gone"] {
        store.queues().send(msg(&[q], "p", q)).await.unwrap();
        dead_letter_head(&store, q).await;
    }
    let mut expiring = msg(&["a"], "p", "expired");
    expiring.expires_at_ms = NOW + 10;
    store.queues().send(expiring).await.unwrap();
    store.upkeep().purge_expired(NOW + 20).await.unwrap();
    store
        .queues()
        .send(msg(&["dead"], "p", "plain"))
        .await
        .unwrap();
    store.queues().delete_queue("gone", true).await.unwrap();
    assert_eq!(depth(&store, "dead").await, (5, 0));

    let page = store
        .admin()
        .browse(&browse_spec(Source::Queue("dead".into()), Order::Time))
        .await
        .unwrap();
    let dead: Vec<u64> = page.messages.iter().map(|m| m.message.id).collect();
    assert_eq!(dead.len(), 5);
    let report = store
        .admin()
        .move_messages("dead", &MoveTarget::Origin, Some(&dead[1..2]), 0)
        .await
        .unwrap();
    assert_eq!(report.moved, vec![(dead[1], "b".to_string())]);
    let report = store
        .admin()
        .move_messages("dead", &MoveTarget::Origin, None, 100)
        .await
        .unwrap();
    assert_eq!(
        report.moved,
        vec![(dead[0], "a".to_string()), (dead[3], "a".to_string())]
    );
    let skipped: Vec<u64> = report.skipped.iter().map(|s| s.0).collect();
    assert_eq!(skipped, vec![dead[2], dead[4]]);
    assert!(report.skipped[0].1.contains("'gone'"), "{report:?}");
    assert!(
        report.skipped[1].1.contains("ferry_original_queue"),
        "{report:?}"
    );
    assert_eq!(depth(&store, "dead").await, (2, 0));
    let back = store.queues().receive(&take("a", "c"), 10).await.unwrap();
    assert_eq!(bodies(&back), vec!["a", "expired"]);
    assert_eq!(back[0].message.id, dead[0], "the dead letter's id");
    let reasons: Vec<Option<&PropertyValue>> = back
        .iter()
        .map(|d| {
            d.message
                .properties
                .iter()
                .find(|(n, _)| n == dead_letter::REASON)
                .map(|(_, v)| v)
        })
        .collect();
    assert_eq!(
        reasons,
        vec![
            Some(&PropertyValue::Str(dead_letter::MAX_DELIVERIES.into())),
            Some(&PropertyValue::Str(dead_letter::EXPIRED.into()))
        ],
        "the history comes back with it"
    );
    assert_eq!(depth(&store, "b").await, (1, 0));
}

/// Every registered client, sorted, online ones with a node; one offline again has none.
pub async fn clients_are_listed_with_their_node(store: Arc<dyn Store>) {
    setup(&store, &["zoe", "al"], &[]).await;
    store
        .sessions()
        .claim_session("mia", 7, Registration::Permanent)
        .await
        .unwrap();
    let list = store.admin().list_clients().await.unwrap();
    let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["al", "mia", "zoe"]);
    let online: Vec<bool> = list.iter().map(|c| c.node.is_some()).collect();
    assert_eq!(online, vec![false, true, false]);
    store.sessions().end_session("mia", 7).await.unwrap();
    assert!(store
        .admin()
        .list_clients()
        .await
        .unwrap()
        .iter()
        .all(|c| c.node.is_none()));
}

/// A queue that another names as its dead-letter or expiry queue is not deleted (the error
/// names the user) unless forced; then what would go there is dropped and counted. Dead
/// letters and expiries are counted too.
pub async fn queue_in_use_and_counted_dead_letters(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["dead", "exp"]).await;
    store
        .queues()
        .create_queue_with("q", &with_dead_letters(1, Some("dead"), Some("exp")))
        .await
        .unwrap();
    assert_eq!(
        store.queues().delete_queue("dead", false).await,
        Err(StoreError::QueueInUse {
            name: "dead".into(),
            role: "dead-letter",
            used_by: "q".into()
        })
    );
    assert_eq!(
        store.queues().delete_queue("exp", false).await,
        Err(StoreError::QueueInUse {
            name: "exp".into(),
            role: "expiry",
            used_by: "q".into()
        })
    );
    let before = store.admin().engine_stats().counters;
    assert_eq!(
        before,
        MessageCounters::default(),
        "a fresh store counted nothing"
    );
    store
        .queues()
        .send(msg(&["q"], "p", "poison"))
        .await
        .unwrap();
    dead_letter_head(&store, "q").await;
    let mut expiring = msg(&["q"], "p", "old");
    expiring.expires_at_ms = NOW + 10;
    store.queues().send(expiring).await.unwrap();
    store.upkeep().purge_expired(NOW + 20).await.unwrap();
    assert_eq!(
        store.admin().engine_stats().counters,
        MessageCounters {
            dead_lettered_max_deliveries: 1,
            dead_lettered_expired: 1,
            expired: 1,
            dropped_target_missing: 0,
        }
    );
    store.queues().delete_queue("dead", true).await.unwrap();
    store.queues().delete_queue("exp", true).await.unwrap();
    store
        .queues()
        .send(msg(&["q"], "p", "poison 2"))
        .await
        .unwrap();
    dead_letter_head(&store, "q").await;
    let mut expiring = msg(&["q"], "p", "old 2");
    expiring.expires_at_ms = NOW + 10;
    store.queues().send(expiring).await.unwrap();
    store.upkeep().purge_expired(NOW + 20).await.unwrap();
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert_eq!(
        store.admin().engine_stats().counters,
        MessageCounters {
            dead_lettered_max_deliveries: 1,
            dead_lettered_expired: 1,
            expired: 2,
            dropped_target_missing: 2,
        }
    );
}

/// A store that takes writes is ready, and names its engine.
pub async fn a_working_store_is_ready(store: Arc<dyn Store>) {
    store.admin().check_ready().await.unwrap();
    let stats = store.admin().engine_stats();
    assert!(
        ["embedded", "postgres"].contains(&stats.engine),
        "{stats:?}"
    );
    assert!(!stats.refusing_writes);
}

/// An offline registration is forgotten on request; one online, one that messages still name,
/// or one owning a durable subscription is not, and an unknown one is `ClientNotFound`.
pub async fn forgetting_a_client_needs_it_offline_and_holding_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p", "idle", "d"], &["q"]).await;
    store
        .sessions()
        .claim_session("live", 3, Registration::Permanent)
        .await
        .unwrap();
    store.queues().send(msg(&["q"], "p", "held")).await.unwrap();
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "s", &durable(""), "d")
        .await
        .unwrap();
    assert_eq!(
        store.admin().forget_client("nobody").await,
        Err(StoreError::ClientNotFound("nobody".into()))
    );
    assert_eq!(
        store.admin().forget_client("live").await,
        Err(StoreError::AlreadyOnline("live".into()))
    );
    for name in ["p", "d"] {
        match store.admin().forget_client(name).await {
            Err(StoreError::InvalidArgument(m)) => assert!(m.contains(name), "{m}"),
            other => panic!("forgetting {name}: expected InvalidArgument, got {other:?}"),
        }
    }
    store.admin().forget_client("idle").await.unwrap();
    assert!(!store.sessions().client_exists("idle").await.unwrap());
    let names: Vec<String> = store
        .admin()
        .list_clients()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert!(!names.contains(&"idle".to_string()), "{names:?}");
    // Once its message is gone, the sender can go too; a session registers it again.
    store.queues().receive(&take("q", "d"), 1).await.unwrap();
    store.admin().forget_client("p").await.unwrap();
    assert!(!store.sessions().client_exists("p").await.unwrap());
    store
        .sessions()
        .claim_session("p", 4, Registration::Permanent)
        .await
        .unwrap();
    assert!(store.sessions().client_exists("p").await.unwrap());
}
