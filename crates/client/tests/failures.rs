//! When things go wrong: the connection drops with calls in flight, the broker refuses the
//! session or a request, limits are exceeded client-side, the broker sends garbage.

mod fake;

use std::time::Duration;

use bytes::Bytes;
use fake::*;
use ferry_client::{
    Client, ClientError, ConnectOptions, ErrorCode, Limits, OutgoingMessage, PropertyValue,
};
use ferry_protocol::{Request, Response};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_fail_with_closed_when_the_connection_drops() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        // Take the 50 calls, answer none, hang up. Sends queued next to each other may come
        // coalesced into one batch request: count the messages, not the frames.
        let mut calls = 0;
        while calls < 50 {
            calls += match peer.expect().await.1 {
                Request::SendBatch(items) => items.len(),
                _ => 1,
            };
        }
    })
    .await;
    let client = within(Client::connect(&addr, "doomed")).await.unwrap();
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move {
                if i % 2 == 0 {
                    c.ping().await
                } else {
                    c.send(OutgoingMessage::new("q", "x")).await.map(|_| ())
                }
            })
        })
        .collect();
    for call in calls {
        assert!(matches!(
            within(call).await.unwrap(),
            Err(ClientError::Closed)
        ));
    }
    within(server).await.unwrap();
    // Later calls fail at once.
    assert!(client.is_closed());
    assert!(matches!(
        within(client.ping()).await,
        Err(ClientError::Closed)
    ));
    assert!(matches!(
        within(client.list_queues()).await,
        Err(ClientError::Closed)
    ));
    // And disconnect still succeeds: the session is over either way.
    within(client.disconnect()).await.unwrap();
}

#[tokio::test]
async fn disconnect_ends_the_session_and_later_calls_fail() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert_eq!(req, Request::Disconnect);
        peer.write(id, Response::Ok).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "leaver")).await.unwrap();
    let clone = client.clone();
    within(client.disconnect()).await.unwrap();
    assert!(matches!(
        within(clone.ping()).await,
        Err(ClientError::Closed)
    ));
    // The client closed its side: the server saw the end of the stream, nothing more.
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn dropping_the_last_handle_closes_the_connection() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "dropped")).await.unwrap();
    let clone = client.clone();
    drop(client);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!clone.is_closed(), "a clone keeps the connection");
    drop(clone);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn server_errors_carry_code_and_message() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        peer.write(
            id,
            error(ErrorCode::QueueExists, "queue 'q' already exists"),
        )
        .await;
        // The session goes on after an error reply.
        peer.answer_ping().await;
        peer.drain().await;
    })
    .await;
    let client = within(Client::connect(&addr, "err")).await.unwrap();
    let e = within(client.create_queue("q")).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::QueueExists));
    assert!(matches!(&e, ClientError::Server(r) if r.message == "queue 'q' already exists"));
    assert_eq!(e.to_string(), "queue 'q' already exists (QueueExists)");
    within(client.ping()).await.unwrap();
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn a_refused_connect_is_a_server_error() {
    let (addr, server) = serve(|mut peer| async move {
        let (id, _) = peer.expect().await;
        peer.write(
            id,
            error(
                ErrorCode::AlreadyOnline,
                "client 'twin' is already connected",
            ),
        )
        .await;
    })
    .await;
    let e = within(Client::connect(&addr, "twin")).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::AlreadyOnline));
    within(server).await.unwrap();
}

#[tokio::test]
async fn an_error_with_request_id_zero_before_connect_refuses_the_connection() {
    // A broker at its connection limit says so at once and closes, without reading.
    let (addr, server) = serve(|mut peer| async move {
        peer.write(
            0,
            error(ErrorCode::ServerFull, "1024 connections, the limit"),
        )
        .await;
    })
    .await;
    let e = within(Client::connect(&addr, "late")).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ServerFull), "{e:?}");
    within(server).await.unwrap();
}

#[tokio::test]
async fn connect_times_out_when_the_broker_does_not_answer() {
    let (addr, server) = serve(|mut peer| async move {
        peer.expect().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    })
    .await;
    let opts = ConnectOptions::new(addr, "patient").connect_timeout(Duration::from_millis(200));
    let e = within(Client::connect_with(opts)).await.unwrap_err();
    assert!(matches!(e, ClientError::Timeout), "{e:?}");
    server.abort();
}

#[tokio::test]
async fn connect_to_nothing_is_an_io_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let e = within(Client::connect(&addr, "nobody")).await.unwrap_err();
    assert!(matches!(e, ClientError::Io(_)), "{e:?}");
}

#[tokio::test]
async fn limits_are_enforced_client_side() {
    let limits = Limits {
        max_frame_bytes: 300,
        max_body_bytes: 16,
        max_batch: 3,
        max_queues_per_send: 2,
        max_properties: 1,
        ..Limits::DEFAULT
    };
    let (addr, server) = serve(move |mut peer| async move {
        peer.handshake(limits).await;
        let (id, req) = peer.expect().await;
        let Request::SendBatch(items) = req else {
            panic!("the first request to reach the broker was {req:?}")
        };
        assert_eq!(items.len(), 2, "the oversized item stayed behind");
        peer.write(id, Response::BatchSent(vec![Ok(1), Ok(2)]))
            .await;
        peer.answer_ping().await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "big")).await.unwrap();
    assert_eq!(client.limits(), limits);
    let too_large = |r: Result<u64, ClientError>| {
        let e = r.unwrap_err();
        assert!(matches!(e, ClientError::TooLarge(_)), "{e:?}");
        assert_eq!(e.code(), Some(ErrorCode::TooLarge));
    };
    too_large(client.send(OutgoingMessage::new("q", vec![0u8; 17])).await);
    let mut m = OutgoingMessage::new("a", "x");
    m.queues.extend(["b".into(), "c".into()]);
    too_large(client.send(m).await);
    let mut m = OutgoingMessage::new("q", "x");
    m.properties = vec![
        ("a".into(), PropertyValue::Int(1)),
        ("b".into(), PropertyValue::Int(2)),
    ]
    .into();
    too_large(client.send(m).await);
    // Fits the body limit, but not the frame limit.
    let mut m = OutgoingMessage::new("q", "x");
    m.queues = vec!["q".repeat(200), "r".repeat(200)];
    too_large(client.send(m).await);
    let e = client
        .ack(&(1..100).collect::<Vec<u64>>())
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::TooLarge(_)), "{e:?}");
    // A selector too long for its string field is refused, not cut.
    let long = ferry_client::Receive {
        source: ferry_client::Source::Queue("q".into()),
        order: ferry_client::Order::Time,
        mode: ferry_client::ReceiveMode::Take,
        ack: ferry_client::AckMode::Auto,
        wait_ms: 0,
        selector: String::new(),
    }
    .with_selector("a".repeat(65_536));
    let e = client.receive(long).await.unwrap_err();
    assert!(matches!(e, ClientError::TooLarge(_)), "{e:?}");
    let four = vec![OutgoingMessage::new("q", "x"); 4];
    assert!(matches!(
        client.send_batch(four).await,
        Err(ClientError::TooLarge(_))
    ));
    // In a batch, the oversized message fails alone.
    let results = within(client.send_batch(vec![
        OutgoingMessage::new("q", "a"),
        OutgoingMessage::new("q", Bytes::from(vec![0u8; 17])),
        OutgoingMessage::new("q", "b"),
    ]))
    .await
    .unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().unwrap(), &1);
    assert!(matches!(results[1], Err(ClientError::TooLarge(_))));
    assert_eq!(results[2].as_ref().unwrap(), &2);
    within(client.ping()).await.unwrap();
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn batches_over_the_frame_limit_are_split_and_pipelined() {
    // Each message encodes to 2+3+1+1+8+2+4+40+8+8+1+2 = 80 bytes; a frame has room for 3
    // (256 - 10 header - 4 count = 242).
    let limits = Limits {
        max_frame_bytes: 256,
        ..Limits::DEFAULT
    };
    let (addr, server) = serve(move |mut peer| async move {
        peer.handshake(limits).await;
        let mut reqs = Vec::new();
        for _ in 0..4 {
            let (id, req) = peer.expect().await;
            let Request::SendBatch(items) = req else {
                panic!("{req:?}")
            };
            reqs.push((id, items));
        }
        assert_eq!(
            reqs.iter().map(|r| r.1.len()).collect::<Vec<_>>(),
            vec![3, 3, 3, 1]
        );
        // Reply in reverse order; the second request fails as a whole.
        for (i, (id, items)) in reqs.iter().enumerate().rev() {
            let resp = if i == 1 {
                error(ErrorCode::StoreUnavailable, "disk full")
            } else {
                Response::BatchSent(
                    items
                        .iter()
                        .map(|m| Ok(std::str::from_utf8(&m.body[..2]).unwrap().parse().unwrap()))
                        .collect(),
                )
            };
            peer.write(*id, resp).await;
        }
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "splitter")).await.unwrap();
    let msgs: Vec<_> = (0..10u64)
        .map(|i| OutgoingMessage::new("q", format!("{i:02}{}", "x".repeat(38))))
        .collect();
    let results = within(client.send_batch(msgs)).await.unwrap();
    for (i, r) in results.iter().enumerate() {
        if (3..6).contains(&i) {
            let e = r.as_ref().unwrap_err();
            assert_eq!(e.code(), Some(ErrorCode::StoreUnavailable), "item {i}");
        } else {
            assert_eq!(r.as_ref().unwrap(), &(i as u64), "item {i}");
        }
    }
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn a_batch_refused_as_a_whole_is_an_error_of_the_call() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        peer.write(id, error(ErrorCode::StoreUnavailable, "disk full"))
            .await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "whole")).await.unwrap();
    let e = within(client.send_batch(vec![OutgoingMessage::new("q", "x"); 2]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::StoreUnavailable));
    // Nothing to send, no round trip.
    assert!(within(client.send_batch(vec![])).await.unwrap().is_empty());
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn a_malformed_frame_from_the_broker_closes_the_connection() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        // A Pong with a stray payload byte.
        let mut raw = vec![7, 0, 0, 0, 0x04, 0x80];
        raw.extend(id.to_le_bytes());
        raw.push(0xff);
        peer.write_raw(&raw).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "victim")).await.unwrap();
    let e = within(client.ping()).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    assert!(client.is_closed());
    assert!(within(client.ping()).await.is_err());
    within(server).await.unwrap();
}

#[tokio::test]
async fn an_unknown_reply_kind_fails_only_its_call() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        // Kind 0x8fff: from some newer broker.
        let mut raw = vec![6, 0, 0, 0, 0xff, 0x8f];
        raw.extend(id.to_le_bytes());
        // And an unknown push, which is skipped.
        raw.extend([6, 0, 0, 0, 0xfe, 0x8f, 0, 0, 0, 0]);
        peer.write_raw(&raw).await;
        peer.answer_ping().await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "future")).await.unwrap();
    let e = within(client.ping()).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    within(client.ping()).await.unwrap();
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn a_wrong_reply_kind_is_a_protocol_error() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        peer.write(id, Response::Ok).await; // not a Pong
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "confused")).await.unwrap();
    let e = within(client.ping()).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn a_client_ack_delivery_whose_caller_gave_up_is_handed_back() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert!(matches!(req, Request::Receive(_)));
        tokio::time::sleep(Duration::from_millis(200)).await;
        peer.write(id, Response::Received(Some(delivery(77, 1))))
            .await;
        let (id, req) = peer.expect().await;
        assert_eq!(
            req,
            Request::Nack {
                ids: vec![77],
                requeue: true
            }
        );
        peer.write(id, Response::Ok).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "impatient")).await.unwrap();
    let receive = client.receive(ferry_client::Receive {
        source: ferry_client::Source::Queue("q".into()),
        order: ferry_client::Order::Time,
        mode: ferry_client::ReceiveMode::Take,
        ack: ferry_client::AckMode::Client,
        wait_ms: 10_000,
        selector: String::new(),
    });
    assert!(tokio::time::timeout(Duration::from_millis(50), receive)
        .await
        .is_err());
    // Keep the connection until the server has seen the nack.
    let rest = within(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(client);
        server.await
    })
    .await
    .unwrap();
    assert_eq!(rest, vec![]);
}

#[tokio::test]
async fn a_batch_reply_with_the_wrong_number_of_results_fails_the_call() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        let Request::SendBatch(items) = req else {
            panic!("expected one batch request, got {req:?}")
        };
        assert_eq!(items.len(), 2, "the batch goes out whole");
        // One result for two messages: the client cannot tell whose it is.
        peer.write(id, Response::BatchSent(vec![Ok(1)])).await;
        peer.answer_ping().await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "miscount")).await.unwrap();
    let batch = vec![
        OutgoingMessage::new("q", "a"),
        OutgoingMessage::new("q", "b"),
    ];
    let e = within(client.send_batch(batch)).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    // The connection stays usable.
    within(client.ping()).await.unwrap();
    drop(client);
    within(server).await.unwrap();
}
