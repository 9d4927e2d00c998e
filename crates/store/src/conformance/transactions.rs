//! Transactions: `commit` stores every message (sends and publishes, in order) and settles
//! every acked delivery of the session, all or nothing.

use std::sync::Arc;

use ferry_protocol::{DeliveryId, MessageId, QueueInfo, TopicInfo};

use super::*;
use crate::error::StoreError;

/// What a failed commit must leave as it was: every queue and subscription with its depth and
/// its ready messages (ids and bodies, in time order).
#[derive(Debug, PartialEq)]
struct Snapshot {
    queues: Vec<QueueInfo>,
    topics: Vec<TopicInfo>,
    ready: Vec<(String, Vec<(MessageId, String)>)>,
}

async fn snapshot(store: &Arc<dyn Store>) -> Snapshot {
    let queues = store.queues().list_queues().await.unwrap();
    let topics = store.topics().list_topics().await.unwrap();
    let mut names: Vec<String> = queues.iter().map(|q| q.name.clone()).collect();
    for t in &topics {
        for s in &t.subscriptions {
            names.push(ferry_protocol::subscription_queue(&t.name, &s.name));
        }
    }
    let mut ready = Vec::new();
    for name in names {
        let mut spec = peek(&name, "c");
        spec.order = Order::Time;
        let got = store.queues().receive(&spec, 1000).await.unwrap();
        let msgs = got
            .iter()
            .map(|d| {
                (
                    d.message.id,
                    String::from_utf8_lossy(&d.message.body).into_owned(),
                )
            })
            .collect();
        ready.push((name, msgs));
    }
    Snapshot {
        queues,
        topics,
        ready,
    }
}

/// The state every test starts from: queues `q1`, `q2`; topic `t` with subscriptions `all` and
/// `x` (`kind = 'x'`); on `q1` two messages leased by [`SESSION`], on `q2` one leased by
/// another session, on `t:all` one leased by [`SESSION`]. Returns those delivery ids:
/// (`q1` first, `q1` second, other session's, `t:all`'s).
async fn prepared(store: &Arc<dyn Store>) -> (DeliveryId, DeliveryId, DeliveryId, DeliveryId) {
    setup(store, &["p", "c"], &["q1", "q2"]).await;
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "all", &durable(""), "c")
        .await
        .unwrap();
    store
        .topics()
        .subscribe_topic("t", "x", &durable("kind = 'x'"), "c")
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["q1"], "p", "held-1"))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["q1"], "p", "held-2"))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["q2"], "p", "elsewhere"))
        .await
        .unwrap();
    store
        .queues()
        .send(publish("t", "p", "sub-held"))
        .await
        .unwrap();
    let mut spec = lease("q1", "c");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 2).await.unwrap();
    assert_eq!(bodies(&d), vec!["held-1", "held-2"]);
    let mut other = lease("q2", "c");
    other.session = SESSION + 1;
    let o = store.queues().receive(&other, 1).await.unwrap();
    let s = store
        .queues()
        .receive(&lease("t:all", "c"), 1)
        .await
        .unwrap();
    assert_eq!(bodies(&s), vec!["sub-held"]);
    (
        d[0].delivery_id,
        d[1].delivery_id,
        o[0].delivery_id,
        s[0].delivery_id,
    )
}

/// A published message of `kind`.
fn kind(body: &str, kind: &str) -> NewMessage {
    NewMessage {
        properties: vec![("kind".into(), PropertyValue::Str(kind.into()))].into(),
        ..publish("t", "p", body)
    }
}

/// Bodies and ids of the ready messages of `queue`, in time order.
async fn ready(store: &Arc<dyn Store>, queue: &str) -> (Vec<String>, Vec<MessageId>) {
    let mut spec = peek(queue, "c");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, 1000).await.unwrap();
    (bodies(&d), d.iter().map(|d| d.message.id).collect())
}

/// A commit stores its sends and publishes (selectors applied) and settles its acks; the ids
/// come back in the order of the messages, above every earlier id.
pub async fn commit_applies_sends_publishes_and_acks(store: Arc<dyn Store>) {
    let (held1, held2, other, sub_held) = prepared(&store).await;
    let before = store
        .queues()
        .send(msg(&["q2"], "p", "before"))
        .await
        .unwrap();
    let ids = store
        .transactions()
        .commit(
            SESSION,
            vec![
                msg(&["q2"], "p", "s1"),
                kind("p1", "x"),
                msg(&["q1", "q2"], "p", "s2"),
                kind("p2", "y"),
            ],
            &[held1, sub_held],
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 4, "one id per message: {ids:?}");
    assert!(
        ids[0] > before && ids.windows(2).all(|w| w[0] < w[1]),
        "ids increase in message order, after {before}: {ids:?}"
    );
    assert_eq!(
        depth(&store, "q1").await,
        (1, 1),
        "s2 ready, held-2 in flight"
    );
    assert_eq!(ready(&store, "q1").await, (vec!["s2".into()], vec![ids[2]]));
    assert_eq!(
        ready(&store, "q2").await,
        (
            vec!["before".into(), "s1".into(), "s2".into()],
            vec![before, ids[0], ids[2]]
        )
    );
    assert_eq!(
        ready(&store, "t:all").await,
        (vec!["p1".into(), "p2".into()], vec![ids[1], ids[3]])
    );
    assert_eq!(
        ready(&store, "t:x").await,
        (vec!["p1".into()], vec![ids[1]]),
        "the subscription's selector applies to a publish in a commit"
    );
    assert_eq!(
        sub_depth(&store, "t", "all").await,
        (2, 0),
        "sub-held acked"
    );
    assert_eq!(
        store.queues().ack(SESSION, &[held1, sub_held]).await,
        Err(StoreError::DeliveriesNotFound(vec![held1, sub_held])),
        "the commit's acks settled those deliveries"
    );
    store
        .queues()
        .ack(SESSION, &[held2])
        .await
        .expect("a delivery the commit did not ack is still held");
    store.queues().ack(SESSION + 1, &[other]).await.unwrap();
}

/// Checks that `commit(SESSION, msgs, acks)` fails with `expected` and changes nothing: the
/// same queues, subscriptions, depths and ready messages, the acked deliveries still held (the
/// test acks them at the end to prove it).
async fn fails_and_changes_nothing(
    store: &Arc<dyn Store>,
    msgs: Vec<NewMessage>,
    acks: &[DeliveryId],
    expected: StoreError,
) {
    let before = snapshot(store).await;
    let deadline = store.upkeep().next_lease_deadline().await.unwrap();
    let got = store.transactions().commit(SESSION, msgs, acks).await;
    let got = match (got, &expected) {
        // The unknown ids may be listed in any order.
        (Err(StoreError::DeliveriesNotFound(mut ids)), StoreError::DeliveriesNotFound(_)) => {
            ids.sort_unstable();
            Err(StoreError::DeliveriesNotFound(ids))
        }
        (other, _) => other,
    };
    assert_eq!(got, Err(expected), "the commit must fail");
    assert_eq!(
        snapshot(store).await,
        before,
        "a failed commit changes no queue or subscription"
    );
    assert_eq!(
        store.upkeep().next_lease_deadline().await.unwrap(),
        deadline
    );
}

/// The messages and acks of a commit that fails at its third message.
fn good_start(held1: DeliveryId, sub_held: DeliveryId) -> (Vec<NewMessage>, Vec<DeliveryId>) {
    (
        vec![msg(&["q1"], "p", "first"), kind("second", "x")],
        vec![held1, sub_held],
    )
}

/// A commit whose third message names a missing queue stores none of its messages and settles
/// none of its acks.
pub async fn commit_with_missing_queue_changes_nothing(store: Arc<dyn Store>) {
    let (held1, held2, other, sub_held) = prepared(&store).await;
    let (mut msgs, acks) = good_start(held1, sub_held);
    msgs.push(msg(&["q2", "missing"], "p", "third"));
    msgs.push(msg(&["q2"], "p", "fourth"));
    fails_and_changes_nothing(
        &store,
        msgs,
        &acks,
        StoreError::QueueNotFound("missing".into()),
    )
    .await;
    store
        .queues()
        .ack(SESSION, &[held1, held2, sub_held])
        .await
        .expect("the failed commit's acks are still held");
    store.queues().ack(SESSION + 1, &[other]).await.unwrap();
}

/// A commit whose third message is published to a missing topic changes nothing.
pub async fn commit_with_missing_topic_changes_nothing(store: Arc<dyn Store>) {
    let (held1, _, _, sub_held) = prepared(&store).await;
    let (mut msgs, acks) = good_start(held1, sub_held);
    let mut lost = publish("nope", "p", "third");
    lost.properties = vec![("kind".into(), PropertyValue::Str("x".into()))].into();
    msgs.push(lost);
    fails_and_changes_nothing(
        &store,
        msgs,
        &acks,
        StoreError::TopicNotFound("nope".into()),
    )
    .await;
    store
        .queues()
        .ack(SESSION, &[held1, sub_held])
        .await
        .expect("the failed commit's acks are still held");
}

/// A commit whose third message is addressed to an unknown client changes nothing.
pub async fn commit_with_unknown_receiver_changes_nothing(store: Arc<dyn Store>) {
    let (held1, _, _, sub_held) = prepared(&store).await;
    let (mut msgs, acks) = good_start(held1, sub_held);
    msgs.push(msg_to(&["q2"], "p", "ghost", "third"));
    fails_and_changes_nothing(
        &store,
        msgs,
        &acks,
        StoreError::ClientNotFound("ghost".into()),
    )
    .await;
    // The same for an addressed publish.
    let (mut msgs, acks) = good_start(held1, sub_held);
    let mut addressed = kind("third", "x");
    addressed.receiver = Some("ghost".into());
    msgs.push(addressed);
    fails_and_changes_nothing(
        &store,
        msgs,
        &acks,
        StoreError::ClientNotFound("ghost".into()),
    )
    .await;
    store
        .queues()
        .ack(SESSION, &[held1, sub_held])
        .await
        .expect("the failed commit's acks are still held");
}

/// A commit acking deliveries the session does not hold (another session's, an already
/// settled one, an id never handed out) is `DeliveriesNotFound` listing exactly those, and
/// changes nothing: its messages are not stored, its other acks not settled.
pub async fn commit_with_unheld_ack_changes_nothing(store: Arc<dyn Store>) {
    let (held1, held2, other, sub_held) = prepared(&store).await;
    store.queues().ack(SESSION, &[held2]).await.unwrap();
    let bogus = held1.max(held2).max(other).max(sub_held) + 1000;
    let (msgs, _) = good_start(held1, sub_held);
    let mut unknown = vec![other, held2, bogus];
    unknown.sort_unstable();
    fails_and_changes_nothing(
        &store,
        msgs,
        &[held1, other, held2, sub_held, bogus],
        StoreError::DeliveriesNotFound(unknown),
    )
    .await;
    store
        .queues()
        .ack(SESSION, &[held1, sub_held])
        .await
        .expect("the failed commit's acks are still held");
    store
        .queues()
        .ack(SESSION + 1, &[other])
        .await
        .expect("the other session's delivery is still held by it");
}

/// An empty commit succeeds with no ids and changes nothing; a commit of only acks or only
/// messages works too.
pub async fn empty_and_one_sided_commits(store: Arc<dyn Store>) {
    let (held1, held2, _, _) = prepared(&store).await;
    let before = snapshot(&store).await;
    assert_eq!(
        store.transactions().commit(SESSION, Vec::new(), &[]).await,
        Ok(Vec::new())
    );
    assert_eq!(
        store
            .transactions()
            .commit(SESSION + 7, Vec::new(), &[])
            .await,
        Ok(Vec::new()),
        "a session holding nothing may commit nothing"
    );
    assert_eq!(
        snapshot(&store).await,
        before,
        "an empty commit changes nothing"
    );
    assert_eq!(
        store
            .transactions()
            .commit(SESSION, Vec::new(), &[held1])
            .await,
        Ok(Vec::new()),
        "acks only"
    );
    assert_eq!(depth(&store, "q1").await, (0, 1));
    let ids = store
        .transactions()
        .commit(SESSION, vec![msg(&["q1"], "p", "only")], &[])
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(ready(&store, "q1").await, (vec!["only".into()], ids));
    store.queues().ack(SESSION, &[held2]).await.unwrap();
}

/// Two commits acking the same delivery at the same time (and a commit racing a nack of it):
/// exactly one settles it; a commit that loses changes nothing, its messages stored nowhere.
pub async fn racing_commits_settle_a_delivery_once(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q", "out"]).await;
    for round in 0..20 {
        store
            .queues()
            .send(msg(&["q"], "p", &format!("r{round}")))
            .await
            .unwrap();
        let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
        let id = d[0].delivery_id;
        let commit = |tag: &str| {
            let store = store.clone();
            let m = msg(&["out"], "p", &format!("{round}-{tag}"));
            tokio::spawn(async move { store.transactions().commit(SESSION, vec![m], &[id]).await })
        };
        let first = commit("a");
        let second = commit("b");
        let nack = if round % 2 == 0 {
            let store = store.clone();
            Some(tokio::spawn(async move {
                store.queues().nack(SESSION, &[id], false).await
            }))
        } else {
            None
        };
        let mut winners = 0;
        let results = [("a", first.await.unwrap()), ("b", second.await.unwrap())];
        for (tag, r) in &results {
            match r {
                Ok(ids) => {
                    winners += 1;
                    assert_eq!(ids.len(), 1, "round {round}: commit {tag}");
                }
                Err(StoreError::DeliveriesNotFound(ids)) => {
                    assert_eq!(ids, &vec![id], "round {round}: commit {tag}")
                }
                Err(e) => panic!("round {round}: commit {tag}: unexpected {e}"),
            }
        }
        if let Some(nack) = nack {
            match nack.await.unwrap() {
                Ok(_) => winners += 1,
                Err(StoreError::DeliveriesNotFound(ids)) => assert_eq!(ids, vec![id]),
                Err(e) => panic!("round {round}: nack: unexpected {e}"),
            }
        }
        assert_eq!(
            winners, 1,
            "round {round}: the delivery is settled exactly once"
        );
        let stored = bodies(&store.queues().receive(&take("out", "c"), 10).await.unwrap());
        let expected: Vec<String> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(tag, _)| format!("{round}-{tag}"))
            .collect();
        assert_eq!(
            stored, expected,
            "round {round}: only a winning commit's message is stored"
        );
        assert_eq!(depth(&store, "q").await, (0, 0), "round {round}");
    }
}

/// A commit racing the forced deletion of a queue or topic it names is all or nothing: it
/// succeeds entirely (then the deletion removes its copies there) or fails with
/// `QueueNotFound` / `TopicNotFound` having stored nothing and settled nothing.
pub async fn commits_racing_deletes_are_all_or_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["keep", "src"]).await;
    for round in 0..20 {
        let victim = format!("v{round}");
        let by_topic = round % 2 == 1;
        if by_topic {
            store.topics().create_topic(&victim).await.unwrap();
            store
                .topics()
                .subscribe_topic(&victim, "s", &durable(""), "c")
                .await
                .unwrap();
        } else {
            store.queues().create_queue(&victim).await.unwrap();
        }
        store
            .queues()
            .send(msg(&["src"], "p", &format!("src{round}")))
            .await
            .unwrap();
        let d = store.queues().receive(&lease("src", "c"), 1).await.unwrap();
        let id = d[0].delivery_id;
        let mut racing = if by_topic {
            publish(&victim, "p", "racing")
        } else {
            msg(&[&victim], "p", "racing")
        };
        racing.properties = vec![("round".into(), PropertyValue::Int(round))].into();
        let msgs = vec![msg(&["keep"], "p", &format!("keep{round}")), racing];
        let committing = {
            let store = store.clone();
            tokio::spawn(async move { store.transactions().commit(SESSION, msgs, &[id]).await })
        };
        let deleting = {
            let store = store.clone();
            let victim = victim.clone();
            tokio::spawn(async move {
                if by_topic {
                    store.topics().delete_topic(&victim, true).await
                } else {
                    store.queues().delete_queue(&victim, true).await
                }
            })
        };
        let committed = committing.await.unwrap();
        deleting.await.unwrap().unwrap();
        let kept = bodies(
            &store
                .queues()
                .receive(&take("keep", "c"), 10)
                .await
                .unwrap(),
        );
        match committed {
            Ok(ids) => {
                assert_eq!(ids.len(), 2, "round {round}");
                assert_eq!(kept, vec![format!("keep{round}")], "round {round}");
                assert_eq!(depth(&store, "src").await, (0, 0), "round {round}: acked");
            }
            Err(StoreError::QueueNotFound(name)) | Err(StoreError::TopicNotFound(name)) => {
                assert_eq!(name, victim, "round {round}");
                assert!(
                    kept.is_empty(),
                    "round {round}: a failed commit stored {kept:?}"
                );
                assert_eq!(
                    depth(&store, "src").await,
                    (0, 1),
                    "round {round}: a failed commit settled its ack"
                );
                store.queues().ack(SESSION, &[id]).await.unwrap();
            }
            Err(e) => panic!("round {round}: unexpected {e}"),
        }
    }
}

/// A large commit (as many messages and acks as a broker allows in one transaction, here 5000
/// messages, half of them publishes, and 1000 acks) is applied whole; one failing at its last
/// message changes nothing.
pub async fn large_commit_is_all_or_nothing(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["src", "dst"]).await;
    store.topics().create_topic("t").await.unwrap();
    store
        .topics()
        .subscribe_topic("t", "all", &durable(""), "c")
        .await
        .unwrap();
    store
        .topics()
        .subscribe_topic("t", "odd", &durable("n / 2 * 2 <> n"), "c")
        .await
        .unwrap();
    let held: Vec<NewMessage> = (0..1000)
        .map(|i| msg(&["src"], "p", &format!("h{i}")))
        .collect();
    for r in store.queues().send_batch(held).await {
        r.unwrap();
    }
    let acks: Vec<DeliveryId> = store
        .queues()
        .receive(&lease("src", "c"), 1000)
        .await
        .unwrap()
        .iter()
        .map(|d| d.delivery_id)
        .collect();
    assert_eq!(acks.len(), 1000);
    let batch = |n: i64| -> Vec<NewMessage> {
        (0..n)
            .map(|i| {
                let mut m = if i % 2 == 0 {
                    msg(&["dst"], "p", &format!("s{i}"))
                } else {
                    publish("t", "p", &format!("p{i}"))
                };
                m.properties = vec![("n".into(), PropertyValue::Int(i / 2))].into();
                m
            })
            .collect()
    };
    let mut failing = batch(5000);
    failing.push(msg(&["missing"], "p", "last"));
    fails_and_changes_nothing(
        &store,
        failing,
        &acks,
        StoreError::QueueNotFound("missing".into()),
    )
    .await;
    let ids = store
        .transactions()
        .commit(SESSION, batch(5000), &acks)
        .await
        .unwrap();
    assert_eq!(ids.len(), 5000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in message order");
    assert_eq!(depth(&store, "src").await, (0, 0), "every ack applied");
    assert_eq!(depth(&store, "dst").await, (2500, 0));
    assert_eq!(sub_depth(&store, "t", "all").await, (2500, 0));
    assert_eq!(
        sub_depth(&store, "t", "odd").await,
        (1250, 0),
        "the selector applied to each publish"
    );
}
