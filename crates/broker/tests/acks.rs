//! Client-ack deliveries: ack, nack, lease expiry, disconnect; subscriptions with credit.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::*;
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{AckMode, ErrorCode, Order};
use ferry_testkit::TestServer;

#[tokio::test]
async fn ack_settles_and_acked_message_does_not_come_back() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    c.send(msg(&["q"], "x", 5)).await.unwrap();
    let d = take_client_ack(&c, "q").await.unwrap();
    assert_ne!(d.delivery_id, 0);
    let qs = c.list_queues().await.unwrap();
    assert_eq!((qs[0].ready, qs[0].in_flight), (0, 1));
    c.ack(&[d.delivery_id]).await.unwrap();
    let qs = c.list_queues().await.unwrap();
    assert_eq!((qs[0].ready, qs[0].in_flight), (0, 0));
    let e = expect_code(c.ack(&[d.delivery_id]).await, ErrorCode::NotFound);
    assert!(e.contains(&d.delivery_id.to_string()), "{e}");
    s.shutdown().await;
}

#[tokio::test]
async fn nack_returns_the_message_flagged_in_its_old_position() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    for b in ["first", "second"] {
        c.send(msg(&["q"], b, 5)).await.unwrap();
    }
    let d1 = take_client_ack(&c, "q").await.unwrap();
    assert_eq!(body(&d1), "first");
    assert!(!d1.message.redelivered());
    c.nack(&[d1.delivery_id], true).await.unwrap();
    let again = take_client_ack(&c, "q").await.unwrap();
    assert_eq!(body(&again), "first", "a nacked message keeps its place");
    assert!(again.message.redelivered());
    assert_eq!(again.message.delivery_count, 1);
    // nack without requeue drops it.
    c.nack(&[again.delivery_id], false).await.unwrap();
    assert_eq!(body(&take_client_ack(&c, "q").await.unwrap()), "second");
    assert!(take_client_ack(&c, "q").await.is_none());
    s.shutdown().await;
}

#[tokio::test]
async fn lease_expiry_returns_the_delivery_flagged() {
    let s = TestServer::start_with(|c| c.limits.lease_ms = 100).await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    c.send(msg(&["q"], "x", 5)).await.unwrap();
    let d = take_client_ack(&c, "q").await.unwrap();
    assert!(take_client_ack(&c, "q").await.is_none());
    // Wait for the lease to run out; the receive below long-polls until the expiry job
    // returns the message and wakes it.
    let back = c
        .receive(from_queue(
            "q",
            Order::Time,
            ferry_protocol::ReceiveMode::Take,
            AckMode::Client,
            10_000,
        ))
        .await
        .unwrap()
        .expect("the expired delivery comes back");
    assert_eq!(back.message.id, d.message.id);
    assert!(back.message.redelivered());
    // The old delivery id is no longer valid.
    expect_code(c.ack(&[d.delivery_id]).await, ErrorCode::NotFound);
    c.ack(&[back.delivery_id]).await.unwrap();
    s.shutdown().await;
}

#[tokio::test]
async fn disconnect_returns_unsettled_deliveries_flagged() {
    let s = TestServer::start().await;
    let a = s.client("alice").await;
    a.create_queue("q").await.unwrap();
    a.send(msg(&["q"], "x", 5)).await.unwrap();
    let d = take_client_ack(&a, "q").await.unwrap();
    a.disconnect().await.unwrap();
    let b = s.client("bob").await;
    let back = take_client_ack(&b, "q")
        .await
        .expect("returned on disconnect");
    assert_eq!(back.message.id, d.message.id);
    assert!(back.message.redelivered());
    s.shutdown().await;
}

#[tokio::test]
async fn nack_of_unknown_ids_is_not_found_and_known_ones_are_settled() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    c.send(msg(&["q"], "x", 5)).await.unwrap();
    let d = take_client_ack(&c, "q").await.unwrap();
    let e = expect_code(c.ack(&[d.delivery_id, 999_999]).await, ErrorCode::NotFound);
    assert!(e.contains("999999"), "{e}");
    let qs = c.list_queues().await.unwrap();
    assert_eq!(
        (qs[0].ready, qs[0].in_flight),
        (0, 0),
        "the known id was settled"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn another_session_cannot_ack_my_delivery() {
    let s = TestServer::start().await;
    let a = s.client("alice").await;
    let b = s.client("bob").await;
    a.create_queue("q").await.unwrap();
    a.send(msg(&["q"], "x", 5)).await.unwrap();
    let d = take_client_ack(&a, "q").await.unwrap();
    expect_code(b.ack(&[d.delivery_id]).await, ErrorCode::NotFound);
    a.ack(&[d.delivery_id]).await.unwrap();
    s.shutdown().await;
}

#[tokio::test]
async fn subscription_pushes_within_prefetch_and_continues_on_ack() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    let p = s.client("producer").await;
    c.create_queue("q").await.unwrap();
    for i in 0..10 {
        p.send(msg(&["q"], &i.to_string(), 5)).await.unwrap();
    }
    let mut sub = c
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Client,
            prefetch: 3,
            selector: String::new(),
        })
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(sub.next().await.unwrap().unwrap());
    }
    // With 3 unsettled, nothing more is pushed.
    assert!(tokio::time::timeout(Duration::from_millis(200), sub.next())
        .await
        .is_err());
    let qs = c.list_queues().await.unwrap();
    assert_eq!((qs[0].ready, qs[0].in_flight), (7, 3));
    let mut ids: Vec<u64> = got.iter().map(|d| d.delivery_id).collect();
    c.ack(&ids).await.unwrap();
    for _ in 3..10 {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        ids.push(d.delivery_id);
        got.push(d.clone());
        c.ack(&[d.delivery_id]).await.unwrap();
    }
    let bodies: Vec<String> = got.iter().map(body).collect();
    assert_eq!(bodies, (0..10).map(|i| i.to_string()).collect::<Vec<_>>());
    // New arrivals are pushed as they come.
    p.send(msg(&["q"], "late", 5)).await.unwrap();
    let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(body(&d), "late");
    s.shutdown().await;
}

#[tokio::test]
async fn auto_ack_subscription_gets_everything_with_client_credit() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let n = 1000;
    let batch: Vec<_> = (0..n).map(|i| msg(&["q"], &i.to_string(), 5)).collect();
    c.send_batch(batch).await.unwrap();
    let mut sub = c
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 16,
            selector: String::new(),
        })
        .await
        .unwrap();
    for i in 0..n {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(body(&d), i.to_string());
    }
    let qs = c.list_queues().await.unwrap();
    assert_eq!((qs[0].ready, qs[0].in_flight), (0, 0));
    s.shutdown().await;
}

#[tokio::test]
async fn deleting_a_queue_closes_its_subscriptions() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let mut sub = c
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 4,
            selector: String::new(),
        })
        .await
        .unwrap();
    c.delete_queue("q", false).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .unwrap();
    match end {
        Some(Err(e)) => assert_eq!(e.code(), Some(ErrorCode::QueueNotFound)),
        None => {}
        other => panic!("expected the subscription to end, got {other:?}"),
    }
    s.shutdown().await;
}

/// Reads `n` deliveries of `sub` with `next_batch`, at most `max` per call; client-ack
/// deliveries are acked batch by batch (which is what restores their credit).
async fn read_in_batches(
    c: &ferry_client::Client,
    sub: &mut ferry_client::Subscription,
    n: usize,
    max: usize,
) -> Vec<ferry_protocol::Delivery> {
    let mut all = Vec::new();
    while all.len() < n {
        let mut batch = Vec::new();
        let got = tokio::time::timeout(Duration::from_secs(20), sub.next_batch(&mut batch, max))
            .await
            .unwrap_or_else(|_| panic!("only {} of {n} deliveries came", all.len()))
            .expect("subscription ended")
            .expect("deliveries");
        assert_eq!(got, batch.len());
        assert!(
            (1..=max).contains(&got),
            "{got} deliveries for at most {max}"
        );
        let ids: Vec<u64> = batch
            .iter()
            .map(|d| d.delivery_id)
            .filter(|&id| id != 0)
            .collect();
        if !ids.is_empty() {
            c.ack(&ids).await.unwrap();
        }
        all.extend(batch);
    }
    all
}

#[tokio::test]
async fn a_subscription_read_in_batches_gets_every_message_once_in_order() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    let p = s.client("producer").await;
    c.create_queue("auto").await.unwrap();
    c.create_queue("client").await.unwrap();
    let n = 3000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        for q in ["auto", "client"] {
            let msgs = chunk.iter().map(|i| msg(&[q], &i.to_string(), 5)).collect();
            for r in p.send_batch(msgs).await.unwrap() {
                r.unwrap();
            }
        }
    }
    let expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    // A prefetch far below the backlog: the run only completes if credit keeps coming back,
    // granted by the subscription itself (auto ack) or by the acks (client ack).
    for (queue, ack) in [("auto", AckMode::Auto), ("client", AckMode::Client)] {
        let mut sub = c
            .subscribe(Subscribe {
                queue: queue.into(),
                order: Order::Time,
                ack,
                prefetch: 64,
                selector: String::new(),
            })
            .await
            .unwrap();
        let got = read_in_batches(&c, &mut sub, n, 100).await;
        let bodies: Vec<String> = got.iter().map(body).collect();
        assert_eq!(bodies, expected, "{queue}");
        assert!(got.iter().all(|d| !d.message.redelivered()), "{queue}");
        // Nothing more comes, nothing is left behind.
        let mut more = Vec::new();
        assert!(
            tokio::time::timeout(Duration::from_millis(200), sub.next_batch(&mut more, 10))
                .await
                .is_err(),
            "{queue}: {} more",
            more.len()
        );
        sub.cancel().await;
    }
    let qs = c.list_queues().await.unwrap();
    assert!(
        qs.iter().all(|q| q.ready == 0 && q.in_flight == 0),
        "{qs:?}"
    );
    s.shutdown().await;
}
