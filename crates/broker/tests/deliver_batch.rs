//! `DeliverBatch` pushes: a version 5 session gets a run of deliveries (a publish batch handed
//! straight to its subscriber, a push of a queued backlog) as batch frames carrying exactly
//! the deliveries, in order; a version 4 session gets the same deliveries as `Deliver` frames;
//! a version 7 session gets a publish batch handed straight to it as `DeliverRun` frames.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::Bytes;
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::topic::TOPIC_PROPERTY;
use ferry_protocol::{
    AckMode, Delivery, FrameKind, OutgoingMessage, PropertyValue, Request, Response,
};
use ferry_testkit::raw::RawConn;
use ferry_testkit::TestServer;

/// Message `i`'s body: distinct lengths and bytes, so that a body cut or swapped shows.
fn body(i: usize) -> Bytes {
    Bytes::from((0..100 + i).map(|j| (i * 7 + j) as u8).collect::<Vec<u8>>())
}

/// A raw session of protocol `version` named `client`, subscribed (auto ack) to topic
/// `ticks` as `name`.
async fn subscriber(s: &TestServer, version: u16, client: &str, name: &str) -> RawConn {
    let (mut raw, reply) = RawConn::connect_version(&s.addr_string(), client, version)
        .await
        .unwrap();
    let Response::Connected(c) = reply else {
        panic!("not connected: {reply:?}")
    };
    assert_eq!(c.version, version, "the session runs the client's version");
    raw.send(
        2,
        &Request::SubscribeTopic(
            SubscribeTopic::new("ticks")
                .durable(name)
                .ack(AckMode::Auto)
                .prefetch(10_000),
        ),
    )
    .await
    .unwrap();
    let (_, reply) = raw.recv().await.unwrap();
    assert!(
        matches!(reply, Response::TopicSubscribed { .. }),
        "{reply:?}"
    );
    raw
}

/// Publishes messages `range` to `ticks` in one batch.
async fn publish(p: &ferry_client::Client, range: std::ops::Range<usize>, persistent: bool) {
    let msgs = range
        .map(|i| {
            let mut m = OutgoingMessage::to_topic("ticks", body(i));
            m.persistent = persistent;
            m
        })
        .collect();
    for r in p.send_batch(msgs).await.unwrap() {
        r.unwrap();
    }
}

/// Reads pushes until `n` deliveries came; returns them and the kinds of the frames.
async fn deliveries(raw: &mut RawConn, n: usize) -> (Vec<Delivery>, Vec<(FrameKind, usize)>) {
    let (mut got, mut frames) = (Vec::new(), Vec::new());
    while got.len() < n {
        let (rid, resp) = raw.recv().await.unwrap();
        assert_eq!(rid, 0, "a push");
        match resp {
            Response::Deliver { delivery, .. } => {
                frames.push((FrameKind::Deliver, 1));
                got.push(delivery);
            }
            Response::DeliverBatch { deliveries, .. } => {
                frames.push((FrameKind::DeliverBatch, deliveries.len()));
                got.extend(deliveries);
            }
            Response::DeliverRun { deliveries, .. } => {
                frames.push((FrameKind::DeliverRun, deliveries.len()));
                got.extend(deliveries);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    (got, frames)
}

/// Each of `got` is message `first + i` of a publish to `ticks` by `pub`, byte-exact.
fn assert_published(got: &[Delivery], first: usize) {
    for (i, d) in got.iter().enumerate() {
        let m = &d.message;
        assert_eq!(
            m.body,
            body(first + i),
            "message {} out of order or changed",
            first + i
        );
        assert_eq!(&*m.sender, "pub");
        assert_eq!(&*m.queue, "ticks:r");
        assert_eq!(
            m.properties,
            vec![(
                TOPIC_PROPERTY.to_string(),
                PropertyValue::Str("ticks".into())
            )]
        );
        assert_eq!(d.delivery_id, 0, "auto ack");
    }
}

#[tokio::test]
async fn a_version_5_subscriber_gets_a_non_persistent_publish_batch_as_batch_frames() {
    let s = TestServer::start().await;
    let p = s.client("pub").await;
    p.create_topic("ticks").await.unwrap();
    let mut raw = subscriber(&s, 5, "reader", "r").await;
    publish(&p, 0..300, false).await;
    publish(&p, 300..310, false).await;
    let (got, frames) = deliveries(&mut raw, 310).await;
    assert_published(&got, 0);
    assert!(
        frames.iter().all(|(k, _)| *k == FrameKind::DeliverBatch),
        "{frames:?}"
    );
    // Both publishes delivered directly, each as one batch frame (300 x ~280 bytes is more
    // than a 64 KiB frame: then a few).
    assert!(frames.len() <= 4, "{frames:?}");
    assert!(raw
        .recv_within(std::time::Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    s.shutdown().await;
}

#[tokio::test]
async fn a_version_7_subscriber_gets_a_published_batch_as_run_frames_a_version_6_as_batches() {
    let s = TestServer::start().await;
    let p = s.client("pub").await;
    p.create_topic("ticks").await.unwrap();
    let mut runs = subscriber(&s, 7, "reader7", "r").await;
    let mut batches = subscriber(&s, 6, "reader6", "r6").await;
    let publish_bodies = |range: std::ops::Range<usize>| {
        ferry_protocol::PublishBatch::new("ticks", range.map(body).collect::<Vec<_>>())
            .non_persistent()
    };
    for range in [0..300, 300..310] {
        for r in p.publish_batch(publish_bodies(range)).await.unwrap() {
            r.unwrap();
        }
    }
    let (got, frames) = deliveries(&mut runs, 310).await;
    assert_published(&got, 0);
    assert!(
        frames.iter().all(|(k, _)| *k == FrameKind::DeliverRun),
        "{frames:?}"
    );
    let ids: Vec<u64> = got.iter().map(|d| d.message.id).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    let (got6, frames) = deliveries(&mut batches, 310).await;
    assert!(
        frames.iter().all(|(k, _)| *k == FrameKind::DeliverBatch),
        "{frames:?}"
    );
    let ids6: Vec<u64> = got6.iter().map(|d| d.message.id).collect();
    assert_eq!(ids6, ids, "the same messages either way");
    s.shutdown().await;
}

#[tokio::test]
async fn a_version_5_subscriber_gets_a_queued_backlog_as_batch_frames() {
    let s = TestServer::start().await;
    let p = s.client("pub").await;
    p.create_topic("ticks").await.unwrap();
    // The durable subscription exists before the publishes; its consumer comes after them,
    // so the push task hands out the queued backlog.
    let mut early = subscriber(&s, 5, "early", "r").await;
    early.send(3, &Request::Disconnect).await.unwrap();
    assert_eq!(early.recv().await.unwrap(), (3, Response::Ok));
    assert!(early.closed_by_peer().await);
    publish(&p, 0..200, true).await;
    let mut raw = subscriber(&s, 5, "reader", "r").await;
    let (got, frames) = deliveries(&mut raw, 200).await;
    assert_published(&got, 0);
    assert!(
        frames
            .iter()
            .any(|(k, n)| *k == FrameKind::DeliverBatch && *n > 1),
        "{frames:?}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_version_4_subscriber_gets_deliver_frames_only() {
    let s = TestServer::start().await;
    let p = s.client("pub").await;
    p.create_topic("ticks").await.unwrap();
    let mut raw = subscriber(&s, 4, "reader", "r").await;
    publish(&p, 0..300, false).await;
    let (got, frames) = deliveries(&mut raw, 300).await;
    assert_published(&got, 0);
    assert!(
        frames.iter().all(|(k, _)| *k == FrameKind::Deliver),
        "{frames:?}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn pushes_and_replies_sent_to_the_broker_are_unknown_requests_and_the_session_goes_on() {
    let s = TestServer::start().await;
    let (mut raw, _) = RawConn::connect(&s.addr_string(), "hostile").await.unwrap();
    let deliveries = vec![Delivery {
        delivery_id: 0,
        message: ferry_protocol::Message {
            id: 1,
            queue: "q".into(),
            sender: "s".into(),
            receiver: None,
            priority: 4,
            context: 0,
            properties: Default::default(),
            body: body(1),
            created_at: 0,
            delivery_count: 0,
            expires_at: 0,
        },
    }];
    // Well-formed pushes and replies sent as if they were requests.
    let kinds = [
        Response::DeliverBatch {
            subscription: 1,
            deliveries: deliveries.clone(),
        },
        Response::DeliverRun {
            subscription: 1,
            deliveries,
        },
        Response::PublishedRun {
            first_id: 1,
            count: 3,
        },
    ];
    for (rid, frame_of) in (5..).zip(kinds) {
        let mut frame = bytes::BytesMut::new();
        frame_of.encode(rid, &mut frame);
        raw.send_bytes(&frame).await.unwrap();
        let (got, reply) = raw.recv().await.unwrap();
        assert_eq!(got, rid);
        let Response::Error(e) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(
            e.code,
            ferry_protocol::ErrorCode::UnknownRequest,
            "{frame_of:?}"
        );
    }
    raw.send(9, &Request::Ping).await.unwrap();
    assert_eq!(raw.recv().await.unwrap(), (9, Response::Pong));
    s.shutdown().await;
}
