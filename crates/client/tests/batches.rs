//! Deliveries handed over in batches: `Subscription::next_batch` and `next` mixed keep the
//! broker's order across batches, auto ack grants credit for exactly what was taken, pushes that
//! overtake the subscribe reply are kept, the end of a subscription comes after the deliveries
//! before it, and client-ack deliveries left in a batch go back when the subscription is dropped.

mod fake;

use fake::*;
use ferry_client::{AckMode, Client, ClientError, Delivery, ErrorCode, Limits};
use ferry_protocol::{Request, Response};

fn numbers(ds: &[Delivery]) -> Vec<u64> {
    ds.iter().map(|d| d.message.id).collect()
}

/// Takes one batch of at most `max`, which must hold deliveries.
async fn batch(sub: &mut ferry_client::Subscription, max: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let n = within(sub.next_batch(&mut out, max))
        .await
        .expect("subscription ended")
        .expect("subscription failed");
    assert_eq!(n, out.len());
    numbers(&out)
}

#[tokio::test]
async fn batches_keep_order_and_auto_ack_credit_counts_what_was_taken() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(1, (1..=8).map(|n| deliver(1, 0, n))).await;
        peer.answer_ping().await;
        // 1, then 2-3 (3 taken: below half the prefetch), then 4-8: one grant of all 8.
        peer.expect_ok(credit(1, 8)).await;
        let (ping, req) = peer.expect().await;
        assert_eq!(req, Request::Ping);
        // The end of the subscription right behind two deliveries, in the same write.
        peer.write_all(&[
            deliver(1, 0, 9),
            deliver(1, 0, 10),
            closed(1, ErrorCode::QueueNotFound, "gone"),
            (ping, Response::Pong),
        ])
        .await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "batches", "q", AckMode::Auto, 8).await;
    within(client.ping()).await.unwrap(); // every delivery has arrived
    let first = within(sub.next()).await.unwrap().unwrap();
    assert_eq!(first.message.id, 1);
    assert_eq!(batch(&mut sub, 2).await, vec![2, 3]);
    assert_eq!(batch(&mut sub, 100).await, vec![4, 5, 6, 7, 8]);
    within(client.ping()).await.unwrap();
    assert_eq!(batch(&mut sub, 100).await, vec![9, 10]);
    let mut out = Vec::new();
    assert!(matches!(
        within(sub.next_batch(&mut out, 100)).await,
        Some(Err(ClientError::Server(_)))
    ));
    assert!(out.is_empty());
    assert!(within(sub.next_batch(&mut out, 100)).await.is_none());
    assert!(within(sub.next()).await.is_none());
    // Ended by the broker: nothing to cancel.
    assert_eq!(after_drop(sub, client, server).await, vec![]);
}

#[tokio::test]
async fn order_holds_across_many_batches_and_subscriptions() {
    const N: u64 = 1000;
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        for sub in [1, 2] {
            let (id, _) = peer.expect().await;
            peer.write(id, Response::Subscribed { subscription: sub })
                .await;
        }
        // Writes of various sizes, the two subscriptions interleaved.
        let mut n = 1;
        let mut size = 1;
        while n <= N {
            let frames: Vec<_> = (n..=(n + size - 1).min(N))
                .flat_map(|k| [deliver(1, k, k), deliver(2, N + k, k)])
                .collect();
            peer.write_all(&frames).await;
            n += size;
            size = size % 97 + 13;
        }
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "many")).await.unwrap();
    let mut a = within(client.subscribe(subscribe("a", AckMode::Client, 5000)))
        .await
        .unwrap();
    let mut b = within(client.subscribe(subscribe("b", AckMode::Client, 5000)))
        .await
        .unwrap();
    for sub in [&mut a, &mut b] {
        let mut seen = Vec::new();
        let mut max = 1;
        while (seen.len() as u64) < N {
            if max % 3 == 0 {
                seen.push(within(sub.next()).await.unwrap().unwrap().message.id);
            } else {
                let got = batch(sub, max).await;
                assert!(!got.is_empty() && got.len() <= max);
                seen.extend(got);
            }
            max = max % 50 + 1;
        }
        assert_eq!(seen, (1..=N).collect::<Vec<_>>());
    }
    drop(a);
    drop(b);
    drop(client);
    // Everything was read: the drops cancel and hand nothing back.
    assert_eq!(
        within(server).await.unwrap(),
        vec![
            Request::Cancel { subscription: 1 },
            Request::Cancel { subscription: 2 }
        ]
    );
}

#[tokio::test]
async fn early_pushes_come_first_in_a_batch() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        // Pushes that overtook the reply, and one behind it.
        peer.subscribed_overtaken(5, [deliver(5, 0, 1), deliver(5, 0, 2)], [deliver(5, 0, 3)])
            .await;
        peer.answer_ping().await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "early", "q", AckMode::Auto, 100).await;
    within(client.ping()).await.unwrap();
    // A batch of at most 0 is taken as at most 1: the call never returns empty-handed.
    assert_eq!(batch(&mut sub, 0).await, vec![1]);
    assert_eq!(batch(&mut sub, 100).await, vec![2, 3]);
    assert_eq!(
        after_drop(sub, client, server).await,
        vec![Request::Cancel { subscription: 5 }]
    );
}

#[tokio::test]
async fn client_ack_deliveries_left_in_a_batch_go_back_on_drop() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, (1..=4).map(|n| deliver(4, 19 + n, n)))
            .await;
        peer.answer_ping().await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "leftover", "q", AckMode::Client, 4).await;
    within(client.ping()).await.unwrap();
    assert_eq!(batch(&mut sub, 1).await, vec![1]);
    let second = within(sub.next()).await.unwrap().unwrap();
    assert_eq!(second.delivery_id, 21);
    assert_eq!(
        after_drop(sub, client, server).await,
        vec![Request::Cancel { subscription: 4 }, requeue(&[22, 23])]
    );
}
