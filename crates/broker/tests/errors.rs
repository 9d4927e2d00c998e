//! Every error code of the contract, triggered through the real broker.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use bytes::Bytes;
use common::*;
use ferry_protocol::requests::{Connect, Receive, Subscribe};
use ferry_protocol::{
    AckMode, ErrorCode, Order, ReceiveMode, Request, Response, Source, PROTOCOL_VERSION,
};
use ferry_store::StoreError;
use ferry_testkit::{FaultInjectingStore, RawConn, TestServer};

fn error_of(r: Response) -> (ErrorCode, String) {
    match r {
        Response::Error(e) => (e.code, e.message),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn queue_exists() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let m = expect_code(c.create_queue("q").await, ErrorCode::QueueExists);
    assert!(m.contains("'q'"), "{m}");
}

#[tokio::test]
async fn queue_not_found_on_every_queue_operation() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    let m = expect_code(
        c.receive(from_queue(
            "orders",
            Order::Priority,
            ReceiveMode::Take,
            AckMode::Auto,
            0,
        ))
        .await,
        ErrorCode::QueueNotFound,
    );
    assert_eq!(m, "queue 'orders' does not exist");
    expect_code(
        c.delete_queue("orders", true).await,
        ErrorCode::QueueNotFound,
    );
    expect_code(
        c.send(msg(&["orders"], "x", 5)).await,
        ErrorCode::QueueNotFound,
    );
    let sub = c
        .subscribe(Subscribe {
            queue: "orders".into(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 1,
            selector: String::new(),
        })
        .await;
    expect_code(sub.map(|_| ()), ErrorCode::QueueNotFound);
}

#[tokio::test]
async fn already_online() {
    let s = TestServer::start().await;
    let _a = s.client("alice").await;
    let Err(e) = ferry_client::Client::connect(&s.addr_string(), "alice").await else {
        panic!("a second session named alice must be refused");
    };
    assert_eq!(e.code(), Some(ErrorCode::AlreadyOnline));
    assert!(e.to_string().contains("alice"), "{e}");
    // After the first session ends, the name is free again.
    _a.disconnect().await.unwrap();
    let mut ok = false;
    for _ in 0..100 {
        if ferry_client::Client::connect(&s.addr_string(), "alice")
            .await
            .is_ok()
        {
            ok = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(ok, "the name is released after disconnect");
}

#[tokio::test]
async fn server_full_then_close() {
    let s = TestServer::start_with(|c| c.limits.max_connections = 2).await;
    let _a = s.client("a").await;
    let _b = s.client("b").await;
    let (mut raw, reply) = RawConn::connect(&s.addr_string(), "c").await.unwrap();
    let (code, msg) = error_of(reply);
    assert_eq!(code, ErrorCode::ServerFull);
    assert!(msg.contains('2'), "{msg}");
    assert!(raw.closed_by_peer().await);
    assert_eq!(ferry_testkit_stat(&s), 1, "the refusal is counted");
}

fn ferry_testkit_stat(s: &TestServer) -> u64 {
    ferry_broker::stats::Stats::get(&s.broker().stats().connections_refused_full)
}

#[tokio::test]
async fn invalid_argument_for_bad_names_priorities_and_prefetch() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    let m = expect_code(
        c.create_queue("bad name!").await,
        ErrorCode::InvalidArgument,
    );
    assert!(m.contains("bad name!"), "{m}");
    expect_code(
        c.create_queue(&"x".repeat(201)).await,
        ErrorCode::InvalidArgument,
    );
    c.create_queue("q").await.unwrap();
    let m = expect_code(
        c.send(msg(&["q"], "x", 0)).await,
        ErrorCode::InvalidArgument,
    );
    assert!(m.contains("priority"), "{m}");
    expect_code(
        c.send(msg(&["q", "q"], "x", 5)).await,
        ErrorCode::InvalidArgument,
    );
    let sub = c
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 0,
            selector: String::new(),
        })
        .await;
    expect_code(sub.map(|_| ()), ErrorCode::InvalidArgument);
    // The session goes on after errors.
    c.send(msg(&["q"], "fine", 5)).await.unwrap();
    // A bad client name at connect.
    let (_, reply) = RawConn::connect(&s.addr_string(), "no spaces")
        .await
        .unwrap();
    assert_eq!(error_of(reply).0, ErrorCode::InvalidArgument);
}

#[tokio::test]
async fn invalid_argument_for_a_bad_selector_names_its_position() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    c.send(msg(&["q"], "kept", 5)).await.unwrap();
    let bad = from_queue("q", Order::Time, ReceiveMode::Take, AckMode::Auto, 0)
        .with_selector("price > (1 + 2");
    let m = expect_code(c.receive(bad).await, ErrorCode::InvalidArgument);
    assert_eq!(
        m,
        "invalid selector: expected ')', found end of input at position 14"
    );
    let bad = from_queue("q", Order::Time, ReceiveMode::Peek, AckMode::Auto, 5_000)
        .with_selector("region = 'eu");
    let m = expect_code(c.receive(bad).await, ErrorCode::InvalidArgument);
    assert!(m.ends_with("at position 9"), "{m}");
    let sub = c
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Client,
            prefetch: 1,
            selector: "a NOT 5".into(),
        })
        .await;
    let m = expect_code(sub.map(|_| ()), ErrorCode::InvalidArgument);
    assert!(
        m.starts_with("invalid selector: ") && m.ends_with("at position 6"),
        "{m}"
    );
    // Nothing was taken, and the session goes on.
    assert_eq!(body(&take(&c, "q").await.unwrap()), "kept");
}

#[tokio::test]
async fn too_large_body_is_refused_by_the_broker() {
    let s = TestServer::start_with(|c| c.limits.max_body_bytes = 1000).await;
    let (mut raw, reply) = RawConn::connect(&s.addr_string(), "alice").await.unwrap();
    assert!(matches!(reply, Response::Connected(_)));
    raw.send(
        2,
        &Request::CreateQueue {
            name: "q".into(),
            options: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(raw.recv().await.unwrap(), (2, Response::Ok));
    let mut m = msg(&["q"], "", 5);
    m.body = Bytes::from(vec![7u8; 1001]);
    raw.send(3, &Request::Send(m)).await.unwrap();
    let (rid, reply) = raw.recv().await.unwrap();
    assert_eq!(rid, 3);
    let (code, text) = error_of(reply);
    assert_eq!(code, ErrorCode::TooLarge);
    assert!(text.contains("1001") && text.contains("1000"), "{text}");
    // Nothing was stored and the session goes on.
    raw.send(4, &Request::ListQueues).await.unwrap();
    match raw.recv().await.unwrap().1 {
        Response::Queues(qs) => assert_eq!(qs[0].ready, 0),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn unauthorized_before_connect() {
    let s = TestServer::start().await;
    let mut raw = RawConn::open(&s.addr_string()).await.unwrap();
    raw.send(9, &Request::ListQueues).await.unwrap();
    let (rid, reply) = raw.recv().await.unwrap();
    assert_eq!(rid, 9);
    assert_eq!(error_of(reply).0, ErrorCode::Unauthorized);
}

#[tokio::test]
async fn not_found_for_unknown_subscription_and_delivery() {
    let s = TestServer::start().await;
    let (mut raw, _) = RawConn::connect(&s.addr_string(), "alice").await.unwrap();
    raw.send(2, &Request::Cancel { subscription: 77 })
        .await
        .unwrap();
    let (code, m) = error_of(raw.recv().await.unwrap().1);
    assert_eq!(code, ErrorCode::NotFound);
    assert!(m.contains("77"), "{m}");
    raw.send(3, &Request::Ack { ids: vec![5] }).await.unwrap();
    assert_eq!(error_of(raw.recv().await.unwrap().1).0, ErrorCode::NotFound);
}

#[tokio::test]
async fn unsupported_version_closes_the_connection() {
    let s = TestServer::start().await;
    let mut raw = RawConn::open(&s.addr_string()).await.unwrap();
    raw.send(
        1,
        &Request::Connect(Connect {
            version: PROTOCOL_VERSION + 1,
            keepalive_ms: 0,
            flags: 0,
            client: "alice".into(),
            mechanism: String::new(),
            credentials: String::new(),
        }),
    )
    .await
    .unwrap();
    let (code, m) = error_of(raw.recv().await.unwrap().1);
    assert_eq!(code, ErrorCode::UnsupportedVersion);
    assert!(m.contains(&PROTOCOL_VERSION.to_string()), "{m}");
    assert!(raw.closed_by_peer().await);
}

#[tokio::test]
async fn unknown_request_kind_gets_an_error_and_the_session_goes_on() {
    let s = TestServer::start().await;
    let (mut raw, _) = RawConn::connect(&s.addr_string(), "alice").await.unwrap();
    // A well-framed request of kind 0x0777: length 6, kind, request id 5.
    let mut frame = Vec::new();
    frame.extend_from_slice(&6u32.to_le_bytes());
    frame.extend_from_slice(&0x0777u16.to_le_bytes());
    frame.extend_from_slice(&5u32.to_le_bytes());
    raw.send_bytes(&frame).await.unwrap();
    let (rid, reply) = raw.recv().await.unwrap();
    assert_eq!(rid, 5);
    assert_eq!(error_of(reply).0, ErrorCode::UnknownRequest);
    raw.send(6, &Request::Ping).await.unwrap();
    assert_eq!(raw.recv().await.unwrap(), (6, Response::Pong));
}

#[tokio::test]
async fn limit_exceeded_for_in_flight_and_prefetch() {
    let s = TestServer::start_with(|c| {
        c.limits.max_in_flight_per_session = 1;
        c.limits.max_prefetch = 10;
    })
    .await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    c.send(msg(&["q"], "1", 5)).await.unwrap();
    c.send(msg(&["q"], "2", 5)).await.unwrap();
    let d = take_client_ack(&c, "q").await.unwrap();
    let r = c
        .receive(from_queue(
            "q",
            Order::Time,
            ReceiveMode::Take,
            AckMode::Client,
            0,
        ))
        .await;
    expect_code(r, ErrorCode::LimitExceeded);
    c.ack(&[d.delivery_id]).await.unwrap();
    assert!(
        take_client_ack(&c, "q").await.is_some(),
        "room again after the ack"
    );
    let sub = c
        .subscribe(Subscribe {
            queue: "q".into(),
            order: Order::Time,
            ack: AckMode::Client,
            prefetch: 11,
            selector: String::new(),
        })
        .await;
    expect_code(sub.map(|_| ()), ErrorCode::LimitExceeded);
}

#[tokio::test]
async fn a_default_broker_takes_a_prefetch_up_to_its_limit_and_refuses_one_more() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let max = ferry_protocol::Limits::DEFAULT.max_prefetch;
    let subscribe = |prefetch| Subscribe {
        queue: "q".into(),
        order: Order::Time,
        ack: AckMode::Auto,
        prefetch,
        selector: String::new(),
    };
    let over = c.subscribe(subscribe(max + 1)).await;
    expect_code(over.map(|_| ()), ErrorCode::LimitExceeded);
    let sub = c.subscribe(subscribe(max)).await.unwrap();
    assert_eq!(sub.prefetch(), max);
    c.send(msg(&["q"], "x", 5)).await.unwrap();
    let mut sub = sub;
    let d = sub.next().await.expect("a delivery").unwrap();
    assert_eq!(&d.message.body[..], b"x");
}

#[tokio::test]
async fn limit_exceeded_for_queue_count() {
    let s = TestServer::start_with(|c| c.limits.max_queues = 2).await;
    let c = s.client("alice").await;
    c.create_queue("a").await.unwrap();
    c.create_queue("b").await.unwrap();
    expect_code(c.create_queue("c").await, ErrorCode::LimitExceeded);
}

async fn faulty_server() -> (
    TestServer,
    std::sync::Arc<FaultInjectingStore>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let inner =
        ferry_store::EmbeddedStore::open(ferry_store::EmbeddedConfig::new(dir.path().to_owned()))
            .await
            .unwrap();
    let store = FaultInjectingStore::new(inner);
    let s = TestServer::start_with_store(store.clone(), |_| {}).await;
    (s, store, dir)
}

#[tokio::test]
async fn store_unavailable_fails_sends_and_recovers() {
    let (s, store, _dir) = faulty_server().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    let id = c.send(msg(&["q"], "kept", 5)).await.unwrap();
    store.set_fault(Some(StoreError::Unavailable("disk full".into())));
    let m = expect_code(
        c.send(msg(&["q"], "lost", 5)).await,
        ErrorCode::StoreUnavailable,
    );
    assert!(m.contains("disk full"), "{m}");
    store.set_fault(None);
    let d = take(&c, "q").await.unwrap();
    assert_eq!(
        d.message.id, id,
        "what was acknowledged before is still there"
    );
    assert!(
        take(&c, "q").await.is_none(),
        "the refused send left nothing"
    );
    c.send(msg(&["q"], "after", 5)).await.unwrap();
}

#[tokio::test]
async fn internal_errors_reach_the_client_with_their_message() {
    let (s, store, _dir) = faulty_server().await;
    let c = s.client("alice").await;
    c.create_queue("q").await.unwrap();
    store.set_fault(Some(StoreError::Internal("index out of step".into())));
    let m = expect_code(
        c.receive(Receive {
            source: Source::Queue("q".into()),
            order: Order::Time,
            mode: ReceiveMode::Take,
            ack: AckMode::Auto,
            wait_ms: 0,
            selector: String::new(),
        })
        .await,
        ErrorCode::Internal,
    );
    assert!(m.contains("index out of step"), "{m}");
    store.set_fault(None);
    c.ping().await.unwrap();
}

#[tokio::test]
async fn topic_exists() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_topic("prices").await.unwrap();
    let m = expect_code(c.create_topic("prices").await, ErrorCode::TopicExists);
    assert_eq!(m, "topic 'prices' already exists");
}

#[tokio::test]
async fn topic_not_found_on_every_topic_operation() {
    use ferry_protocol::requests::SubscribeTopic;
    use ferry_protocol::OutgoingMessage;
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    let m = expect_code(
        c.publish(OutgoingMessage::to_topic("prices", "x")).await,
        ErrorCode::TopicNotFound,
    );
    assert_eq!(m, "topic 'prices' does not exist");
    expect_code(
        c.subscribe_topic(SubscribeTopic::new("prices"))
            .await
            .map(|_| ()),
        ErrorCode::TopicNotFound,
    );
    expect_code(
        c.ensure_subscription(SubscribeTopic::new("prices").durable("d"))
            .await,
        ErrorCode::TopicNotFound,
    );
    expect_code(
        c.delete_topic("prices", true).await,
        ErrorCode::TopicNotFound,
    );
    expect_code(c.unsubscribe("prices", "d").await, ErrorCode::TopicNotFound);
    // An unknown subscription of a topic that exists is NotFound.
    c.create_topic("prices").await.unwrap();
    let m = expect_code(c.unsubscribe("prices", "d").await, ErrorCode::NotFound);
    assert!(m.contains("prices:d"), "{m}");
}

#[tokio::test]
async fn topic_not_empty_unless_forced() {
    use ferry_protocol::requests::SubscribeTopic;
    use ferry_protocol::OutgoingMessage;
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_topic("prices").await.unwrap();
    c.ensure_subscription(SubscribeTopic::new("prices").durable("keep"))
        .await
        .unwrap();
    c.publish(OutgoingMessage::to_topic("prices", "x"))
        .await
        .unwrap();
    let m = expect_code(
        c.delete_topic("prices", false).await,
        ErrorCode::TopicNotEmpty,
    );
    assert!(m.contains("'prices'"), "{m}");
    c.delete_topic("prices", true).await.unwrap();
    assert!(c.list_topics().await.unwrap().is_empty());
}

#[tokio::test]
async fn subscription_in_use() {
    use ferry_protocol::requests::SubscribeTopic;
    let s = TestServer::start().await;
    let a = s.client("alice").await;
    let b = s.client("bob").await;
    a.create_topic("prices").await.unwrap();
    let _sub = a
        .subscribe_topic(SubscribeTopic::new("prices").durable("solo"))
        .await
        .unwrap();
    let m = expect_code(
        b.subscribe_topic(SubscribeTopic::new("prices").durable("solo"))
            .await
            .map(|_| ()),
        ErrorCode::SubscriptionInUse,
    );
    assert!(m.contains("prices:solo"), "{m}");
    expect_code(
        b.unsubscribe("prices", "solo").await,
        ErrorCode::SubscriptionInUse,
    );
}

#[tokio::test]
async fn transaction_state() {
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    let m = expect_code(c.commit().await, ErrorCode::TransactionState);
    assert!(m.contains("without a transaction"), "{m}");
    expect_code(c.rollback().await, ErrorCode::TransactionState);
    c.begin().await.unwrap();
    expect_code(c.begin().await, ErrorCode::TransactionState);
}

#[tokio::test]
async fn invalid_argument_for_bad_subscriptions() {
    use ferry_protocol::requests::SubscribeTopic;
    let s = TestServer::start().await;
    let c = s.client("alice").await;
    c.create_topic("prices").await.unwrap();
    let m = expect_code(
        c.subscribe_topic(SubscribeTopic::new("prices").shared())
            .await
            .map(|_| ()),
        ErrorCode::InvalidArgument,
    );
    assert!(m.contains("a shared subscription needs a name"), "{m}");
    // Subscription names follow the rules of queue names, shared non-durable ones included.
    for sub in [
        SubscribeTopic::new("prices").shared_as("bad name!"),
        SubscribeTopic::new("prices").durable("bad name!"),
    ] {
        let m = expect_code(
            c.subscribe_topic(sub).await.map(|_| ()),
            ErrorCode::InvalidArgument,
        );
        assert!(m.contains("bad name!"), "{m}");
    }
    let m = expect_code(
        c.subscribe_topic(SubscribeTopic::new("prices").with_selector("a = "))
            .await
            .map(|_| ()),
        ErrorCode::InvalidArgument,
    );
    assert!(m.contains("position"), "{m}");
    c.ensure_subscription(
        SubscribeTopic::new("prices")
            .durable("d")
            .with_selector("a = 1"),
    )
    .await
    .unwrap();
    let m = expect_code(
        c.ensure_subscription(
            SubscribeTopic::new("prices")
                .durable("d")
                .with_selector("a = 2"),
        )
        .await,
        ErrorCode::InvalidArgument,
    );
    assert!(m.contains("selector"), "{m}");
    expect_code(c.create_topic("bad name").await, ErrorCode::InvalidArgument);
    // Malformed subscription queue names in a receive: refused, the session goes on.
    for bad in [
        "prices:",
        ":d",
        "prices:a:b",
        "prices:~",
        "pr ices:d",
        "prices:d\u{0}",
    ] {
        let m = expect_code(
            c.receive(from_queue(
                bad,
                Order::Time,
                ReceiveMode::Take,
                AckMode::Auto,
                0,
            ))
            .await,
            ErrorCode::InvalidArgument,
        );
        assert!(m.contains("name"), "{bad}: {m}");
    }
    expect_code(
        c.receive(from_queue(
            "prices:nope",
            Order::Time,
            ReceiveMode::Take,
            AckMode::Auto,
            0,
        ))
        .await,
        ErrorCode::QueueNotFound,
    );
    c.ping().await.expect("the session goes on");
}
