//! Backlogs whose bodies do not all fit in memory: every body read back byte-exact, whatever
//! path it takes (an engine may keep recent bodies in a cache and read the others from its
//! log), in both orders, by queue and by sender, with selectors, after compaction and after a
//! restart. The engines' runs give the suite a deliberately small cache, so that most bodies
//! here come from disk.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{AckMode, Delivery, Order, PropertyValue, ReceiveMode, Source};

use super::selecting::selecting;
use super::*;
use crate::api::{NewMessage, Store};

/// Messages in the backlog.
const BACKLOG: usize = 240;

/// The body of message `i`: its own length (between 1 and about 3 KiB) and bytes, every byte
/// value present, so that any mix-up or truncation shows.
pub fn body_of(i: usize) -> Bytes {
    let len = 1 + (i * 7919) % 3000;
    (0..len)
        .map(|k| (k.wrapping_mul(31).wrapping_add(i * 17) % 256) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Message `i` of the backlog: from `s0` or `s1`, priority 1 to 9, property `n` = i and
/// `parity` "even" or "odd".
fn backlog_message(queues: &[&str], i: usize) -> NewMessage {
    NewMessage {
        sender: if i.is_multiple_of(2) { "s0" } else { "s1" }.into(),
        priority: 1 + (i % 9) as u8,
        properties: vec![
            ("n".into(), PropertyValue::Int(i as i64)),
            (
                "parity".into(),
                PropertyValue::Str(if i.is_multiple_of(2) { "even" } else { "odd" }.into()),
            ),
        ]
        .into(),
        body: body_of(i),
        ..msg(queues, "s0", "")
    }
}

/// Sends the backlog to `queues` in batches; returns the ids, in order.
async fn send_backlog(store: &Arc<dyn Store>, queues: &[&str]) -> Vec<u64> {
    let mut ids = Vec::new();
    for i in 0..BACKLOG {
        ids.push(
            store
                .queues()
                .send(backlog_message(queues, i))
                .await
                .unwrap(),
        );
    }
    ids
}

/// Checks that every delivery carries the body and properties of the message it says it is.
fn check_exact(ids: &[u64], ds: &[Delivery]) {
    let index: BTreeMap<u64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for d in ds {
        let i = index[&d.message.id];
        assert_eq!(
            d.message.body,
            body_of(i),
            "message {i} (id {}) came back with another body",
            d.message.id
        );
        assert_eq!(
            d.message.properties,
            backlog_message(&[], i).properties,
            "message {i}: properties"
        );
    }
}

/// The order a receive must hand the backlog out in: by priority (highest first) then age,
/// or by age alone.
fn expected(ids: &[u64], order: Order, keep: impl Fn(usize) -> bool) -> Vec<u64> {
    let mut want: Vec<(std::cmp::Reverse<u8>, u64)> = (0..BACKLOG)
        .filter(|&i| keep(i))
        .map(|i| {
            let p = match order {
                Order::Priority => 1 + (i % 9) as u8,
                Order::Time => 0,
            };
            (std::cmp::Reverse(p), ids[i])
        })
        .collect();
    want.sort();
    want.into_iter().map(|(_, id)| id).collect()
}

fn ids_of(ds: &[Delivery]) -> Vec<u64> {
    ds.iter().map(|d| d.message.id).collect()
}

/// A backlog is peeked and taken byte-exact from a queue, in both orders, with and without a
/// selector, a few messages at a time.
pub async fn backlog_by_queue_is_delivered_byte_exact_in_both_orders(store: Arc<dyn Store>) {
    setup(&store, &["s0", "s1", "c"], &["q"]).await;
    let ids = send_backlog(&store, &["q"]).await;
    for order in [Order::Priority, Order::Time] {
        let mut spec = peek("q", "c");
        spec.order = order;
        let d = store.queues().receive(&spec, BACKLOG).await.unwrap();
        check_exact(&ids, &d);
        assert_eq!(ids_of(&d), expected(&ids, order, |_| true), "{order:?}");
        let mut spec = selecting(peek("q", "c"), "parity = 'odd' AND n > 100");
        spec.order = order;
        let d = store.queues().receive(&spec, BACKLOG).await.unwrap();
        check_exact(&ids, &d);
        assert_eq!(
            ids_of(&d),
            expected(&ids, order, |i| i % 2 == 1 && i > 100),
            "{order:?} with a selector"
        );
    }
    // Take the odd ones by time with client ack, the rest by priority with auto ack.
    let mut spec = selecting(lease("q", "c"), "parity = 'odd'");
    spec.order = Order::Time;
    let mut got = Vec::new();
    loop {
        let d = store.queues().receive(&spec, 7).await.unwrap();
        if d.is_empty() {
            break;
        }
        check_exact(&ids, &d);
        let dids: Vec<_> = d.iter().map(|d| d.delivery_id).collect();
        store.queues().ack(SESSION, &dids).await.unwrap();
        got.extend(ids_of(&d));
    }
    assert_eq!(got, expected(&ids, Order::Time, |i| i % 2 == 1));
    let mut got = Vec::new();
    loop {
        let d = store.queues().receive(&take("q", "c"), 11).await.unwrap();
        if d.is_empty() {
            break;
        }
        check_exact(&ids, &d);
        got.extend(ids_of(&d));
    }
    assert_eq!(got, expected(&ids, Order::Priority, |i| i % 2 == 0));
    assert_eq!(depth(&store, "q").await, (0, 0));
}

/// A backlog spread over two queues is taken byte-exact by sender, in both orders, with a
/// selector.
pub async fn backlog_by_sender_is_delivered_byte_exact(store: Arc<dyn Store>) {
    setup(&store, &["s0", "s1", "c"], &["a", "b"]).await;
    let ids = send_backlog(&store, &["a", "b"]).await;
    for (order, sender, parity) in [(Order::Time, "s0", 0), (Order::Priority, "s1", 1)] {
        let mut spec = selecting(take("unused", "c"), "n >= 0");
        spec.source = Source::Sender(sender.into());
        spec.order = order;
        let mut got = Vec::new();
        loop {
            let d = store.queues().receive(&spec, 13).await.unwrap();
            if d.is_empty() {
                break;
            }
            check_exact(&ids, &d);
            got.extend(ids_of(&d));
        }
        // Each message is on both queues: taken from each.
        let mut want = Vec::new();
        for id in expected(&ids, order, |i| i % 2 == parity) {
            want.extend([id, id]);
        }
        assert_eq!(got, want, "{order:?} by {sender}");
    }
    assert_eq!(depth(&store, "a").await, (0, 0));
    assert_eq!(depth(&store, "b").await, (0, 0));
}

/// Bodies stay byte-exact across compaction: half the backlog is taken, the log compacted,
/// then the rest read back; a transaction's messages and dead letters too.
pub async fn bodies_are_byte_exact_after_compaction(store: Arc<dyn Store>) {
    setup(&store, &["s0", "s1", "c"], &["q"]).await;
    let mut ids = send_backlog(&store, &["q"]).await;
    // Some of them in one transaction.
    let extra: Vec<NewMessage> = (BACKLOG..BACKLOG + 5)
        .map(|i| backlog_message(&["q"], i % BACKLOG))
        .collect();
    let committed = store
        .transactions()
        .commit(SESSION, extra, &[])
        .await
        .unwrap();
    let mut spec = take("q", "c");
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, BACKLOG / 2).await.unwrap();
    check_exact(&ids, &d);
    for _ in 0..3 {
        store.upkeep().maintain().await.unwrap();
    }
    ids.extend(&committed);
    let mut all = peek("q", "c");
    all.order = Order::Time;
    let d = store.queues().receive(&all, 2 * BACKLOG).await.unwrap();
    assert_eq!(d.len(), BACKLOG - BACKLOG / 2 + 5);
    for d in &d {
        let i = ids.iter().position(|id| *id == d.message.id).unwrap() % BACKLOG;
        assert_eq!(d.message.body, body_of(i), "message {i} after compaction");
    }
    let d = store.queues().receive(&spec, 2 * BACKLOG).await.unwrap();
    assert_eq!(d.len(), BACKLOG - BACKLOG / 2 + 5);
}

/// Bodies are read back byte-exact after a restart: peeked, taken, leased and released.
pub async fn bodies_survive_restart_byte_exact(reopen: super::wildcards::Reopen) {
    let store = reopen().await;
    setup(&store, &["s0", "s1", "c"], &["q"]).await;
    let ids = send_backlog(&store, &["q"]).await;
    let d = store.queues().receive(&lease("q", "c"), 10).await.unwrap();
    check_exact(&ids, &d);
    drop(d);
    drop(store);
    let store = reopen().await;
    let mut spec = from_queue("q", "c", ReceiveMode::Peek, AckMode::Auto);
    spec.order = Order::Time;
    let d = store.queues().receive(&spec, BACKLOG).await.unwrap();
    assert_eq!(d.len(), BACKLOG, "every message is back");
    check_exact(&ids, &d);
    assert_eq!(ids_of(&d), expected(&ids, Order::Time, |_| true));
    let mut got = Vec::new();
    loop {
        let d = store.queues().receive(&take("q", "c"), 50).await.unwrap();
        if d.is_empty() {
            break;
        }
        check_exact(&ids, &d);
        got.extend(ids_of(&d));
    }
    assert_eq!(got.len(), BACKLOG);
}
