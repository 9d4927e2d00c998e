//! Every core operation against a real in-process broker, through the Rust client.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, ErrorCode, Order, ReceiveMode, Source};
use ferry_testkit::TestServer;

#[tokio::test]
async fn create_list_delete_queues() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("b").await.unwrap();
    c.create_queue("a").await.unwrap();
    c.send(msg(&["a"], "x", 5)).await.unwrap();
    let qs = c.list_queues().await.unwrap();
    let names: Vec<_> = qs
        .iter()
        .map(|q| (q.name.as_str(), q.ready, q.in_flight))
        .collect();
    assert_eq!(names, vec![("a", 1, 0), ("b", 0, 0)]);
    c.delete_queue("b", false).await.unwrap();
    let m = expect_code(c.delete_queue("a", false).await, ErrorCode::QueueNotEmpty);
    assert!(m.contains("'a'"), "{m}");
    c.delete_queue("a", true).await.unwrap();
    assert!(c.list_queues().await.unwrap().is_empty());
    s.shutdown().await;
}

#[tokio::test]
async fn send_to_three_queues_with_one_missing_changes_nothing() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q1").await.unwrap();
    c.create_queue("q2").await.unwrap();
    let m = expect_code(
        c.send(msg(&["q1", "nope", "q2"], "x", 5)).await,
        ErrorCode::QueueNotFound,
    );
    assert!(m.contains("queue 'nope' does not exist"), "{m}");
    for q in c.list_queues().await.unwrap() {
        assert_eq!(q.ready, 0, "queue {} changed", q.name);
    }
    // The same message to the existing queues lands on both, with one id.
    let id = c.send(msg(&["q1", "q2"], "y", 5)).await.unwrap();
    assert_eq!(take(&c, "q1").await.unwrap().message.id, id);
    assert_eq!(take(&c, "q2").await.unwrap().message.id, id);
    s.shutdown().await;
}

#[tokio::test]
async fn addressed_messages_are_invisible_to_others() {
    let s = TestServer::start().await;
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    let carol = s.client("carol").await;
    alice.create_queue("q").await.unwrap();
    let mut m = msg(&["q"], "for bob", 5);
    m.receiver = Some("bob".into());
    alice.send(m).await.unwrap();
    assert!(
        take(&carol, "q").await.is_none(),
        "carol must not see bob's message"
    );
    let peek = carol
        .receive(from_queue(
            "q",
            Order::Time,
            ReceiveMode::Peek,
            AckMode::Auto,
            0,
        ))
        .await
        .unwrap();
    assert!(peek.is_none(), "carol must not even peek bob's message");
    let d = take(&bob, "q").await.unwrap();
    assert_eq!(body(&d), "for bob");
    assert_eq!(d.message.receiver.as_deref(), Some("bob"));
    // Unknown receiver.
    let mut m = msg(&["q"], "x", 5);
    m.receiver = Some("nobody".into());
    let e = expect_code(alice.send(m).await, ErrorCode::ClientNotFound);
    assert!(e.contains("nobody"), "{e}");
    s.shutdown().await;
}

#[tokio::test]
async fn receive_by_sender_across_queues() {
    let s = TestServer::start().await;
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    let reader = s.client("reader").await;
    alice.create_queue("q1").await.unwrap();
    alice.create_queue("q2").await.unwrap();
    bob.send(msg(&["q1"], "bob-1", 5)).await.unwrap();
    alice.send(msg(&["q2"], "alice-1", 5)).await.unwrap();
    alice.send(msg(&["q1"], "alice-2", 9)).await.unwrap();
    let by_alice = |order| Receive {
        source: Source::Sender("alice".into()),
        order,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        wait_ms: 0,
        selector: String::new(),
    };
    let d = reader
        .receive(by_alice(Order::Time))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (body(&d).as_str(), d.message.queue.as_str()),
        ("alice-1", "q2")
    );
    let d = reader
        .receive(by_alice(Order::Time))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (body(&d).as_str(), d.message.queue.as_str()),
        ("alice-2", "q1")
    );
    assert!(reader
        .receive(by_alice(Order::Time))
        .await
        .unwrap()
        .is_none());
    assert_eq!(body(&take(&reader, "q1").await.unwrap()), "bob-1");
    let unknown = Receive {
        source: Source::Sender("ghost".into()),
        ..by_alice(Order::Time)
    };
    expect_code(reader.receive(unknown).await, ErrorCode::ClientNotFound);
    s.shutdown().await;
}

#[tokio::test]
async fn priority_order_versus_time_order() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    for (b, p) in [("low", 1), ("high", 10), ("mid-a", 5), ("mid-b", 5)] {
        c.send(msg(&["q"], b, p)).await.unwrap();
    }
    let peek = |order| from_queue("q", order, ReceiveMode::Peek, AckMode::Auto, 0);
    assert_eq!(
        body(&c.receive(peek(Order::Time)).await.unwrap().unwrap()),
        "low"
    );
    assert_eq!(
        body(&c.receive(peek(Order::Priority)).await.unwrap().unwrap()),
        "high"
    );
    let mut got = Vec::new();
    while let Some(d) = take(&c, "q").await {
        got.push(body(&d));
    }
    assert_eq!(got, ["high", "mid-a", "mid-b", "low"]);
    s.shutdown().await;
}

#[tokio::test]
async fn peek_leaves_the_message() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let id = c.send(msg(&["q"], "x", 5)).await.unwrap();
    for _ in 0..3 {
        let d = c
            .receive(from_queue(
                "q",
                Order::Priority,
                ReceiveMode::Peek,
                AckMode::Client,
                0,
            ))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.message.id, id);
        assert_eq!(d.delivery_id, 0, "a peek has nothing to settle");
        assert!(!d.message.redelivered());
    }
    assert_eq!(take(&c, "q").await.unwrap().message.id, id);
    assert!(take(&c, "q").await.is_none());
    s.shutdown().await;
}

#[tokio::test]
async fn message_fields_travel_intact() {
    use ferry_protocol::PropertyValue;
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let mut m = msg(&["q"], "hello", 7);
    m.context = 42;
    m.properties = vec![
        ("n".into(), PropertyValue::Int(-3)),
        ("f".into(), PropertyValue::Float(1.5)),
        ("b".into(), PropertyValue::Bool(true)),
        ("s".into(), PropertyValue::Str("x".into())),
    ]
    .into();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let id = c.send(m.clone()).await.unwrap();
    let d = take(&c, "q").await.unwrap().message;
    assert_eq!(d.id, id);
    assert_eq!(d.sender, "alice");
    assert_eq!(d.priority, 7);
    assert_eq!(d.context, 42);
    assert_eq!(d.properties, m.properties);
    assert_eq!(&d.body[..], b"hello");
    assert!(d.created_at >= before && d.created_at < before + 60_000);
    s.shutdown().await;
}

#[tokio::test]
async fn send_batch_items_succeed_or_fail_on_their_own() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let results = c
        .send_batch(vec![
            msg(&["q"], "1", 5),
            msg(&["missing"], "2", 5),
            msg(&["q"], "3", 11),
            msg(&["q"], "4", 5),
        ])
        .await
        .unwrap();
    assert!(results[0].is_ok());
    assert_eq!(
        results[1].as_ref().unwrap_err().code(),
        Some(ErrorCode::QueueNotFound)
    );
    assert_eq!(
        results[2].as_ref().unwrap_err().code(),
        Some(ErrorCode::InvalidArgument)
    );
    assert!(results[3].is_ok());
    assert!(results[0].as_ref().unwrap() < results[3].as_ref().unwrap());
    assert_eq!(body(&take(&c, "q").await.unwrap()), "1");
    assert_eq!(body(&take(&c, "q").await.unwrap()), "4");
    s.shutdown().await;
}

#[tokio::test]
async fn waiting_queues_lists_queues_with_messages_for_me() {
    let s = TestServer::start().await;
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    for q in ["q1", "q2", "q3"] {
        alice.create_queue(q).await.unwrap();
    }
    for q in ["q3", "q1"] {
        let mut m = msg(&[q], "x", 5);
        m.receiver = Some("bob".into());
        alice.send(m).await.unwrap();
    }
    alice.send(msg(&["q2"], "public", 5)).await.unwrap();
    assert_eq!(
        bob.waiting_queues().await.unwrap(),
        vec!["q1".to_string(), "q3".to_string()]
    );
    assert!(alice.waiting_queues().await.unwrap().is_empty());
    s.shutdown().await;
}

#[tokio::test]
async fn long_poll_receive_wakes_within_milliseconds_of_a_send() {
    let s = TestServer::start().await;
    let waiter = s.client("waiter").await;
    let sender = s.client("sender").await;
    sender.create_queue("q").await.unwrap();
    let w = tokio::spawn(async move {
        let started = Instant::now();
        let d = waiter
            .receive(from_queue(
                "q",
                Order::Priority,
                ReceiveMode::Take,
                AckMode::Auto,
                20_000,
            ))
            .await
            .unwrap();
        (d, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent_at = Instant::now();
    sender.send(msg(&["q"], "wake", 5)).await.unwrap();
    let (d, waited) = w.await.unwrap();
    assert_eq!(body(&d.unwrap()), "wake");
    // Woken by the arrival, not by the 20 s timeout or a polling interval: the receive returned
    // within a moment of the send (generous bound for a loaded machine).
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert!(sent_at.elapsed() < Duration::from_secs(5));
    s.shutdown().await;
}

#[tokio::test]
async fn long_poll_by_sender_is_woken_too_and_times_out_empty() {
    let s = TestServer::start().await;
    let waiter = s.client("waiter").await;
    let alice = s.client("alice").await;
    alice.create_queue("q").await.unwrap();
    let empty = waiter
        .receive(from_queue(
            "q",
            Order::Time,
            ReceiveMode::Take,
            AckMode::Auto,
            50,
        ))
        .await
        .unwrap();
    assert!(empty.is_none());
    let w = tokio::spawn(async move {
        waiter
            .receive(Receive {
                source: Source::Sender("alice".into()),
                order: Order::Time,
                mode: ReceiveMode::Take,
                ack: AckMode::Auto,
                wait_ms: 20_000,
                selector: String::new(),
            })
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    alice.send(msg(&["q"], "hi", 5)).await.unwrap();
    let d = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body(&d.unwrap()), "hi");
    s.shutdown().await;
}

#[tokio::test]
async fn single_producer_order_is_kept_under_pipelining() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let sends: Vec<_> = (0..500)
        .map(|i| c.send(msg(&["q"], &i.to_string(), 5)))
        .collect();
    let ids: Vec<u64> = futures_join_all(sends).await;
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids follow send order");
    for i in 0..500 {
        assert_eq!(body(&take(&c, "q").await.unwrap()), i.to_string());
    }
    s.shutdown().await;
}

async fn futures_join_all<
    F: std::future::Future<Output = Result<u64, ferry_client::ClientError>>,
>(
    fs: Vec<F>,
) -> Vec<u64> {
    let mut set = Vec::new();
    // Poll all concurrently so the client pipelines them on one connection.
    let joined = futures::future::join_all(fs).await;
    for r in joined {
        set.push(r.unwrap());
    }
    set
}

#[tokio::test]
async fn subscription_with_a_selector_pushes_only_matching_messages() {
    selectors::subscription_pushes_only_matching_messages(TestServer::start().await).await;
}

#[tokio::test]
async fn long_poll_with_a_selector_waits_past_non_matching_arrivals() {
    selectors::long_poll_waits_past_non_matching_arrivals(TestServer::start().await).await;
}
