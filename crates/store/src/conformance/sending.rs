//! Sending: all or nothing, unknown receivers, batches, ids and fields.

use std::sync::Arc;

use super::*;
use crate::error::StoreError;

/// A send to three queues, one missing, fails naming it and changes nothing.
pub async fn send_to_missing_queue_changes_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["a", "c"]).await;
    assert_eq!(
        store.queues().send(msg(&["a", "b", "c"], "p", "x")).await,
        Err(StoreError::QueueNotFound("b".into()))
    );
    assert_eq!(depth(&store, "a").await, (0, 0));
    assert_eq!(depth(&store, "c").await, (0, 0));
    assert!(store
        .queues()
        .receive(&take("a", "c"), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .queues()
        .receive(&take("c", "c"), 10)
        .await
        .unwrap()
        .is_empty());
}

/// A send to an unknown receiver fails with `ClientNotFound` and changes nothing.
pub async fn unknown_receiver_changes_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p"], &["q"]).await;
    assert_eq!(
        store.queues().send(msg_to(&["q"], "p", "ghost", "x")).await,
        Err(StoreError::ClientNotFound("ghost".into()))
    );
    assert_eq!(depth(&store, "q").await, (0, 0));
    assert!(store
        .queues()
        .waiting_queues("ghost", NOW)
        .await
        .unwrap()
        .is_empty());
}

/// Ids increase in send order; every field comes back as sent.
pub async fn ids_increase_and_fields_roundtrip(store: Arc<dyn Store>) {
    setup(&store, &["p", "r"], &["q"]).await;
    let mut m = msg_to(&["q"], "p", "r", "payload");
    m.priority = 9;
    m.context = 77;
    m.properties = sample_properties();
    m.created_at = 1_234_567;
    let first = store.queues().send(m.clone()).await.unwrap();
    let second = store
        .queues()
        .send(msg(&["q"], "p", "later"))
        .await
        .unwrap();
    assert!(second > first, "ids increase: {first} then {second}");
    let d = store.queues().receive(&take("q", "r"), 1).await.unwrap();
    let got = &d[0].message;
    assert_eq!(got.id, first);
    assert_eq!(got.queue, "q");
    assert_eq!(got.sender, "p");
    assert_eq!(got.receiver.as_deref(), Some("r"));
    assert_eq!(got.priority, 9);
    assert_eq!(got.context, 77);
    assert_eq!(got.properties, sample_properties());
    assert_eq!(&got.body[..], b"payload");
    assert_eq!(got.created_at, 1_234_567);
    assert_eq!(got.delivery_count, 0);
    assert!(!got.redelivered());
    assert_eq!(d[0].delivery_id, 0, "auto-ack takes carry no delivery id");
}

/// Each item of a batch succeeds or fails on its own.
pub async fn send_batch_mixed_success(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    let results = store
        .queues()
        .send_batch(vec![
            msg(&["q"], "p", "one"),
            msg(&["nope"], "p", "two"),
            msg_to(&["q"], "p", "ghost", "three"),
            msg(&["q"], "p", "four"),
        ])
        .await;
    assert_eq!(results.len(), 4);
    assert!(results[0].is_ok());
    assert_eq!(results[1], Err(StoreError::QueueNotFound("nope".into())));
    assert_eq!(results[2], Err(StoreError::ClientNotFound("ghost".into())));
    let (a, b) = (results[0].clone().unwrap(), results[3].clone().unwrap());
    assert!(b > a);
    let d = store.queues().receive(&take("q", "c"), 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["one", "four"]);
    assert!(store.queues().send_batch(Vec::new()).await.is_empty());
}

/// A batch whose messages come from several senders, one of them never registered, records
/// each message with its own sender (by-sender receives find exactly theirs).
pub async fn send_batch_keeps_each_sender(store: Arc<dyn Store>) {
    setup(&store, &["p", "r", "c"], &["q"]).await;
    // A session's messages share one allocation of its name, as the broker sends them.
    let (p, r): (Arc<str>, Arc<str>) = ("p".into(), "r".into());
    let from = |sender: &Arc<str>, body: &str| NewMessage {
        sender: sender.clone(),
        ..msg(&["q"], "unused", body)
    };
    let results = store
        .queues()
        .send_batch(vec![
            msg(&["q"], "p", "p1"),
            msg(&["q"], "p", "p2"),
            msg(&["q"], "r", "r1"),
            msg(&["q"], "newcomer", "n1"),
            msg(&["q"], "p", "p3"),
            msg(&["q"], "newcomer", "n2"),
            from(&p, "p4"),
            from(&p, "p5"),
            from(&r, "r2"),
            from(&p, "p6"),
        ])
        .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let d = store.queues().receive(&take("q", "c"), 10).await.unwrap();
    let senders: Vec<&str> = d.iter().map(|d| d.message.sender.as_str()).collect();
    assert_eq!(
        senders,
        ["p", "p", "r", "newcomer", "p", "newcomer", "p", "p", "r", "p"]
    );
    for (sender, want) in [("p", 3), ("r", 1), ("newcomer", 2)] {
        store
            .queues()
            .send(msg(&["q"], sender, "again"))
            .await
            .unwrap();
        let mut spec = take("q", "c");
        spec.source = Source::Sender(sender.into());
        let d = store.queues().receive(&spec, 10).await.unwrap();
        assert_eq!(d.len(), 1, "{sender}: {want} taken before, one sent since");
        assert_eq!(d[0].message.sender, sender);
    }
}

/// A message on several queues is taken from each independently.
pub async fn message_on_several_queues(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["a", "b", "z"]).await;
    let id = store
        .queues()
        .send(msg(&["a", "b", "z"], "p", "m"))
        .await
        .unwrap();
    for q in ["a", "b", "z"] {
        assert_eq!(depth(&store, q).await, (1, 0));
    }
    let d = store.queues().receive(&take("b", "c"), 1).await.unwrap();
    assert_eq!((d[0].message.id, d[0].message.queue.as_str()), (id, "b"));
    assert_eq!(depth(&store, "b").await, (0, 0));
    assert_eq!(depth(&store, "a").await, (1, 0));
    let d = store.queues().receive(&lease("a", "c"), 1).await.unwrap();
    store
        .queues()
        .ack(SESSION, &[d[0].delivery_id])
        .await
        .unwrap();
    let d = store.queues().receive(&take("z", "c"), 1).await.unwrap();
    assert_eq!(d[0].message.id, id);
    assert_eq!(d[0].message.queue, "z");
}
