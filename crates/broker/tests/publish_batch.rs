//! `PublishBatch` requests (protocol version 6): every body becomes a message of its own with
//! the batch's shared fields, delivered exactly as the `SendBatch` of those publishes would be;
//! bodies fail on their own, a batch over `max_batch` fails whole, older sessions get
//! `UnknownRequest`, and malformed batches close the connection. A version 7 session whose
//! every body went in gets the results as one `PublishedRun`.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ferry_client::SubscribeTopic;
use ferry_protocol::topic::TOPIC_PROPERTY;
use ferry_protocol::AckMode;
use ferry_protocol::{
    ErrorCode, FrameKind, PropertyValue, PublishBatch, Request, Response, HEADER_LEN,
};
use ferry_testkit::raw::RawConn;
use ferry_testkit::TestServer;

/// Body `i`: distinct lengths and bytes, so that a body cut or swapped shows.
fn body(i: usize) -> Bytes {
    Bytes::from(
        (0..100 + i % 50)
            .map(|j| (i * 7 + j) as u8)
            .collect::<Vec<u8>>(),
    )
}

/// Messages ready or in flight on subscription `name` of `topic`.
async fn held(c: &ferry_client::Client, topic: &str, name: &str) -> u64 {
    let topics = c.list_topics().await.unwrap();
    let t = topics.iter().find(|t| t.name == topic).unwrap();
    let s = t.subscriptions.iter().find(|s| s.name == name).unwrap();
    s.ready + s.in_flight
}

#[tokio::test]
async fn a_publish_batch_is_delivered_like_the_publishes_it_stands_for() {
    let s = TestServer::start().await;
    let c = s.client("subscriber").await;
    c.create_topic("ticks").await.unwrap();
    let mut matching = c
        .subscribe_topic(
            SubscribeTopic::new("ticks")
                .durable("v")
                .with_selector("n = 'v' AND JMSPriority = 7"),
        )
        .await
        .unwrap();
    c.ensure_subscription(
        SubscribeTopic::new("ticks")
            .durable("w")
            .with_selector("n = 'w'"),
    )
    .await
    .unwrap();
    let p = s.client("publisher").await;
    let n = 300;
    let batch = PublishBatch {
        priority: 7,
        ttl_ms: 60_000,
        properties: vec![("n".into(), PropertyValue::Str("v".into()))].into(),
        ..PublishBatch::new("ticks", (0..n).map(body).collect::<Vec<_>>()).non_persistent()
    };
    let ids: Vec<u64> = p
        .publish_batch(batch)
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ids.len(), n);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for (i, id) in ids.iter().enumerate() {
        let d = tokio::time::timeout(Duration::from_secs(10), matching.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let m = d.message;
        assert_eq!((m.id, &m.body), (*id, &body(i)), "message {i}");
        assert_eq!(&*m.sender, "publisher");
        assert_eq!(m.priority, 7);
        assert_eq!(m.context, 0);
        assert_eq!(m.receiver, None);
        assert_eq!(m.expires_at, m.created_at + 60_000);
        assert_eq!(
            m.properties,
            vec![
                ("n".into(), PropertyValue::Str("v".into())),
                (TOPIC_PROPERTY.into(), PropertyValue::Str("ticks".into())),
            ]
        );
        matching.ack(&[d.delivery_id]).await.unwrap();
    }
    assert_eq!(held(&c, "ticks", "w").await, 0, "the selector matched none");
    s.shutdown().await;
}

#[tokio::test]
async fn a_publish_batch_in_a_transaction_takes_effect_at_the_commit() {
    let s = TestServer::start().await;
    let c = s.client("c").await;
    c.create_topic("ticks").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("ticks").durable("d"))
        .await
        .unwrap();
    c.begin().await.unwrap();
    let results = c
        .publish_batch(PublishBatch::new("ticks", vec![body(1), body(2)]))
        .await
        .unwrap();
    assert!(results.iter().all(|r| matches!(r, Ok(0))), "{results:?}");
    assert_eq!(held(&c, "ticks", "d").await, 0, "held until the commit");
    c.rollback().await.unwrap();
    assert_eq!(held(&c, "ticks", "d").await, 0, "rolled back");
    c.begin().await.unwrap();
    c.publish_batch(PublishBatch::new("ticks", vec![body(3), body(4), body(5)]))
        .await
        .unwrap();
    assert_eq!(c.commit().await.unwrap().len(), 3);
    assert_eq!(held(&c, "ticks", "d").await, 3);
    s.shutdown().await;
}

/// A raw session of the current version, with topic `ticks` and its durable subscription `d`.
async fn raw_with_topic(s: &TestServer) -> (RawConn, ferry_client::Client) {
    let c = s.client("owner").await;
    c.create_topic("ticks").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("ticks").durable("d"))
        .await
        .unwrap();
    let (raw, reply) = RawConn::connect(&s.addr_string(), "raw").await.unwrap();
    assert!(matches!(reply, Response::Connected(_)), "{reply:?}");
    (raw, c)
}

/// The reply to `req` sent as request 7.
async fn ask(raw: &mut RawConn, req: &Request) -> Response {
    raw.send(7, req).await.unwrap();
    let (rid, reply) = raw.recv().await.unwrap();
    assert_eq!(rid, 7);
    reply
}

#[tokio::test]
async fn each_body_fails_alone_and_a_batch_over_max_batch_fails_whole() {
    let s = TestServer::start_with(|c| {
        c.limits.max_body_bytes = 10;
        c.limits.max_batch = 4;
    })
    .await;
    let (mut raw, c) = raw_with_topic(&s).await;
    let bodies = vec![
        Bytes::from_static(b"first"),
        Bytes::from_static(b"eleven byte"),
        Bytes::from_static(b"third"),
    ];
    let Response::BatchSent(results) = ask(
        &mut raw,
        &Request::PublishBatch(PublishBatch::new("ticks", bodies)),
    )
    .await
    else {
        panic!("not BatchSent")
    };
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(results[1].as_ref().unwrap_err().code, ErrorCode::TooLarge);
    assert_eq!(held(&c, "ticks", "d").await, 2);
    // Five bodies against a max_batch of 4: refused whole, nothing stored.
    let five = PublishBatch::new("ticks", vec![Bytes::from_static(b"x"); 5]);
    let Response::Error(e) = ask(&mut raw, &Request::PublishBatch(five)).await else {
        panic!("not an error")
    };
    assert_eq!(e.code, ErrorCode::TooLarge, "{e:?}");
    // Shared fields no message may carry: every body gets the error.
    let bad = PublishBatch {
        priority: 0,
        ..PublishBatch::new("ticks", vec![Bytes::from_static(b"x"); 2])
    };
    let Response::BatchSent(results) = ask(&mut raw, &Request::PublishBatch(bad)).await else {
        panic!("not BatchSent")
    };
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().unwrap_err().code == ErrorCode::InvalidArgument),
        "{results:?}"
    );
    // A topic that does not exist: every body `TopicNotFound`.
    let missing = PublishBatch::new("nowhere", vec![Bytes::from_static(b"x"); 2]);
    let Response::BatchSent(results) = ask(&mut raw, &Request::PublishBatch(missing)).await else {
        panic!("not BatchSent")
    };
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().unwrap_err().code == ErrorCode::TopicNotFound),
        "{results:?}"
    );
    assert_eq!(held(&c, "ticks", "d").await, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn a_version_7_session_gets_a_published_run_when_every_body_went_in_a_version_6_batch_sent() {
    let s = TestServer::start().await;
    let (mut raw, c) = raw_with_topic(&s).await;
    let bodies: Vec<Bytes> = (0..5).map(body).collect();
    let reply = ask(
        &mut raw,
        &Request::PublishBatch(PublishBatch::new("ticks", bodies.clone())),
    )
    .await;
    let Response::PublishedRun { first_id, count } = reply else {
        panic!("not PublishedRun: {reply:?}")
    };
    assert_eq!(count, 5);
    assert_eq!(held(&c, "ticks", "d").await, 5);
    // The ids it stands for are the messages' own.
    let mut sub = c
        .subscribe_topic(SubscribeTopic::new("ticks").durable("d"))
        .await
        .unwrap();
    for (i, want) in (first_id..first_id + 5).enumerate() {
        let d = sub.next().await.unwrap().unwrap();
        assert_eq!((d.message.id, &d.message.body), (want, &body(i)));
        c.ack(&[d.delivery_id]).await.unwrap();
    }

    // A version 6 session gets one result per body, the same way.
    let (mut old, reply) = RawConn::connect_version(&s.addr_string(), "six", 6)
        .await
        .unwrap();
    assert!(matches!(reply, Response::Connected(ref c) if c.version == 6));
    let reply = ask(
        &mut old,
        &Request::PublishBatch(PublishBatch::new("ticks", bodies)),
    )
    .await;
    let Response::BatchSent(results) = reply else {
        panic!("not BatchSent: {reply:?}")
    };
    let ids: Vec<u64> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(ids, (first_id + 5..first_id + 10).collect::<Vec<_>>());
    s.shutdown().await;
}

#[tokio::test]
async fn a_version_5_session_gets_unknown_request_and_goes_on() {
    let s = TestServer::start().await;
    let c = s.client("owner").await;
    c.create_topic("ticks").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("ticks").durable("d"))
        .await
        .unwrap();
    let (mut raw, reply) = RawConn::connect_version(&s.addr_string(), "old", 5)
        .await
        .unwrap();
    assert!(
        matches!(reply, Response::Connected(ref c) if c.version == 5),
        "{reply:?}"
    );
    let batch = PublishBatch::new("ticks", vec![Bytes::from_static(b"x")]);
    let Response::Error(e) = ask(&mut raw, &Request::PublishBatch(batch)).await else {
        panic!("not an error")
    };
    assert_eq!(e.code, ErrorCode::UnknownRequest, "{e:?}");
    raw.send(8, &Request::Ping).await.unwrap();
    assert_eq!(raw.recv().await.unwrap(), (8, Response::Pong));
    assert_eq!(held(&c, "ticks", "d").await, 0, "nothing published");
    s.shutdown().await;
}

/// A `PublishBatch` frame to `ticks` with `props` (encoded, count included) and `count` in its
/// count field followed by `bodies` empty bodies.
fn raw_batch(props: &[u8], count: u32, bodies: usize) -> Vec<u8> {
    let mut payload = BytesMut::new();
    payload.put_slice(&[2, 0, b't', b'i']); // the topic 'ti' (a name, not 'ticks')
    payload.put_u8(5);
    payload.put_slice(&[0; 17]);
    payload.put_slice(props);
    payload.put_u32_le(count);
    payload.put_bytes(0, 4 * bodies);
    let mut frame = BytesMut::new();
    frame.put_u32_le((payload.len() + HEADER_LEN - 4) as u32);
    frame.put_u16_le(FrameKind::PublishBatch.as_u16());
    frame.put_u32_le(9);
    frame.put_slice(&payload);
    frame.to_vec()
}

#[tokio::test]
async fn malformed_publish_batches_close_the_connection_and_store_nothing() {
    let s = TestServer::start().await;
    let mut long_property = vec![1, 0, 1, 0, b'p', 3, 200, 0];
    long_property.resize(long_property.len() + 200, b'x');
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("a count of 0", raw_batch(&[0, 0], 0, 0)),
        ("a count above the cap", raw_batch(&[0, 0], 65_537, 65_537)),
        ("a count beyond the bytes", raw_batch(&[0, 0], u32::MAX, 1)),
        (
            "properties repeated past 64 KiB",
            raw_batch(&long_property, 400, 400),
        ),
    ];
    // The bodies are read as one packed slice: a length past the frame, or a byte left after
    // the last body, must still be refused.
    let mut past_the_frame = raw_batch(&[0, 0], 2, 2);
    let at = past_the_frame.len() - 4;
    past_the_frame[at..].copy_from_slice(&1000u32.to_le_bytes());
    let mut trailing = raw_batch(&[0, 0], 1, 1);
    trailing.push(7);
    let len = (trailing.len() - 4) as u32;
    trailing[..4].copy_from_slice(&len.to_le_bytes());
    cases.push(("a body length past the frame", past_the_frame));
    cases.push(("a byte after the last body", trailing));
    let c = s.client("owner").await;
    c.create_topic("ti").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("ti").durable("d"))
        .await
        .unwrap();
    for (what, frame) in cases {
        let (mut raw, _) = RawConn::connect(&s.addr_string(), "hostile").await.unwrap();
        raw.send_bytes(&frame).await.unwrap();
        assert!(
            raw.closed_by_peer().await,
            "{what}: the connection stays open"
        );
    }
    // The broker and the other sessions go on; nothing was stored.
    assert_eq!(held(&c, "ti", "d").await, 0);
    let (mut raw, _) = RawConn::connect(&s.addr_string(), "after").await.unwrap();
    let ok = raw_batch(&[0, 0], 2, 2);
    raw.send_bytes(&ok).await.unwrap();
    let (rid, reply) = raw.recv().await.unwrap();
    assert_eq!(rid, 9);
    assert!(
        matches!(&reply, Response::PublishedRun { count: 2, .. }),
        "{reply:?}"
    );
    assert_eq!(held(&c, "ti", "d").await, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn the_client_sends_a_batch_that_cannot_go_as_one_frame_as_a_send_batch() {
    let s = TestServer::start_with(|c| {
        c.limits.max_body_bytes = 10;
        c.limits.max_batch = 4;
    })
    .await;
    let c = s.client("c").await;
    c.create_topic("ticks").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("ticks").durable("d"))
        .await
        .unwrap();
    // A body over the broker's limit: the others still go, that one fails on its own.
    let bodies = vec![
        Bytes::from_static(b"first"),
        Bytes::from_static(b"eleven byte"),
        Bytes::from_static(b"third"),
    ];
    let results = c
        .publish_batch(PublishBatch::new("ticks", bodies))
        .await
        .unwrap();
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(
        matches!(results[1], Err(ferry_client::ClientError::TooLarge(_))),
        "{results:?}"
    );
    assert_eq!(held(&c, "ticks", "d").await, 2);
    // More bodies than max_batch: refused whole without a round trip.
    let five = PublishBatch::new("ticks", vec![Bytes::from_static(b"x"); 5]);
    assert!(matches!(
        c.publish_batch(five).await,
        Err(ferry_client::ClientError::TooLarge(_))
    ));
    // No bodies: nothing to do.
    assert!(c
        .publish_batch(PublishBatch::new("ticks", Vec::new()))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(held(&c, "ticks", "d").await, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn a_non_persistent_batch_reaches_direct_queued_and_selecting_subscribers_alike() {
    let s = TestServer::start().await;
    let c = s.client("subscriber").await;
    c.create_topic("mix").await.unwrap();
    // Auto ack, no selector: taken by direct delivery.
    let mut direct = c.subscribe_topic(SubscribeTopic::new("mix")).await.unwrap();
    // Client ack: queued, delivered by its push task.
    let mut queued = c
        .subscribe_topic(SubscribeTopic::new("mix").durable("q").ack(AckMode::Client))
        .await
        .unwrap();
    // A selector on a property each batch has its own value of: evaluated per batch's message.
    c.ensure_subscription(
        SubscribeTopic::new("mix")
            .durable("odd")
            .with_selector("batch = 1"),
    )
    .await
    .unwrap();
    let p = s.client("publisher").await;
    let per = 200;
    let mut ids = Vec::new();
    for b in 0..2i64 {
        let batch = PublishBatch {
            properties: vec![("batch".into(), PropertyValue::Int(b))].into(),
            ..PublishBatch::new(
                "mix",
                (0..per)
                    .map(|i| body(i + b as usize * per))
                    .collect::<Vec<_>>(),
            )
            .non_persistent()
        };
        ids.extend(
            p.publish_batch(batch)
                .await
                .unwrap()
                .into_iter()
                .map(Result::unwrap),
        );
    }
    let want = |i: usize| {
        vec![
            ("batch".into(), PropertyValue::Int((i / per) as i64)),
            (TOPIC_PROPERTY.into(), PropertyValue::Str("mix".into())),
        ]
    };
    for sub in [&mut direct, &mut queued] {
        let mut got = Vec::new();
        while got.len() < ids.len() {
            let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if d.delivery_id != 0 {
                // Client ack: credit comes back with the acks.
                sub.ack(&[d.delivery_id]).await.unwrap();
            }
            got.push(d);
        }
        for (i, d) in got.iter().enumerate() {
            let m = &d.message;
            assert_eq!((m.id, &m.body), (ids[i], &body(i)), "message {i}");
            assert_eq!(m.properties, want(i), "message {i}");
        }
        // A delivery's properties are its own to change: the others keep theirs.
        let mut first = got[0].message.properties.clone();
        first.push(("mine".into(), PropertyValue::Bool(true)));
        assert_eq!(got[1].message.properties, want(1));
    }
    assert_eq!(
        held(&c, "mix", "odd").await,
        per as u64,
        "the second batch only"
    );
    s.shutdown().await;
}
