//! `Subscription::next_deliveries`: pushed deliveries handed over as the reader decoded them,
//! read in place; the same deliveries, in the same order, as `next` yields, mixed with it
//! freely; consumed (credit) when handed over; those never handed over go back on drop.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod fake;

use bytes::Bytes;
use fake::*;
use ferry_client::{AckMode, Delivery, DeliveryBatch, Limits};
use ferry_protocol::{PropertyValue, Response};

/// Deliveries `ns` of one `DeliverBatch` on `subscription`, client-ack ids `100 + n`, the
/// topic property on each, bodies of their own lengths.
fn batch(subscription: u64, ns: std::ops::Range<u64>) -> (u32, Response) {
    let deliveries = ns.map(batched).collect();
    (
        0,
        Response::DeliverBatch {
            subscription,
            deliveries,
        },
    )
}

fn batched(n: u64) -> Delivery {
    let mut d = delivery(100 + n, n);
    d.message.properties = vec![("ferry_topic".into(), PropertyValue::Str("t".into()))].into();
    d.message.body = Bytes::from(format!("record {n} {}", "x".repeat(n as usize)));
    d
}

#[tokio::test]
async fn batches_hold_what_next_would_yield_in_order_amid_single_deliveries() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, []).await;
        peer.write_all(&[batch(4, 1..4), deliver(4, 104, 4), batch(4, 5..300)])
            .await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "r", "t:r", AckMode::Client, 1000).await;
    let mut want: Vec<Delivery> = (1..300)
        .map(|n| if n == 4 { delivery(104, 4) } else { batched(n) })
        .collect();
    // `next` takes the first delivery out of its batch; the batch hands over the rest.
    let first = within(sub.next()).await.unwrap().unwrap();
    assert_eq!(first, want.remove(0));
    let mut got_views = Vec::new();
    let mut got_owned = Vec::new();
    while got_owned.len() < want.len() {
        let b: DeliveryBatch = within(sub.next_deliveries()).await.unwrap().unwrap();
        assert!(!b.is_empty());
        assert_eq!(b.len(), b.iter().len());
        assert_eq!(
            b.delivery_ids().collect::<Vec<_>>(),
            b.iter().map(|d| d.delivery_id).collect::<Vec<_>>()
        );
        got_views.extend(b.iter().map(|d| {
            (
                d.delivery_id,
                d.body.to_vec(),
                d.queue.to_string(),
                d.properties.len(),
            )
        }));
        got_owned.extend(b);
    }
    assert_eq!(got_owned, want);
    let want_views: Vec<_> = want
        .iter()
        .map(Delivery::view)
        .map(|d| {
            (
                d.delivery_id,
                d.body.to_vec(),
                d.queue.to_string(),
                d.properties.len(),
            )
        })
        .collect();
    assert_eq!(got_views, want_views);
    let requests = after_drop(sub, client, server).await;
    // Everything was handed over: nothing goes back.
    assert!(
        !requests
            .iter()
            .any(|r| matches!(r, ferry_protocol::Request::Nack { .. })),
        "{requests:?}"
    );
}

#[tokio::test]
async fn a_batch_lends_each_delivery_equal_to_the_owned_one() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, []).await;
        peer.write_all(&[batch(4, 1..40)]).await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "r", "t:r", AckMode::Client, 100).await;
    let mut seen = 0;
    while seen < 39 {
        let b = within(sub.next_deliveries()).await.unwrap().unwrap();
        let owned: Vec<Delivery> = b.clone().into_iter().collect();
        assert_eq!(owned.len(), b.len());
        for (lent, own) in b.iter().zip(&owned) {
            assert_eq!(lent, own.view());
        }
        assert_eq!(b, b.clone());
        seen += b.len();
    }
    after_drop(sub, client, server).await;
}

#[tokio::test]
async fn a_handed_over_batch_counts_as_consumed_for_credit() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, []).await;
        peer.write_all(&[batch(4, 1..7)]).await;
        // Prefetch 10, auto ack: 6 handed over at once earn a credit of 6.
        peer.expect_ok(credit(4, 6)).await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "r", "t:r", AckMode::Auto, 10).await;
    let mut n = 0;
    while n < 6 {
        n += within(sub.next_deliveries()).await.unwrap().unwrap().len();
    }
    after_drop(sub, client, server).await;
}

#[tokio::test]
async fn the_end_comes_after_the_batches_before_it_and_then_none() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, []).await;
        peer.write_all(&[
            batch(4, 1..3),
            closed(4, ferry_client::ErrorCode::QueueNotFound, "gone"),
        ])
        .await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "r", "t:r", AckMode::Client, 10).await;
    let b = within(sub.next_deliveries()).await.unwrap().unwrap();
    assert_eq!(b.delivery_ids().collect::<Vec<_>>(), [101, 102]);
    assert!(matches!(
        within(sub.next_deliveries()).await,
        Some(Err(ferry_client::ClientError::Server(_)))
    ));
    assert!(within(sub.next_deliveries()).await.is_none());
    after_drop(sub, client, server).await;
}

#[tokio::test]
async fn deliveries_left_in_a_batch_go_back_when_the_subscription_is_dropped() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, []).await;
        peer.write_all(&[batch(4, 1..5)]).await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "r", "t:r", AckMode::Client, 10).await;
    // One taken by `next`: the other three of its batch were never handed over.
    let first = within(sub.next()).await.unwrap().unwrap();
    assert_eq!(first.delivery_id, 101);
    let requests = after_drop(sub, client, server).await;
    assert!(
        requests.contains(&requeue(&[102, 103, 104])),
        "{requests:?}"
    );
}
