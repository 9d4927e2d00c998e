//! Properties beyond the properties budget: kept in the log only, read back (without the state
//! lock) when a selector or a delivery needs them, byte-exact, with failed reads (injected by the
//! [`FaultyBackend`]) retried or reported, losing nothing.

use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{AckMode, PropertyValue, ReceiveMode};
use ferry_selector::Selector;

use super::engine_tests::{bodies, config, message, spec};
use super::{EmbeddedStore, FaultKind, FaultyBackend};
use crate::api::{NewMessage, ReceiveSpec, Store};
use crate::error::StoreError;

/// A store on `disk` keeping `budget` bytes of properties in memory and no body cache, with
/// queue `q` and client `c`.
async fn open_with_budget(disk: &FaultyBackend, budget: u64) -> Arc<EmbeddedStore> {
    let mut cfg = config(disk, 1 << 20);
    cfg.cache_bytes = 0;
    cfg.properties_bytes = budget;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    if store.queues().create_queue("q").await.is_err() {
        // Reopened: the queue is there already.
    }
    store
}

/// Message `i` of a backlog: its number and a few typed properties.
fn numbered(i: i64) -> NewMessage {
    let mut m = message(&["q"], None, &format!("m{i}"), "eu");
    m.properties = vec![
        ("n".into(), PropertyValue::Int(i)),
        ("even".into(), PropertyValue::Bool(i % 2 == 0)),
        ("ratio".into(), PropertyValue::Float(i as f64 / 7.0)),
        (
            "label".into(),
            PropertyValue::Str(format!("étiquette-{i}-✓")),
        ),
    ]
    .into();
    m.body = Bytes::from(format!("m{i}"));
    m
}

async fn fill(store: &EmbeddedStore, n: i64) {
    for r in store
        .queues()
        .send_batch((0..n).map(numbered).collect())
        .await
    {
        r.unwrap();
    }
}

fn selecting(spec: ReceiveSpec, selector: &str) -> ReceiveSpec {
    ReceiveSpec {
        selector: Some(Arc::new(Selector::parse(selector).unwrap())),
        ..spec
    }
}

/// The messages a receive with `selector` takes, by number, with their properties checked
/// byte-exact against what was sent.
async fn take_selected(store: &EmbeddedStore, selector: &str) -> Result<Vec<i64>, StoreError> {
    let d = store
        .queues()
        .receive(
            &selecting(spec("q", ReceiveMode::Take, AckMode::Auto, 1), selector),
            1000,
        )
        .await?;
    Ok(d.into_iter()
        .map(|d| {
            let n: i64 = std::str::from_utf8(&d.message.body[1..])
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(d.message.properties, numbered(n).properties, "message {n}");
            n
        })
        .collect())
}

#[tokio::test]
async fn selectors_read_properties_that_are_in_the_log_only() {
    let disk = FaultyBackend::new();
    let store = open_with_budget(&disk, 0).await;
    fill(&store, 300).await;
    let before = disk.read_count();
    let got = take_selected(&store, "n >= 290 OR label = 'étiquette-7-✓'")
        .await
        .unwrap();
    assert_eq!(got, [7, 290, 291, 292, 293, 294, 295, 296, 297, 298, 299]);
    assert!(
        disk.read_count() > before,
        "the properties came from the log"
    );
    // A selector on a header alone reads no property.
    let before = disk.read_count();
    let none = store
        .queues()
        .receive(
            &selecting(
                spec("q", ReceiveMode::Peek, AckMode::Auto, 1),
                "JMSPriority > 9",
            ),
            1000,
        )
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(disk.read_count(), before, "a header selector reads nothing");
    // The others stay, in order; and a selector on `even` takes exactly the even ones.
    let evens = take_selected(&store, "even = TRUE AND ratio < 10")
        .await
        .unwrap();
    assert_eq!(
        evens,
        (0..70).step_by(2).filter(|n| *n != 7).collect::<Vec<_>>()
    );
    assert_eq!(bodies(&store, "q").await.len(), 300 - 11 - 35);
}

#[tokio::test]
async fn properties_over_the_budget_are_delivered_byte_exact_and_survive_restart() {
    let disk = FaultyBackend::new();
    // Room for the properties of a few messages: the rest stay in the log.
    let store = open_with_budget(&disk, 2000).await;
    fill(&store, 50).await;
    let peek = |store: Arc<EmbeddedStore>| async move {
        store
            .queues()
            .receive(&spec("q", ReceiveMode::Peek, AckMode::Auto, 1), 1000)
            .await
            .unwrap()
    };
    for d in peek(store.clone()).await {
        let n: i64 = std::str::from_utf8(&d.message.body[1..])
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(d.message.properties, numbered(n).properties, "message {n}");
    }
    drop(store);
    let store = open_with_budget(&disk, 2000).await;
    let got = take_selected(&store, "n BETWEEN 3 AND 5 OR n = 49")
        .await
        .unwrap();
    assert_eq!(got, [3, 4, 5, 49]);
    assert_eq!(peek(store.clone()).await.len(), 46);
}

#[tokio::test]
async fn a_failed_property_read_is_retried() {
    let disk = FaultyBackend::new();
    let store = open_with_budget(&disk, 0).await;
    fill(&store, 20).await;
    disk.fail_reads(2, FaultKind::Io);
    let got = take_selected(&store, "n = 3 OR n = 17").await.unwrap();
    assert_eq!(got, [3, 17]);
    assert_eq!(bodies(&store, "q").await.len(), 18);
}

#[tokio::test]
async fn properties_that_cannot_be_read_are_reported_and_nothing_is_lost() {
    let disk = FaultyBackend::new();
    let store = open_with_budget(&disk, 0).await;
    fill(&store, 20).await;
    disk.fail_reads(u32::MAX, FaultKind::Io);
    let err = take_selected(&store, "n = 3").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Unavailable(why) if why.contains("properties")),
        "{err}"
    );
    disk.fail_reads(0, FaultKind::Io);
    assert_eq!(bodies(&store, "q").await.len(), 20, "nothing was taken");
    assert_eq!(take_selected(&store, "n = 3").await.unwrap(), [3]);
}
