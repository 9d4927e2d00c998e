//! Receiving with a selector: only the messages it is TRUE for, in the receive's order; the
//! others are passed over and stay where they are, for plain receives and other selectors.

use std::sync::Arc;

use ferry_selector::Selector;

use super::*;

/// `spec` restricted by `selector`.
pub fn selecting(mut spec: ReceiveSpec, selector: &str) -> ReceiveSpec {
    spec.selector = Some(Arc::new(Selector::parse(selector).unwrap()));
    spec
}

/// A message with one string property `region` and an int property `n`.
fn regional(queues: &[&str], sender: &str, body: &str, region: &str, n: i64) -> NewMessage {
    NewMessage {
        properties: vec![
            ("region".into(), PropertyValue::Str(region.into())),
            ("n".into(), PropertyValue::Int(n)),
        ]
        .into(),
        ..msg(queues, sender, body)
    }
}

/// Sends eu/us messages to `q`: bodies e1..e3 (eu) and u1..u3 (us), interleaved, with mixed
/// priorities.
async fn send_mixed(store: &Arc<dyn Store>) {
    for (body, region, prio) in [
        ("u1", "us", 5),
        ("e1", "eu", 3),
        ("u2", "us", 9),
        ("e2", "eu", 8),
        ("e3", "eu", 3),
        ("u3", "us", 1),
    ] {
        let mut m = regional(&["q"], "p", body, region, 0);
        m.priority = prio;
        store.queues().send(m).await.unwrap();
    }
}

/// A take with a selector gets only the matching messages, in priority or time order, up to
/// `max`; an auto-ack take removes just those.
pub async fn selector_takes_only_matching_in_order(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    send_mixed(&store).await;
    let mut spec = selecting(peek("q", "c"), "region = 'eu'");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["e1", "e2", "e3"]);
    spec.order = Order::Priority;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["e2", "e1", "e3"]);
    let eu = selecting(take("q", "c"), "region = 'eu'");
    let d = store.queues().receive(&eu, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["e2", "e1"]);
    assert_eq!(
        d[0].message.properties[0].1,
        PropertyValue::Str("eu".into())
    );
    assert_eq!(depth(&store, "q").await, (4, 0));
    let d = store.queues().receive(&eu, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["e3"]);
    assert!(store.queues().receive(&eu, 2).await.unwrap().is_empty());
    // A selector nothing matches, and one that is UNKNOWN for every message, get nothing.
    let none = selecting(take("q", "c"), "region = 'asia'");
    assert!(store.queues().receive(&none, 10).await.unwrap().is_empty());
    let unknown = selecting(take("q", "c"), "missing > 1");
    assert!(store
        .queues()
        .receive(&unknown, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(depth(&store, "q").await, (3, 0));
}

/// Messages a selector passes over stay ready in their places: a plain receive, or a receive
/// with another selector, still gets them in order; a client-ack take with a selector leases
/// only what matched.
pub async fn non_matching_messages_stay_for_others(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    send_mixed(&store).await;
    let d = store
        .queues()
        .receive(&selecting(lease("q", "c"), "region <> 'us'"), 10)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["e2", "e1", "e3"]);
    assert!(d.iter().all(|d| d.delivery_id != 0));
    assert_eq!(depth(&store, "q").await, (3, 3));
    let mut time = peek("q", "c");
    time.order = Order::Time;
    assert_eq!(
        bodies(&store.queues().receive(&time, 10).await.unwrap()),
        vec!["u1", "u2", "u3"]
    );
    // Back in their old places when nacked.
    let ids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
    store.queues().nack(SESSION, &ids, true).await.unwrap();
    assert_eq!(
        bodies(&store.queues().receive(&time, 10).await.unwrap()),
        vec!["u1", "e1", "u2", "e2", "e3", "u3"]
    );
    let d = store
        .queues()
        .receive(&selecting(take("q", "c"), "region = 'us'"), 1)
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["u2"]);
    let d = store.queues().receive(&take("q", "c"), 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["e2", "u1", "e1", "e3", "u3"]);
}

/// A selector passes over many non-matching messages (more than an engine reads or examines
/// in one step) to find matches far down the queue, in one receive.
pub async fn selector_finds_matches_far_down_the_queue(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    let mut batch: Vec<NewMessage> = (0..5000)
        .map(|i| regional(&["q"], "p", &format!("us{i}"), "us", i))
        .collect();
    batch.insert(250, regional(&["q"], "p", "eu-a", "eu", 10_000));
    batch.push(regional(&["q"], "p", "eu-b", "eu", 10_001));
    for chunk in batch.chunks(1000) {
        for r in store.queues().send_batch(chunk.to_vec()).await {
            r.unwrap();
        }
    }
    let mut spec = selecting(lease("q", "c"), "region = 'eu' AND n >= 10000");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 5).await.unwrap();
    assert_eq!(bodies(&d), vec!["eu-a", "eu-b"]);
    assert_eq!(depth(&store, "q").await, (5000, 2));
    let d = store
        .queues()
        .receive(
            &selecting(take("q", "c"), "n = 4999 OR n = 3 OR n = 4500"),
            5,
        )
        .await
        .unwrap();
    assert_eq!(bodies(&d), vec!["us3", "us4500", "us4999"]);
    assert_eq!(depth(&store, "q").await, (4997, 2));
    let d = store
        .queues()
        .receive(&selecting(peek("q", "c"), "n > 4990"), 100)
        .await
        .unwrap();
    assert_eq!(bodies(&d).len(), 8);
}

/// Header fields: priority, sender, receiver, context, created_at.
pub async fn selector_on_headers(store: Arc<dyn Store>) {
    setup(&store, &["s1", "s2", "bob"], &["q"]).await;
    store
        .queues()
        .send(msg_prio(&["q"], "s1", "low", 2))
        .await
        .unwrap();
    store
        .queues()
        .send(msg_prio(&["q"], "s2", "high", 9))
        .await
        .unwrap();
    store
        .queues()
        .send(msg_to(&["q"], "s1", "bob", "for bob"))
        .await
        .unwrap();
    store
        .queues()
        .send(NewMessage {
            context: 17,
            created_at: 1_800_000_000_000,
            ..msg(&["q"], "s2", "late")
        })
        .await
        .unwrap();
    let seen = |selector: &'static str| {
        let mut spec = selecting(peek("q", "bob"), selector);
        spec.order = Order::Time;
        let store = store.clone();
        async move { bodies(&store.queues().receive(&spec, 10).await.unwrap()) }
    };
    assert_eq!(seen("priority >= 8").await, vec!["high"]);
    assert_eq!(seen("JMSPriority < 5").await, vec!["low"]);
    assert_eq!(seen("sender = 's2'").await, vec!["high", "late"]);
    assert_eq!(
        seen("sender LIKE 's_' AND priority = 5").await,
        vec!["for bob", "late"]
    );
    assert_eq!(seen("receiver = 'bob'").await, vec!["for bob"]);
    assert_eq!(seen("receiver IS NULL").await, vec!["low", "high", "late"]);
    assert_eq!(seen("context = 17").await, vec!["late"]);
    assert_eq!(seen("created_at > 1700000000000").await, vec!["late"]);
    assert_eq!(
        seen("JMSTimestamp = 1700000000000 AND context = 0").await,
        vec!["low", "high", "for bob"]
    );
    // A selector never makes a message addressed to someone else visible.
    let spec = selecting(peek("q", "s1"), "receiver = 'bob'");
    assert!(store.queues().receive(&spec, 10).await.unwrap().is_empty());
}

/// By-sender receives with a selector: that sender's matching messages across queues, in order.
pub async fn by_sender_with_selector(store: Arc<dyn Store>) {
    setup(&store, &["s1", "s2", "c"], &["q1", "q2"]).await;
    store
        .queues()
        .send(regional(&["q1"], "s1", "a", "eu", 1))
        .await
        .unwrap();
    store
        .queues()
        .send(regional(&["q2"], "s2", "other", "eu", 2))
        .await
        .unwrap();
    store
        .queues()
        .send(regional(&["q2"], "s1", "b", "us", 3))
        .await
        .unwrap();
    let mut m = regional(&["q2"], "s1", "c", "eu", 4);
    m.priority = 9;
    store.queues().send(m).await.unwrap();
    store
        .queues()
        .send(regional(&["q1", "q2"], "s1", "d", "eu", 5))
        .await
        .unwrap();
    let mut spec = selecting(take("unused", "c"), "region = 'eu'");
    spec.source = Source::Sender("s1".into());
    spec.mode = ReceiveMode::Peek;
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["a", "c", "d", "d"]);
    assert_eq!(d[1].message.queue, "q2");
    spec.order = Order::Priority;
    spec.mode = ReceiveMode::Take;
    let d = store.queues().receive(&spec, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["c", "a"]);
    let d = store.queues().receive(&spec, 10).await.unwrap();
    assert_eq!(bodies(&d), vec!["d", "d"]);
    assert!(store.queues().receive(&spec, 10).await.unwrap().is_empty());
    // The sender's non-matching message and the other sender's message stay.
    assert_eq!(depth(&store, "q1").await, (0, 0));
    assert_eq!(depth(&store, "q2").await, (2, 0));
    spec.selector = None;
    assert_eq!(
        bodies(&store.queues().receive(&spec, 10).await.unwrap()),
        vec!["b"]
    );
}

/// A peek with a selector returns the matching messages and changes nothing.
pub async fn peek_with_selector(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    for i in 0..6 {
        let region = if i % 2 == 0 { "eu" } else { "us" };
        store
            .queues()
            .send(regional(&["q"], "p", &format!("m{i}"), region, i))
            .await
            .unwrap();
    }
    let spec = selecting(peek("q", "c"), "region = 'us' AND n > 1");
    for _ in 0..2 {
        let d = store.queues().receive(&spec, 10).await.unwrap();
        assert_eq!(bodies(&d), vec!["m3", "m5"]);
        assert!(d.iter().all(|d| d.delivery_id == 0));
    }
    assert_eq!(
        bodies(&store.queues().receive(&spec, 1).await.unwrap()),
        vec!["m3"]
    );
    assert_eq!(depth(&store, "q").await, (6, 0));
    assert_eq!(store.upkeep().next_lease_deadline().await.unwrap(), None);
    // Type mismatches are FALSE, so NOT of one selects.
    let spec = selecting(peek("q", "c"), "NOT region = 1 AND n < 2");
    assert_eq!(
        bodies(&store.queues().receive(&spec, 10).await.unwrap()),
        vec!["m0", "m1"]
    );
}
