//! Browsing ([`crate::Admin::browse`]): a queue's or a sender's ready messages in priority or
//! time order, page by page with a cursor, filtered by a selector, changing nothing.

use std::sync::Arc;

use ferry_protocol::{MessageId, Order, Source};
use ferry_selector::Selector;

use super::*;
use crate::admin::{BrowseCursor, BrowseSpec, BROWSE_BUDGET};
use crate::error::StoreError;

/// A browse of `source` in `order` from the start, 1000 to a page, no selector.
pub fn browse_spec(source: Source, order: Order) -> BrowseSpec {
    BrowseSpec {
        source,
        order,
        after: None,
        limit: 1000,
        selector: None,
        now_ms: NOW,
    }
}

/// Every page of a browse of `limit` messages, as (queue, id) per page.
async fn pages(
    store: &Arc<dyn Store>,
    source: Source,
    order: Order,
    limit: usize,
) -> Vec<Vec<(String, MessageId)>> {
    let mut spec = browse_spec(source, order);
    spec.limit = limit;
    let mut out = Vec::new();
    loop {
        let page = store.admin().browse(&spec).await.unwrap();
        out.push(
            page.messages
                .iter()
                .map(|m| (m.message.queue.to_string(), m.message.id))
                .collect(),
        );
        match page.next {
            Some(next) => spec.after = Some(next),
            None => return out,
        }
        assert!(out.len() < 1000, "a browse that never ends");
    }
}

/// Ids of the messages of a queue, all pages joined.
async fn all_ids(store: &Arc<dyn Store>, queue: &str, order: Order, limit: usize) -> Vec<u64> {
    pages(store, Source::Queue(queue.into()), order, limit)
        .await
        .into_iter()
        .flatten()
        .map(|(_, id)| id)
        .collect()
}

/// Pages walk the ready messages in the order a receive would take them (highest priority
/// first, oldest first within one; or oldest first), addressed ones included, delayed and
/// in-flight ones not, and change nothing: no lease, no delivery count, no reordering.
pub async fn browse_pages_in_order_without_consuming(store: Arc<dyn Store>) {
    setup(&store, &["p", "c", "d"], &["q"]).await;
    let mut sent = Vec::new();
    for (i, prio) in [3u8, 9, 3, 5, 9, 1, 5].into_iter().enumerate() {
        let m = if i == 2 {
            NewMessage {
                priority: prio,
                ..msg_to(&["q"], "p", "d", &format!("m{i}"))
            }
        } else {
            msg_prio(&["q"], "p", &format!("m{i}"), prio)
        };
        sent.push((prio, store.queues().send(m).await.unwrap()));
    }
    let mut later = msg(&["q"], "p", "later");
    later.deliver_at_ms = FAR_FUTURE;
    store.queues().send(later).await.unwrap();
    // The head is delivered once and comes back: it shows with its count.
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    store
        .queues()
        .nack(SESSION, &[d[0].delivery_id], true)
        .await
        .unwrap();
    // And one more stays in flight: it is not shown.
    let mut oldest_first = lease("q", "c");
    oldest_first.order = Order::Time;
    let held = store.queues().receive(&oldest_first, 1).await.unwrap();
    assert_eq!(held[0].message.id, sent[0].1);
    let ready: Vec<(u8, u64)> = sent[1..].to_vec();
    let mut by_priority = ready.clone();
    by_priority.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let by_priority: Vec<u64> = by_priority.into_iter().map(|e| e.1).collect();
    let by_time: Vec<u64> = ready.iter().map(|e| e.1).collect();

    for limit in [1, 2, 4, 1000] {
        assert_eq!(
            all_ids(&store, "q", Order::Priority, limit).await,
            by_priority,
            "priority order in pages of {limit}"
        );
        assert_eq!(
            all_ids(&store, "q", Order::Time, limit).await,
            by_time,
            "time order in pages of {limit}"
        );
    }
    let page = store
        .admin()
        .browse(&browse_spec(Source::Queue("q".into()), Order::Priority))
        .await
        .unwrap();
    assert_eq!(page.next, None, "one page holds it all");
    let head = &page.messages[0].message;
    assert_eq!((head.id, head.delivery_count), (sent[1].1, 1));
    assert_eq!(head.queue.as_ref(), "q");
    assert_eq!(head.sender.as_ref(), "p");
    assert_eq!(&head.body[..], b"m1");
    let addressed = page
        .messages
        .iter()
        .find(|m| m.message.id == sent[2].1)
        .expect("a message addressed to another client is shown");
    assert_eq!(addressed.message.receiver.as_deref(), Some("d"));

    // Nothing changed: the same deliveries, counts and order.
    let q = super::details(&store, "q").await;
    assert_eq!((q.ready, q.delayed, q.in_flight), (6, 1, 1));
    store
        .queues()
        .ack(SESSION, &[held[0].delivery_id])
        .await
        .unwrap();
    let taken = store.queues().receive(&take("q", "c"), 10).await.unwrap();
    let ids: Vec<u64> = taken.iter().map(|d| d.message.id).collect();
    let mut want = by_priority.clone();
    want.retain(|id| *id != sent[2].1);
    assert_eq!(ids, want, "receives take them in the same order");
    assert_eq!(taken[0].message.delivery_count, 1);
}

/// The cursor names the last message shown, so messages taken or added meanwhile neither
/// shift nor repeat the next page; a cursor whose message is gone still resumes after it.
pub async fn browse_cursor_is_stable_under_takes(store: Arc<dyn Store>) {
    setup(&store, &["p", "c"], &["q"]).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(
            store
                .queues()
                .send(msg(&["q"], "p", &format!("m{i}")))
                .await
                .unwrap(),
        );
    }
    let mut spec = browse_spec(Source::Queue("q".into()), Order::Time);
    spec.limit = 3;
    let first = store.admin().browse(&spec).await.unwrap();
    let shown: Vec<u64> = first.messages.iter().map(|m| m.message.id).collect();
    assert_eq!(shown, ids[..3]);
    let next = first.next.expect("more to come");
    assert_eq!(next.id, ids[2]);
    // The first three are taken, one more arrives.
    store.queues().receive(&take("q", "c"), 3).await.unwrap();
    let extra = store.queues().send(msg(&["q"], "p", "m6")).await.unwrap();
    spec.after = Some(next);
    spec.limit = 10;
    let second = store.admin().browse(&spec).await.unwrap();
    let shown: Vec<u64> = second.messages.iter().map(|m| m.message.id).collect();
    let mut want = ids[3..].to_vec();
    want.push(extra);
    assert_eq!(shown, want);
    assert_eq!(second.next, None);
}

/// A sender's messages across its queues, a message on two queues shown once per queue, in
/// both orders and in pages down to one message; unknown senders and queues are errors.
pub async fn browse_by_sender_across_queues(store: Arc<dyn Store>) {
    setup(&store, &["p", "other", "c"], &["a", "b"]).await;
    let one = store
        .queues()
        .send(msg_prio(&["a"], "p", "one", 2))
        .await
        .unwrap();
    let both = store
        .queues()
        .send(msg_prio(&["a", "b"], "p", "both", 7))
        .await
        .unwrap();
    store
        .queues()
        .send(msg(&["a"], "other", "not p's"))
        .await
        .unwrap();
    let three = store
        .queues()
        .send(msg_prio(&["b"], "p", "three", 7))
        .await
        .unwrap();
    let source = || Source::Sender("p".into());
    for limit in [1, 2, 1000] {
        let got: Vec<(String, u64)> = pages(&store, source(), Order::Time, limit)
            .await
            .into_iter()
            .flatten()
            .collect();
        let mut sorted = got.clone();
        sorted.sort_by_key(|e| e.1);
        assert_eq!(got, sorted, "time order in pages of {limit}");
        let mut set = got.clone();
        set.sort();
        assert_eq!(
            set,
            vec![
                ("a".to_string(), one),
                ("a".to_string(), both),
                ("b".to_string(), both),
                ("b".to_string(), three)
            ],
            "each of p's messages once per queue, in pages of {limit}"
        );
        let got: Vec<u64> = pages(&store, source(), Order::Priority, limit)
            .await
            .into_iter()
            .flatten()
            .map(|e| e.1)
            .collect();
        assert_eq!(
            got,
            vec![both, both, three, one],
            "priority order in pages of {limit}"
        );
    }
    assert_eq!(
        store
            .admin()
            .browse(&browse_spec(Source::Sender("nobody".into()), Order::Time))
            .await,
        Err(StoreError::ClientNotFound("nobody".into()))
    );
    assert_eq!(
        store
            .admin()
            .browse(&browse_spec(Source::Queue("nope".into()), Order::Time))
            .await,
        Err(StoreError::QueueNotFound("nope".into()))
    );
    // A cursor naming a queue that is gone resumes all the same.
    let mut spec = browse_spec(source(), Order::Time);
    spec.after = Some(BrowseCursor {
        priority: 0,
        id: both,
        queue: Some("deleted".into()),
    });
    let page = store.admin().browse(&spec).await.unwrap();
    let ids: Vec<u64> = page.messages.iter().map(|m| m.message.id).collect();
    assert!(ids.ends_with(&[three]) && !ids.contains(&one), "{ids:?}");
}

/// A selector keeps the matching messages, in order, across pages; a call examines at most
/// [`BROWSE_BUDGET`] messages, so a rare match far down comes in a later page, never lost.
pub async fn browse_with_selector_pages_past_the_budget(store: Arc<dyn Store>) {
    setup(&store, &["p"], &["q"]).await;
    let batch: Vec<NewMessage> = (0..BROWSE_BUDGET + 10)
        .map(|i| {
            let mut m = msg(&["q"], "p", "x");
            let n = if i % 1000 == 999 || i == BROWSE_BUDGET + 5 {
                1
            } else {
                0
            };
            m.properties = vec![("n".into(), ferry_protocol::PropertyValue::Int(n))].into();
            m
        })
        .collect();
    let ids: Vec<u64> = store
        .queues()
        .send_batch(batch)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<u64> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 1000 == 999 || *i == BROWSE_BUDGET + 5)
        .map(|(_, id)| *id)
        .collect();
    assert_eq!(want.len(), 11);
    for order in [Order::Time, Order::Priority] {
        let mut spec = browse_spec(Source::Queue("q".into()), order);
        spec.limit = 20;
        spec.selector = Some(Arc::new(Selector::parse("n = 1").unwrap()));
        let mut got = Vec::new();
        let mut calls = 0;
        loop {
            let page = store.admin().browse(&spec).await.unwrap();
            calls += 1;
            got.extend(page.messages.iter().map(|m| m.message.id));
            match page.next {
                Some(next) => spec.after = Some(next),
                None => break,
            }
        }
        assert_eq!(got, want, "{order:?}: every match, in order");
        assert_eq!(calls, 2, "{order:?}: the budget ends the first call");
    }
}
