//! Receiving: sources, eligibility, orders, peek and takes.

use std::sync::Arc;

use super::*;
use crate::error::StoreError;

/// `QueueNotFound` for an unknown queue, `ClientNotFound` for an unknown sender.
pub async fn unknown_source_errors(store: Arc<dyn Store>) {
    setup(&store, &["c"], &[]).await;
    assert_eq!(
        store.queues().receive(&take("nope", "c"), 1).await,
        Err(StoreError::QueueNotFound("nope".into()))
    );
    let mut spec = take("x", "c");
    spec.source = Source::Sender("ghost".into());
    assert_eq!(
        store.queues().receive(&spec, 1).await,
        Err(StoreError::ClientNotFound("ghost".into()))
    );
}

/// A client only sees messages addressed to itself or to nobody, in any mode and source.
pub async fn addressed_messages_invisible_to_others(store: Arc<dyn Store>) {
    setup(&store, &["p", "alice", "bob"], &["q"]).await;
    store
        .queues()
        .send(msg_to(&["q"], "p", "bob", "for bob"))
        .await
        .unwrap();
    assert!(store
        .queues()
        .receive(&peek("q", "alice"), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .queues()
        .receive(&take("q", "alice"), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .queues()
        .receive(&lease("q", "alice"), 10)
        .await
        .unwrap()
        .is_empty());
    let mut by_sender = take("q", "alice");
    by_sender.source = Source::Sender("p".into());
    assert!(store
        .queues()
        .receive(&by_sender, 10)
        .await
        .unwrap()
        .is_empty());
    store
        .queues()
        .send(msg(&["q"], "p", "for all"))
        .await
        .unwrap();
    let d = store
        .queues()
        .receive(&peek("q", "alice"), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["for all"]);
    let d = store.queues().receive(&take("q", "bob"), 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["for bob", "for all"]);
}

/// By-sender receives span every queue, only that sender's messages, in order.
pub async fn by_sender_across_queues(store: Arc<dyn Store>) {
    setup(&store, &["s1", "s2", "c"], &["q1", "q2"]).await;
    store.queues().send(msg(&["q1"], "s1", "a")).await.unwrap();
    store
        .queues()
        .send(msg(&["q2"], "s2", "other"))
        .await
        .unwrap();
    store
        .queues()
        .send(msg_prio(&["q2"], "s1", "b", 9))
        .await
        .unwrap();
    store.queues().send(msg(&["q1"], "s1", "c")).await.unwrap();
    let mut spec = take("unused", "c");
    spec.source = Source::Sender("s1".into());
    spec.mode = ReceiveMode::Peek;
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["a", "b", "c"]);
    assert_eq!(d[1].message.queue, "q2");
    spec.order = Order::Priority;
    spec.mode = ReceiveMode::Take;
    let d = store.queues().receive(&spec, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["b", "a"]);
    assert_eq!(depth(&store, "q1").await, (1, 0));
    assert_eq!(depth(&store, "q2").await, (1, 0));
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["c"]);
    assert!(store.queues().receive(&spec, 10).await.unwrap().is_empty());
    // Registered but silent senders are fine.
    spec.source = Source::Sender("c".into());
    assert!(store.queues().receive(&spec, 10).await.unwrap().is_empty());
}

/// Priority order: highest first, oldest first within; time order: oldest first.
pub async fn priority_and_time_order(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    for (body, prio) in [("l1", 1), ("h1", 10), ("m1", 5), ("h2", 10), ("l2", 1)] {
        store
            .queues()
            .send(msg_prio(&["q"], "p", body, prio))
            .await
            .unwrap();
    }
    let mut spec = peek("q", "c");
    spec.order = Order::Priority;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["h1", "h2", "m1", "l1", "l2"]);
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["l1", "h1", "m1", "h2", "l2"]);
    let mut t = take("q", "c");
    t.order = Order::Time;
    let d = store.queues().receive(&t, 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["l1"]);
    t.order = Order::Priority;
    let d = store.queues().receive(&t, 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["h1"]);
}

/// Equal priority keeps send order.
pub async fn same_priority_is_fifo(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    let sent: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    for b in &sent {
        store.queues().send(msg(&["q"], "p", b)).await.unwrap();
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let d = store.queues().receive(&take("q", "c"), 7).await.unwrap();
        assert!(!d.is_empty());
        got.extend(bodies(&d));
    }
    assert_eq!(got, sent);
}

/// A peek returns the message and leaves it; no delivery id, no lease.
pub async fn peek_leaves_message(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    for _ in 0..2 {
        let d = store.queues().receive(&peek("q", "c"), 5).await.unwrap();
        assert_eq!(bodies(&d), vec!["x"]);
        assert_eq!(d[0].delivery_id, 0);
    }
    let mut client_peek = peek("q", "c");
    client_peek.ack = AckMode::Client;
    assert_eq!(
        store.queues().receive(&client_peek, 1).await.unwrap()[0].delivery_id,
        0
    );
    assert_eq!(depth(&store, "q").await, (1, 0));
    assert_eq!(store.upkeep().next_lease_deadline().await.unwrap(), None);
}

/// An auto-ack take removes the message at once.
pub async fn auto_ack_take_removes(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    let d = store.queues().receive(&take("q", "c"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["x"]);
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert!(store
        .queues()
        .receive(&take("q", "c"), 1)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .queues()
        .receive(&peek("q", "c"), 1)
        .await
        .unwrap()
        .is_empty());
}

/// `max` bounds one receive; fewer come back when fewer are ready.
pub async fn receive_max_many(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    for i in 0..10 {
        store
            .queues()
            .send(msg(&["q"], "p", &format!("{i}")))
            .await
            .unwrap();
    }
    assert_eq!(
        store
            .queues()
            .receive(&peek("q", "c"), 4)
            .await
            .unwrap()
            .len(),
        4
    );
    let d = store.queues().receive(&lease("q", "c"), 6).await.unwrap();
    assert_eq!(bodies(&d), vec!["0", "1", "2", "3", "4", "5"]);
    let mut ids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 6, "delivery ids are distinct");
    assert!(ids.iter().all(|id| *id != 0));
    assert_eq!(depth(&store, "q").await, (4, 6));
    let d = store.queues().receive(&take("q", "c"), 100).await.unwrap();
    assert_eq!(bodies(&d), vec!["6", "7", "8", "9"]);
}

/// `waiting_queues` names the queues with ready messages addressed to the client, sorted.
pub async fn waiting_queues_lists_addressed(store: Arc<dyn Store>) {
    setup(&store, &["p", "bob", "carol"], &["q1", "q2", "q3"]).await;
    store
        .queues()
        .send(msg_to(&["q3"], "p", "bob", "x"))
        .await
        .unwrap();
    store
        .queues()
        .send(msg_to(&["q1"], "p", "bob", "y"))
        .await
        .unwrap();
    store
        .queues()
        .send(msg_to(&["q2"], "p", "carol", "z"))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["q2"], "p", "open"))
        .await
        .unwrap();
    assert_eq!(
        store.queues().waiting_queues("bob", NOW).await.unwrap(),
        vec!["q1", "q3"]
    );
    assert_eq!(
        store.queues().waiting_queues("carol", NOW).await.unwrap(),
        vec!["q2"]
    );
    assert!(store
        .queues()
        .waiting_queues("p", NOW)
        .await
        .unwrap()
        .is_empty());
    let d = store.queues().receive(&take("q1", "bob"), 1).await.unwrap();
    assert_eq!(bodies(&d), vec!["y"]);
    assert_eq!(
        store.queues().waiting_queues("bob", NOW).await.unwrap(),
        vec!["q3"]
    );
    let d = store
        .queues()
        .receive(&lease("q3", "bob"), 1)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["x"]);
    assert!(
        store
            .queues()
            .waiting_queues("bob", NOW)
            .await
            .unwrap()
            .is_empty(),
        "in flight is not waiting"
    );
    store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    assert_eq!(
        store.queues().waiting_queues("bob", NOW).await.unwrap(),
        vec!["q3"]
    );
}

/// A receive with a byte limit ([`ReceiveSpec::max_bytes`]) hands out the prefix whose bodies
/// fit it, in the receive's order, and leaves the rest where it was; a message whose body alone
/// is over the limit is still handed out, alone. The same for every kind of receive: peek,
/// auto-ack, held and client-ack takes, by sender and with a selector.
pub async fn byte_limit_takes_the_prefix_that_fits(store: Arc<dyn Store>) {
    /// A kind of receive, named by the queue it uses, from that queue.
    type Kind = (&'static str, fn(&str) -> ReceiveSpec);
    let kinds: [Kind; 6] = [
        ("peek", |q| peek(q, "c")),
        ("take", |q| take(q, "c")),
        ("held", |q| held(q, "c")),
        ("lease", |q| lease(q, "c")),
        ("by-sender", |q| {
            let mut spec = take(q, "c");
            spec.source = Source::Sender(format!("p-{q}"));
            spec
        }),
        ("selector", |q| {
            super::selecting::selecting(take(q, "c"), "JMSPriority >= 0")
        }),
    ];
    for (q, kind) in kinds {
        let sender = format!("p-{q}");
        setup(&store, &["c", &sender], &[q]).await;
        let limited = |max_bytes| ReceiveSpec {
            max_bytes: Some(max_bytes),
            ..kind(q)
        };
        // Four bodies of 4 bytes, then one of 20, then one of 4.
        for body in [
            "m1..",
            "m2..",
            "m3..",
            "m4..",
            "big-message-20-bytes",
            "m6..",
        ] {
            store.queues().send(msg(&[q], &sender, body)).await.unwrap();
        }
        let got = store.queues().receive(&limited(10), 100).await.unwrap();
        assert_eq!(
            bodies(&got),
            ["m1..", "m2.."],
            "{q}: 8 bytes fit 10, 12 would not"
        );
        let rest = ["m3..", "m4..", "big-message-20-bytes", "m6.."];
        let left = store.queues().receive(&peek(q, "c"), 100).await.unwrap();
        if q == "peek" {
            assert_eq!(bodies(&left)[2..], rest, "{q}: a peek leaves all");
            // Peeks have nothing to take: the rest of the checks are for takes.
            continue;
        }
        assert_eq!(bodies(&left), rest, "{q}: the rest stays queued, in order");
        let got = store.queues().receive(&limited(8), 100).await.unwrap();
        assert_eq!(
            bodies(&got),
            ["m3..", "m4.."],
            "{q}: a limit reached exactly"
        );
        let got = store.queues().receive(&limited(10), 100).await.unwrap();
        assert_eq!(
            bodies(&got),
            ["big-message-20-bytes"],
            "{q}: a body over the limit comes alone"
        );
        let got = store.queues().receive(&limited(10), 100).await.unwrap();
        assert_eq!(bodies(&got), ["m6.."], "{q}: and then the next");
        assert!(store
            .queues()
            .receive(&peek(q, "c"), 100)
            .await
            .unwrap()
            .is_empty());
    }
}
