//! `DeliverBatch` pushes (protocol version 5): the client hands their deliveries to the
//! subscription in order, byte-exact, amid `Deliver` frames and replies; a malformed batch
//! closes the connection with a protocol error.

mod fake;

use bytes::Bytes;
use fake::*;
use ferry_client::{AckMode, Client, ClientError, Limits};
use ferry_protocol::{PropertyValue, Request, Response};

/// Deliveries `ns` of one batch: alike but for their ids and bodies, the topic property on each.
fn batch(subscription: u64, ns: std::ops::Range<u64>) -> (u32, Response) {
    let deliveries = ns
        .map(|n| {
            let mut d = delivery(0, n);
            d.message.properties =
                vec![("ferry_topic".into(), PropertyValue::Str("t".into()))].into();
            d.message.body = Bytes::from(format!("record {n} {}", "x".repeat(n as usize)));
            d
        })
        .collect();
    (
        0,
        Response::DeliverBatch {
            subscription,
            deliveries,
        },
    )
}

#[tokio::test]
async fn batched_deliveries_arrive_in_order_byte_exact_amid_single_ones_and_replies() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert_eq!(
            req,
            Request::Subscribe(subscribe("t:r", AckMode::Auto, 1000))
        );
        peer.write_all(&[
            (id, Response::Subscribed { subscription: 4 }),
            batch(4, 1..4),
            deliver(4, 0, 4),
        ])
        .await;
        let (ping, _) = peer.expect().await;
        peer.write_all(&[batch(4, 5..300), (ping, Response::Pong), batch(4, 300..302)])
            .await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "reader")).await.unwrap();
    let mut sub = within(client.subscribe(subscribe("t:r", AckMode::Auto, 1000)))
        .await
        .unwrap();
    within(client.ping()).await.unwrap();
    let mut expected: Vec<_> = (1..302).map(|n| batch(4, n..n + 1)).collect();
    // The single `Deliver` (message 4) carries no property.
    expected[3] = (
        0,
        Response::Deliver {
            subscription: 4,
            delivery: delivery(0, 4),
        },
    );
    for want in expected {
        let got = within(sub.next()).await.unwrap().unwrap();
        let want = match want.1 {
            Response::DeliverBatch { deliveries, .. } => deliveries.into_iter().next().unwrap(),
            Response::Deliver { delivery, .. } => delivery,
            other => panic!("{other:?}"),
        };
        assert_eq!(got, want);
    }
    drop(sub);
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn a_batch_of_no_deliveries_closes_the_connection_with_a_protocol_error() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        peer.write(id, Response::Subscribed { subscription: 4 })
            .await;
        let (_ping, _) = peer.expect().await;
        // DeliverBatch on 4: queue 'q', sender 's', no properties, count 0.
        let mut raw = vec![0, 0, 0, 0, 0x43, 0x80, 0, 0, 0, 0];
        raw.extend([
            4, 0, 0, 0, 0, 0, 0, 0, 1, 0, b'q', 1, 0, b's', 0, 0, 0, 0, 0, 0,
        ]);
        let len = (raw.len() - 4) as u32;
        raw[..4].copy_from_slice(&len.to_le_bytes());
        peer.write_raw(&raw).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "victim")).await.unwrap();
    let mut sub = within(client.subscribe(subscribe("t:r", AckMode::Auto, 10)))
        .await
        .unwrap();
    let e = within(client.ping()).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    assert!(client.is_closed());
    assert!(matches!(within(sub.next()).await, Some(Err(_)) | None));
    drop(client);
    within(server).await.unwrap();
}
