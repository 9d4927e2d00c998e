//! Authentication and permissions against a real broker: SCRAM in the connect handshake,
//! names bound to users, every operation class refused without its permission and allowed
//! with it, transactions all or nothing, live permission changes, failed-attempt limits and
//! the refusal to expose a broker without users.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use ferry_auth::ScramClient;
use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, ClientError, ConnectOptions};
use ferry_protocol::requests::{Connect, SubscribeTopic};
use ferry_protocol::{
    AckMode, ErrorCode, Order, OutgoingMessage, ReceiveMode, Request, Response, PROTOCOL_VERSION,
};
use ferry_testkit::{test_config, RawConn, TestServer};

/// A broker with users `admin` (admin) and `alice` (the grants given); failures answered at
/// once, at most `max_failures` a minute per address.
async fn broker(alice: &[&str], max_failures: u32) -> TestServer {
    let s = TestServer::start_with(|c| {
        c.auth_failure_delay_ms = 0;
        c.max_auth_failures_per_min = max_failures;
    })
    .await;
    let m = s.broker().management();
    m.add_user("admin", "admin-pw", &["admin".into()])
        .await
        .unwrap();
    let grants: Vec<String> = alice.iter().map(|g| g.to_string()).collect();
    m.add_user("alice", "alice-pw", &grants).await.unwrap();
    s
}

async fn login(s: &TestServer, client: &str, user: &str, pw: &str) -> Result<Client, ClientError> {
    Client::connect_with(ConnectOptions::new(s.addr_string(), client).user(user, pw)).await
}

fn refused(r: Result<Client, ClientError>, code: ErrorCode) -> String {
    expect_code(r, code)
}

#[tokio::test]
async fn the_right_password_connects_and_the_server_proves_itself() {
    let s = broker(&[], 100).await;
    let c = login(&s, "alice", "alice", "alice-pw").await.unwrap();
    assert_eq!(c.name(), "alice");
    c.ping().await.unwrap();
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_user_are_refused_alike() {
    let s = broker(&[], 100).await;
    let wrong = refused(
        login(&s, "alice", "alice", "guess").await,
        ErrorCode::Unauthorized,
    );
    let unknown = refused(
        login(&s, "mallory", "mallory", "x").await,
        ErrorCode::Unauthorized,
    );
    assert_eq!(
        wrong, unknown,
        "the answers must not tell which names exist"
    );
    assert!(wrong.contains("authentication failed"), "{wrong}");
    assert!(!wrong.contains("guess"));
    let m = s.broker().management();
    let failed = m
        .stats()
        .auth_failed
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(failed, 2, "both failures are counted");
}

#[tokio::test]
async fn once_a_user_exists_anonymous_sessions_are_refused_even_on_loopback() {
    let s = broker(&[], 100).await;
    let m = refused(
        Client::connect(&s.addr_string(), "anon").await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("authentication required"), "{m}");
}

#[tokio::test]
async fn without_users_loopback_sessions_need_no_credentials() {
    let s = TestServer::start().await;
    let c = s.client("anyone").await;
    c.create_queue("q").await.unwrap();
}

#[tokio::test]
async fn a_user_cannot_claim_another_users_name_unless_granted() {
    let s = broker(&["client shop-*"], 100).await;
    let m = refused(
        login(&s, "admin", "alice", "alice-pw").await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("may not open sessions as client 'admin'"), "{m}");
    login(&s, "shop-12", "alice", "alice-pw").await.unwrap();
    refused(
        login(&s, "warehouse", "alice", "alice-pw").await,
        ErrorCode::Unauthorized,
    );
}

#[tokio::test]
async fn a_replayed_scram_exchange_is_refused() {
    let s = broker(&[], 100).await;
    // A real exchange, recorded.
    let (mut scram, first) = ScramClient::with_nonce("alice", "alice-pw", "fixednonce");
    let connect = Connect {
        version: PROTOCOL_VERSION,
        client: "alice".into(),
        mechanism: "SCRAM-SHA-256".into(),
        credentials: first,
        keepalive_ms: 0,
        flags: 0,
    };
    let mut raw = RawConn::open(&s.addr_string()).await.unwrap();
    let Response::AuthChallenge { data } = raw.handshake(connect.clone()).await.unwrap() else {
        panic!("expected a challenge");
    };
    let client_final = scram.respond(&data).unwrap();
    raw.send(
        2,
        &Request::AuthResponse {
            data: client_final.clone(),
        },
    )
    .await
    .unwrap();
    assert!(matches!(
        raw.recv().await.unwrap().1,
        Response::Connected(_)
    ));
    drop(raw);
    // The same messages again, on a new connection: the server's nonce is new.
    let mut replay = RawConn::open(&s.addr_string()).await.unwrap();
    assert!(matches!(
        replay.handshake(connect).await.unwrap(),
        Response::AuthChallenge { .. }
    ));
    replay
        .send(2, &Request::AuthResponse { data: client_final })
        .await
        .unwrap();
    match replay.recv().await.unwrap().1 {
        Response::Error(e) => assert_eq!(e.code, ErrorCode::Unauthorized, "{e}"),
        other => panic!("a replay must fail, got {other:?}"),
    }
}

#[tokio::test]
async fn every_operation_class_is_refused_without_its_permission_naming_it() {
    let s = broker(&[], 100).await;
    let admin = login(&s, "admin", "admin", "admin-pw").await.unwrap();
    admin.create_queue("orders").await.unwrap();
    admin.create_topic("prices").await.unwrap();
    let alice = login(&s, "alice", "alice", "alice-pw").await.unwrap();
    let m = expect_code(alice.create_queue("mine").await, ErrorCode::Unauthorized);
    assert!(m.contains("lacks 'manage' on queue 'mine'"), "{m}");
    let m = expect_code(
        alice.delete_queue("orders", true).await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("'manage' on queue 'orders'"), "{m}");
    let m = expect_code(
        alice.send(OutgoingMessage::new("orders", "x")).await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("lacks 'send' on queue 'orders'"), "{m}");
    let m = expect_code(
        alice
            .publish(OutgoingMessage::to_topic("prices", "x"))
            .await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("'send' on topic 'prices'"), "{m}");
    let m = expect_code(
        alice
            .receive(from_queue(
                "orders",
                Order::Time,
                ReceiveMode::Take,
                AckMode::Auto,
                0,
            ))
            .await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("lacks 'receive' on queue 'orders'"), "{m}");
    let m = expect_code(alice.create_topic("news").await, ErrorCode::Unauthorized);
    assert!(m.contains("'manage' on topic 'news'"), "{m}");
    let sub = SubscribeTopic::new("prices");
    let m = expect_code(alice.subscribe_topic(sub).await, ErrorCode::Unauthorized);
    assert!(m.contains("'receive' on topic 'prices'"), "{m}");
    // Nothing changed.
    assert_eq!(admin.list_queues().await.unwrap()[0].ready, 0);
}

#[tokio::test]
async fn every_operation_class_is_allowed_with_its_permission() {
    let s = broker(
        &[
            "manage queue orders-*",
            "send queue orders-*",
            "receive queue orders-*",
            "manage topic prices",
            "send topic prices",
            "receive topic prices",
        ],
        100,
    )
    .await;
    let alice = login(&s, "alice", "alice", "alice-pw").await.unwrap();
    alice.create_queue("orders-eu").await.unwrap();
    alice
        .send(OutgoingMessage::new("orders-eu", "x"))
        .await
        .unwrap();
    assert_eq!(body(&take(&alice, "orders-eu").await.unwrap()), "x");
    alice.create_topic("prices").await.unwrap();
    let sub = SubscribeTopic::new("prices");
    let _sub = alice.subscribe_topic(sub).await.unwrap();
    alice
        .publish(OutgoingMessage::to_topic("prices", "p"))
        .await
        .unwrap();
    alice.delete_queue("orders-eu", true).await.unwrap();
    let m = expect_code(
        alice.create_queue("invoices").await,
        ErrorCode::Unauthorized,
    );
    assert!(m.contains("'invoices'"), "{m}");
}

#[tokio::test]
async fn a_send_to_several_queues_with_one_forbidden_stores_nothing() {
    let s = broker(&["send queue a"], 100).await;
    let admin = login(&s, "admin", "admin", "admin-pw").await.unwrap();
    admin.create_queue("a").await.unwrap();
    admin.create_queue("b").await.unwrap();
    let alice = login(&s, "alice", "alice", "alice-pw").await.unwrap();
    let mut m = OutgoingMessage::new("a", "x");
    m.queues.push("b".into());
    let e = expect_code(alice.send(m).await, ErrorCode::Unauthorized);
    assert!(e.contains("queue 'b'"), "{e}");
    assert!(
        take(&admin, "a").await.is_none(),
        "nothing stored on the allowed queue"
    );
}

#[tokio::test]
async fn a_transaction_touching_a_forbidden_queue_at_commit_changes_nothing() {
    let s = broker(&["send queue a", "send queue b"], 100).await;
    let admin = login(&s, "admin", "admin", "admin-pw").await.unwrap();
    admin.create_queue("a").await.unwrap();
    admin.create_queue("b").await.unwrap();
    let alice = login(&s, "alice", "alice", "alice-pw").await.unwrap();
    alice.begin().await.unwrap();
    alice.send(OutgoingMessage::new("a", "1")).await.unwrap();
    alice.send(OutgoingMessage::new("b", "2")).await.unwrap();
    // The grant on b goes before the commit: the commit is checked again, and fails whole.
    s.broker()
        .management()
        .permit("alice", &["send queue b".into()], true)
        .await
        .unwrap();
    let e = expect_code(alice.commit().await, ErrorCode::Unauthorized);
    assert!(e.contains("'send' on queue 'b'"), "{e}");
    assert!(take(&admin, "a").await.is_none());
    assert!(take(&admin, "b").await.is_none());
    // The failed commit rolled back: no transaction is open any more.
    expect_code(alice.commit().await, ErrorCode::TransactionState);
}

#[tokio::test]
async fn permission_changes_take_effect_for_live_sessions() {
    let s = broker(&[], 100).await;
    let admin = login(&s, "admin", "admin", "admin-pw").await.unwrap();
    admin.create_queue("q").await.unwrap();
    let alice = login(&s, "alice", "alice", "alice-pw").await.unwrap();
    expect_code(
        alice.send(OutgoingMessage::new("q", "x")).await,
        ErrorCode::Unauthorized,
    );
    let m = s.broker().management();
    m.permit("alice", &["send queue q".into()], false)
        .await
        .unwrap();
    alice.send(OutgoingMessage::new("q", "x")).await.unwrap();
    m.permit("alice", &["send queue q".into()], true)
        .await
        .unwrap();
    expect_code(
        alice.send(OutgoingMessage::new("q", "y")).await,
        ErrorCode::Unauthorized,
    );
    m.permit("alice", &["send queue q".into()], false)
        .await
        .unwrap();
    m.delete_user("alice").await.unwrap();
    expect_code(
        alice.send(OutgoingMessage::new("q", "z")).await,
        ErrorCode::Unauthorized,
    );
}

#[tokio::test]
async fn failed_attempts_are_limited_per_address() {
    let s = broker(&[], 3).await;
    for _ in 0..3 {
        refused(
            login(&s, "alice", "alice", "guess").await,
            ErrorCode::Unauthorized,
        );
    }
    let m = refused(
        login(&s, "alice", "alice", "alice-pw").await,
        ErrorCode::LimitExceeded,
    );
    assert!(m.contains("too many failed authentications"), "{m}");
}

#[tokio::test]
async fn the_password_check_for_gateways_shares_the_rules() {
    let s = broker(&[], 100).await;
    let m = s.broker().management();
    let ip = Some("127.0.0.1".parse().unwrap());
    assert!(m.login("alice", "alice-pw", ip).await.is_ok());
    assert_eq!(
        m.login("alice", "nope", ip).await.unwrap_err().code,
        ErrorCode::Unauthorized
    );
    assert_eq!(
        m.login("nobody", "x", ip).await.unwrap_err().code,
        ErrorCode::Unauthorized
    );
}

#[tokio::test]
async fn a_non_loopback_listener_without_users_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        listen: "0.0.0.0:0".into(),
        ..test_config(dir.path())
    };
    let e = Broker::start(config.clone()).await.err().expect("refused");
    let text = e.to_string();
    assert!(
        text.contains("--allow-anonymous") && text.contains("ferry user add"),
        "{text}"
    );
    let open = BrokerConfig {
        allow_anonymous: true,
        ..config
    };
    Broker::start(open).await.unwrap().shutdown().await.unwrap();
}
