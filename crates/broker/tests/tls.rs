//! TLS on the native listener against a real broker, with a CA made for each test: the Rust
//! client's handshake, refusals of an unknown CA and a wrong name, a plaintext client closed
//! on its first bytes, mutual TLS mapping a certificate to a user (`EXTERNAL`), and a
//! certificate reload seen by new connections while an open one continues.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{msg, take};
use ferry_client::{Client, ClientError, ClientTls, ConnectOptions};
use ferry_protocol::ErrorCode;
use ferry_testkit::TestServer;
use ferry_tls::test_pki::{Issued, TestPki};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A broker serving TLS with a server certificate from `pki` for localhost and 127.0.0.1;
/// with `mtls` it requires client certificates from the same CA. Users: `alice` (receives
/// and sends on `q`) and `admin`.
async fn broker(pki: &TestPki, mtls: bool) -> (TestServer, Issued) {
    let server = pki.server("server", &["localhost", "127.0.0.1"]);
    let (cert, key, ca) = (server.cert.clone(), server.key.clone(), pki.ca_path());
    let s = TestServer::start_with(move |c| {
        c.tls_cert = Some(cert);
        c.tls_key = Some(key);
        c.tls_client_ca = mtls.then_some(ca);
        c.auth_failure_delay_ms = 0;
    })
    .await;
    let m = s.broker().management();
    m.add_user("admin", "admin-pw", &["admin".into()])
        .await
        .unwrap();
    let grants = ["send queue q".to_owned(), "receive queue q".to_owned()];
    m.add_user("alice", "alice-pw", &grants).await.unwrap();
    m.create_queue("q", Default::default()).await.unwrap();
    (s, server)
}

fn trusting(pki: &TestPki) -> ClientTls {
    ClientTls {
        ca: Some(pki.ca_path()),
        ..ClientTls::default()
    }
}

fn with_cert(pki: &TestPki, issued: &Issued) -> ClientTls {
    ClientTls {
        ca: Some(pki.ca_path()),
        identity: Some((issued.cert.clone(), issued.key.clone())),
        server_name: None,
    }
}

fn io_error(r: Result<Client, ClientError>) -> String {
    match r {
        Err(ClientError::Io(e)) => e.to_string(),
        Err(e) => panic!("expected an I/O (TLS) error, got {e:?}"),
        Ok(_) => panic!("the connection succeeded"),
    }
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

async fn alice_over(s: &TestServer, tls: ClientTls, addr: &str) -> Result<Client, ClientError> {
    let port = s.addr().port();
    let opts = ConnectOptions::new(format!("{addr}:{port}"), "alice")
        .user("alice", "alice-pw")
        .tls(tls);
    Client::connect_with(opts).await
}

#[tokio::test]
async fn the_rust_client_completes_a_handshake_and_works_over_tls() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, false).await;
    for host in ["localhost", "127.0.0.1"] {
        let c = alice_over(&s, trusting(&pki), host).await.expect(host);
        c.send(msg(&["q"], "over tls", 4)).await.unwrap();
        let d = take(&c, "q").await.expect("a message");
        assert_eq!(&d.message.body[..], b"over tls");
        c.disconnect().await.unwrap();
    }
}

#[tokio::test]
async fn the_client_refuses_an_unknown_ca_and_a_certificate_for_another_name() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, false).await;
    let other = TestPki::new(d.path(), "other");
    let e = io_error(alice_over(&s, trusting(&other), "localhost").await);
    assert!(e.contains("UnknownIssuer"), "{e}");
    let wrong_name = ClientTls {
        server_name: Some("broker.example".into()),
        ..trusting(&pki)
    };
    let e = io_error(alice_over(&s, wrong_name, "localhost").await);
    assert!(e.contains("not valid for name"), "{e}");
    // No session was opened by either.
    assert_eq!(s.broker().online_sessions(), 0);
}

#[tokio::test]
async fn a_plaintext_client_is_closed_on_its_first_bytes_without_a_session() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, false).await;
    let stats = s.broker().stats();
    // A Ferry client speaking plain TCP: its Connect is not a TLS record.
    let e = Client::connect(&s.addr_string(), "alice")
        .await
        .expect_err("a plaintext connect succeeded");
    assert!(
        matches!(
            e,
            ClientError::Closed | ClientError::Io(_) | ClientError::Protocol(_)
        ),
        "{e:?}"
    );
    // Raw bytes: the broker answers at most a TLS alert, then closes, long before the
    // handshake timeout, whatever follows.
    let mut raw = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    raw.write_all(&[0u8; 64]).await.unwrap();
    let mut seen = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut seen)).await;
    let _ = closed.expect("the broker did not close the connection");
    assert!(seen.len() <= 7, "at most one TLS alert record: {seen:?}");
    if let Some(first) = seen.first() {
        assert_eq!(*first, 21, "a TLS alert record: {seen:?}");
    }
    assert_eq!(s.broker().online_sessions(), 0);
    assert!(stats.tls_handshakes_failed.load(Ordering::Relaxed) >= 2);
    assert_eq!(stats.sessions_opened.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_client_silent_after_connecting_is_closed_at_the_handshake_timeout() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let server = pki.server("server", &["localhost"]);
    let s = TestServer::start_with(move |c| {
        c.tls_cert = Some(server.cert);
        c.tls_key = Some(server.key);
        c.handshake_timeout_ms = 300;
    })
    .await;
    let mut raw = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    let mut seen = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut seen)).await;
    assert!(r.is_ok(), "a silent client was not closed");
    let failed = s
        .broker()
        .stats()
        .tls_handshakes_failed
        .load(Ordering::Relaxed);
    assert_eq!(failed, 1);
}

#[tokio::test]
async fn mutual_tls_authenticates_the_user_the_certificate_names() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, true).await;
    let alice = pki.client("alice", "alice");
    // No user or password: EXTERNAL, the user is the certificate's CN.
    let opts = ConnectOptions::new(format!("localhost:{}", s.addr().port()), "alice")
        .tls(with_cert(&pki, &alice));
    let c = Client::connect_with(opts).await.expect("EXTERNAL as alice");
    c.send(msg(&["q"], "x", 4)).await.expect("alice's grant");
    // Alice's grants, not more: she may not manage queues.
    let e = c
        .create_queue("other")
        .await
        .expect_err("a queue without the grant");
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e:?}");
    // Alice's name only, like a password user.
    let opts = ConnectOptions::new(format!("localhost:{}", s.addr().port()), "admin")
        .tls(with_cert(&pki, &alice));
    let e = Client::connect_with(opts)
        .await
        .expect_err("alice as admin");
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e:?}");
}

#[tokio::test]
async fn mutual_tls_refuses_unknown_subjects_other_cas_and_clients_without_a_certificate() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, true).await;
    let addr = format!("localhost:{}", s.addr().port());
    // A certificate from the right CA for a user that does not exist.
    let mallory = pki.client("mallory", "mallory");
    let opts = ConnectOptions::new(addr.clone(), "mallory").tls(with_cert(&pki, &mallory));
    let e = Client::connect_with(opts)
        .await
        .expect_err("unknown subject");
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e:?}");
    assert!(e.to_string().contains("mallory"), "{e}");
    // A certificate naming alice from another CA: refused in the TLS handshake.
    let other = TestPki::new(d.path(), "other");
    let forged = other.client("forged", "alice");
    let opts = ConnectOptions::new(addr.clone(), "alice").tls(with_cert(&pki, &forged));
    let e = Client::connect_with(opts)
        .await
        .expect_err("forged certificate");
    assert!(
        matches!(e, ClientError::Io(_) | ClientError::Closed),
        "{e:?}"
    );
    // No certificate at all, even with the right password: mutual TLS requires one.
    let e = alice_over(&s, trusting(&pki), "localhost")
        .await
        .expect_err("no cert");
    assert!(
        matches!(e, ClientError::Io(_) | ClientError::Closed),
        "{e:?}"
    );
    // A certificate and a password: SCRAM decides, over the mutual TLS connection.
    let alice = pki.client("alice", "alice");
    let c = alice_over(&s, with_cert(&pki, &alice), "localhost").await;
    c.expect("SCRAM over mutual TLS");
    let stats = s.broker().stats();
    assert!(stats.auth_failed.load(Ordering::Relaxed) >= 1);
}

#[tokio::test]
async fn external_without_a_client_certificate_is_refused() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, false).await;
    // Server-only TLS: a client certificate is not asked for, so none is verified.
    let alice = pki.client("alice", "alice");
    let opts = ConnectOptions::new(format!("localhost:{}", s.addr().port()), "alice")
        .tls(with_cert(&pki, &alice));
    let e = Client::connect_with(opts)
        .await
        .expect_err("EXTERNAL without mTLS");
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e:?}");
    assert!(e.to_string().contains("EXTERNAL"), "{e}");
}

fn replace_files(from: &Issued, to: &Issued) {
    std::fs::copy(&from.cert, &to.cert).expect("copy cert");
    std::fs::copy(&from.key, &to.key).expect("copy key");
}

fn ca_only(p: &Path) -> ClientTls {
    ClientTls {
        ca: Some(p.to_owned()),
        ..ClientTls::default()
    }
}

#[tokio::test]
async fn a_reload_serves_new_connections_the_new_certificate_while_open_ones_continue() {
    let d = dir();
    let old = TestPki::new(d.path(), "old");
    let (s, files) = broker(&old, false).await;
    let before = alice_over(&s, ca_only(&old.ca_path()), "localhost")
        .await
        .expect("old certificate");
    let new = TestPki::new(d.path(), "new");
    replace_files(&new.server("server", &["localhost"]), &files);
    // Not yet reloaded: new connections still get the old certificate.
    assert!(alice_over(&s, ca_only(&new.ca_path()), "localhost")
        .await
        .is_err());
    assert!(s.broker().reload_tls().expect("reload"));
    let after = alice_over(&s, ca_only(&new.ca_path()), "localhost");
    let after = tokio::time::timeout(Duration::from_secs(10), after)
        .await
        .expect("in time")
        .err()
        .map(|e| e.to_string());
    // `alice` is still online on the old connection: the new session is refused by name,
    // after a TLS handshake that succeeded with the new certificate.
    let e = after.expect("a second alice");
    assert!(e.contains("online") || e.contains("already"), "{e}");
    let e = io_error(alice_over(&s, ca_only(&old.ca_path()), "localhost").await);
    assert!(
        e.contains("UnknownIssuer"),
        "the old certificate after the reload: {e}"
    );
    // The old connection goes on.
    before.send(msg(&["q"], "still here", 4)).await.unwrap();
    let got = take(&before, "q").await.expect("a message");
    assert_eq!(&got.message.body[..], b"still here");
}

#[tokio::test]
async fn a_missing_certificate_stops_the_start_naming_the_file() {
    let d = dir();
    let mut config = ferry_testkit::test_config(d.path());
    config.tls_cert = Some(d.path().join("absent.pem"));
    config.tls_key = Some(d.path().join("absent.key"));
    let e = ferry_broker::Broker::start(config)
        .await
        .err()
        .expect("started");
    assert!(e.to_string().contains("absent.pem"), "{e}");
}

#[tokio::test]
async fn tls_does_not_let_a_broker_without_users_listen_beyond_loopback() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let server = pki.server("server", &["localhost"]);
    let mut config = ferry_testkit::test_config(&d.path().join("data"));
    config.listen = "0.0.0.0:0".into();
    config.tls_cert = Some(server.cert);
    config.tls_key = Some(server.key);
    config.tls_client_ca = Some(pki.ca_path());
    let e = ferry_broker::Broker::start(config)
        .await
        .err()
        .expect("started");
    assert!(e.to_string().contains("with no users"), "{e}");
}

#[tokio::test]
async fn publish_batches_written_from_their_own_buffers_arrive_byte_exact_over_tls() {
    let d = dir();
    let pki = TestPki::new(d.path(), "t");
    let (s, _) = broker(&pki, false).await;
    let port = s.addr().port();
    let admin = Client::connect_with(
        ConnectOptions::new(format!("127.0.0.1:{port}"), "admin")
            .user("admin", "admin-pw")
            .tls(trusting(&pki)),
    )
    .await
    .unwrap();
    admin.create_topic("ticks").await.unwrap();
    let mut sub = admin
        .subscribe_topic(
            ferry_client::SubscribeTopic::new("ticks").ack(ferry_protocol::AckMode::Auto),
        )
        .await
        .unwrap();
    // Each batch's bodies (200 KB, many TLS records) go out as a slice of their own beside
    // the small frames gathered around them: three batches and sends in flight at once.
    let body = |b: usize, i: usize| {
        bytes::Bytes::from(
            (0..1000)
                .map(|j| (b * 31 + i * 7 + j) as u8)
                .collect::<Vec<u8>>(),
        )
    };
    let batch = |b: usize| {
        ferry_protocol::PublishBatch::new("ticks", (0..200).map(|i| body(b, i)).collect::<Vec<_>>())
            .non_persistent()
    };
    let (r0, r1, r2, sent) = tokio::join!(
        admin.publish_batch(batch(0)),
        admin.publish_batch(batch(1)),
        admin.publish_batch(batch(2)),
        admin.send(msg(&["q"], "between", 4)),
    );
    sent.unwrap();
    let mut want = Vec::new();
    for (b, r) in [r0, r1, r2].into_iter().enumerate() {
        let ids: Vec<u64> = r.unwrap().into_iter().map(Result::unwrap).collect();
        assert_eq!(ids.len(), 200);
        want.extend(ids.into_iter().enumerate().map(|(i, id)| (id, body(b, i))));
    }
    let mut got = Vec::new();
    while got.len() < want.len() {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("every delivery")
            .unwrap()
            .unwrap();
        got.push((d.message.id, d.message.body));
    }
    got.sort_by_key(|(id, _)| *id);
    want.sort_by_key(|(id, _)| *id);
    assert!(got == want, "a body arrived cut or changed");
    let d = take(&admin, "q")
        .await
        .expect("the send between the batches");
    assert_eq!(&d.message.body[..], b"between");
}
