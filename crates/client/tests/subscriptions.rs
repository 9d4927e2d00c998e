//! Pushed deliveries: routed by subscription id amid replies, credit granted back for auto ack,
//! settling (not credit) for client ack, the end of a subscription, cancel and drop.

mod fake;

use fake::*;
use ferry_client::{AckMode, Client, ClientError, ErrorCode, Limits};
use ferry_protocol::{Request, Response};

/// The message number of the next item, which must be a delivery.
async fn next_n(sub: &mut ferry_client::Subscription) -> u64 {
    within(sub.next())
        .await
        .expect("stream ended")
        .expect("error item")
        .message
        .id
}

#[tokio::test]
async fn pushes_are_routed_by_subscription_amid_replies() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert_eq!(req, Request::Subscribe(subscribe("a", AckMode::Auto, 100)));
        // A delivery right behind the reply, in the same write: the client must already route it.
        peer.write_all(&[
            (id, Response::Subscribed { subscription: 5 }),
            deliver(5, 0, 1),
        ])
        .await;
        let (id, req) = peer.expect().await;
        assert_eq!(req, Request::Subscribe(subscribe("b", AckMode::Auto, 100)));
        peer.write(id, Response::Subscribed { subscription: 6 })
            .await;
        let (ping, req) = peer.expect().await;
        assert_eq!(req, Request::Ping);
        peer.write_all(&[
            deliver(6, 0, 2),
            deliver(5, 0, 3),
            (ping, Response::Pong),
            closed(5, ErrorCode::QueueNotFound, "queue 'a' was deleted"),
            deliver(6, 0, 4),
        ])
        .await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "consumer")).await.unwrap();
    let mut a = within(client.subscribe(subscribe("a", AckMode::Auto, 100)))
        .await
        .unwrap();
    let mut b = within(client.subscribe(subscribe("b", AckMode::Auto, 100)))
        .await
        .unwrap();
    assert_eq!((a.id(), b.id()), (5, 6));
    within(client.ping()).await.unwrap();
    assert_eq!(next_n(&mut a).await, 1);
    assert_eq!(next_n(&mut a).await, 3);
    match within(a.next()).await {
        Some(Err(e)) => {
            assert_eq!(e.code(), Some(ErrorCode::QueueNotFound));
            assert!(e.to_string().contains("queue 'a' was deleted"), "{e}");
        }
        other => panic!("expected the close error, got {other:?}"),
    }
    assert!(
        within(a.next()).await.is_none(),
        "stream ends after its error"
    );
    assert!(within(a.next()).await.is_none());
    assert_eq!(next_n(&mut b).await, 2);
    assert_eq!(next_n(&mut b).await, 4);
    a.cancel().await; // already closed by the broker: no request
    drop(b); // cancels without waiting
    drop(client);
    let rest = within(server).await.unwrap();
    assert_eq!(rest, vec![Request::Cancel { subscription: 6 }]);
}

#[tokio::test]
async fn subscription_is_a_stream() {
    use futures_core::Stream;
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(1, [deliver(1, 0, 7)]).await;
        peer.drain().await;
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "streamer", "q", AckMode::Auto, 10).await;
    fn assert_stream<S: Stream<Item = Result<ferry_client::Delivery, ClientError>> + Unpin>(_: &S) {
    }
    assert_stream(&sub);
    let item = within(std::future::poll_fn(|cx| {
        std::pin::Pin::new(&mut sub).poll_next(cx)
    }))
    .await;
    assert_eq!(item.unwrap().unwrap().message.id, 7);
    after_drop(sub, client, server).await;
}

#[tokio::test]
async fn auto_ack_grants_credit_as_deliveries_are_consumed() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let req = peer.subscribed(1, (1..=4).map(|n| deliver(1, 0, n))).await;
        assert_eq!(req, Request::Subscribe(subscribe("q", AckMode::Auto, 4)));
        // The application takes 4: credit comes back in two grants of half the prefetch.
        for _ in 0..2 {
            peer.expect_ok(credit(1, 2)).await;
        }
        // Spend the new credit.
        peer.write_all(&[deliver(1, 0, 5), deliver(1, 0, 6)]).await;
        peer.expect_ok(credit(1, 2)).await;
        peer.expect_ok(Request::Cancel { subscription: 1 }).await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "credit", "q", AckMode::Auto, 4).await;
    for n in 1..=6 {
        assert_eq!(next_n(&mut sub).await, n);
    }
    within(sub.try_cancel()).await.unwrap();
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn client_ack_subscriptions_are_credited_by_settling_not_by_credit_frames() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(3, [deliver(3, 10, 1), deliver(3, 11, 2)])
            .await;
        // The next request is the ack: no credit frame came before it.
        peer.expect_ok(Request::Ack { ids: vec![10, 11] }).await;
        peer.expect_ok(Request::Cancel { subscription: 3 }).await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "acker", "q", AckMode::Client, 2).await;
    let a = within(sub.next()).await.unwrap().unwrap();
    let b = within(sub.next()).await.unwrap().unwrap();
    within(sub.ack(&[a.delivery_id, b.delivery_id]))
        .await
        .unwrap();
    within(sub.try_cancel()).await.unwrap();
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn dropping_a_subscription_cancels_it_and_returns_unread_client_ack_deliveries() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(4, [deliver(4, 20, 1), deliver(4, 21, 2)])
            .await;
        peer.answer_ping().await;
        peer.drain().await
    })
    .await;
    let (client, sub) = subscribed_client(&addr, "dropper", "q", AckMode::Client, 2).await;
    within(client.ping()).await.unwrap(); // both deliveries have arrived behind the reply
    assert_eq!(
        after_drop(sub, client, server).await,
        vec![Request::Cancel { subscription: 4 }, requeue(&[20, 21])]
    );
}

#[tokio::test]
async fn deliveries_for_unknown_subscriptions_are_handed_back() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert_eq!(req, Request::Ping);
        // Pushes for a subscription this client does not have: the client-ack one goes back.
        peer.write_all(&[deliver(99, 42, 1), deliver(99, 0, 2), (id, Response::Pong)])
            .await;
        peer.expect_ok(requeue(&[42])).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "stray")).await.unwrap();
    within(client.ping()).await.unwrap();
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn connection_loss_ends_subscriptions_with_closed() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.subscribed(1, [deliver(1, 0, 1)]).await;
        // and the connection drops
    })
    .await;
    let (_client, mut sub) = subscribed_client(&addr, "lost", "q", AckMode::Auto, 10).await;
    within(server).await.unwrap();
    // What arrived before the loss is still delivered, then the error, then the end.
    assert_eq!(next_n(&mut sub).await, 1);
    assert!(matches!(
        within(sub.next()).await,
        Some(Err(ClientError::Closed))
    ));
    assert!(within(sub.next()).await.is_none());
}

#[tokio::test]
async fn pushes_that_overtake_the_subscribe_reply_are_kept() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        // Pushes that outran the reply, among them a client-ack push for a subscription
        // nobody asked for.
        peer.subscribed_overtaken(
            5,
            [deliver(5, 0, 1), deliver(8, 31, 0), deliver(5, 0, 2)],
            [deliver(5, 0, 3)],
        )
        .await;
        peer.expect_ok(requeue(&[31])).await;
        // A subscription the broker ended before its reply went out.
        peer.subscribed_overtaken(6, [closed(6, ErrorCode::QueueNotFound, "gone")], [])
            .await;
        peer.drain().await
    })
    .await;
    let (client, mut sub) = subscribed_client(&addr, "early", "q", AckMode::Auto, 100).await;
    for n in 1..=3 {
        assert_eq!(next_n(&mut sub).await, n);
    }
    let mut closed = within(client.subscribe(subscribe("r", AckMode::Auto, 100)))
        .await
        .unwrap();
    assert!(matches!(
        within(closed.next()).await,
        Some(Err(ClientError::Server(_)))
    ));
    assert!(within(closed.next()).await.is_none());
    drop(closed); // ended by the broker: nothing to cancel
    assert_eq!(
        after_drop(sub, client, server).await,
        vec![Request::Cancel { subscription: 5 }]
    );
}
