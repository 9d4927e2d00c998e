//! Handshakes over in-memory pipes with certificates made for each test.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::test_pki::TestPki;
use crate::{host_of, Acceptor, ClientTls, HandshakeError, ServerFiles};

const TIMEOUT: Duration = Duration::from_secs(5);

fn server_files(pki: &TestPki, mtls: bool) -> ServerFiles {
    let s = pki.server("server", &["localhost", "127.0.0.1"]);
    ServerFiles {
        cert: s.cert,
        key: s.key,
        client_ca: mtls.then(|| pki.ca_path()),
    }
}

/// Runs one handshake; the server's result, and the client's.
async fn handshake(
    acceptor: &Acceptor,
    client: &ClientTls,
    addr: &str,
) -> (Result<Option<String>, HandshakeError>, std::io::Result<()>) {
    let (c, s) = tokio::io::duplex(64 * 1024);
    let connector = client.connector().expect("client config");
    let server = async {
        let mut a = acceptor.accept(s, TIMEOUT).await?;
        let mut b = [0u8; 5];
        a.stream
            .read_exact(&mut b)
            .await
            .map_err(HandshakeError::Failed)?;
        assert_eq!(&b, b"hello");
        Ok(a.user)
    };
    let client = async {
        let mut t = connector.connect(c, addr).await?;
        t.write_all(b"hello").await?;
        t.flush().await?;
        // Keeps the stream open until the server has read.
        let mut b = [0u8; 1];
        let _ = tokio::time::timeout(Duration::from_millis(200), t.read(&mut b)).await;
        Ok(())
    };
    tokio::join!(server, client)
}

#[tokio::test]
async fn a_client_trusting_the_ca_completes_a_handshake_by_name_and_by_address() {
    let dir = tempfile::tempdir().expect("dir");
    let pki = TestPki::new(dir.path(), "t");
    let acceptor = Acceptor::load(server_files(&pki, false)).expect("acceptor");
    let client = ClientTls {
        ca: Some(pki.ca_path()),
        ..ClientTls::default()
    };
    for addr in ["localhost:6730", "127.0.0.1:6730"] {
        let (s, c) = handshake(&acceptor, &client, addr).await;
        c.expect("client handshake");
        assert_eq!(s.expect("server handshake"), None);
    }
}

#[tokio::test]
async fn a_client_refuses_an_unknown_ca_and_a_wrong_name() {
    let dir = tempfile::tempdir().expect("dir");
    let pki = TestPki::new(dir.path(), "t");
    let other = TestPki::new(dir.path(), "other");
    let acceptor = Acceptor::load(server_files(&pki, false)).expect("acceptor");
    let stranger = ClientTls {
        ca: Some(other.ca_path()),
        ..ClientTls::default()
    };
    let (_, c) = handshake(&acceptor, &stranger, "localhost:1").await;
    let e = c.expect_err("unknown CA accepted");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    let trusting = ClientTls {
        ca: Some(pki.ca_path()),
        ..ClientTls::default()
    };
    let (_, c) = handshake(&acceptor, &trusting, "broker.example:1").await;
    let e = c.expect_err("wrong name accepted");
    assert!(e.to_string().contains("not valid for name"), "{e}");
}

#[tokio::test]
async fn mutual_tls_names_the_user_of_the_client_certificate_and_refuses_clients_without_one() {
    let dir = tempfile::tempdir().expect("dir");
    let pki = TestPki::new(dir.path(), "t");
    let acceptor = Acceptor::load(server_files(&pki, true)).expect("acceptor");
    let alice = pki.client("alice", "alice");
    let with_cert = ClientTls {
        ca: Some(pki.ca_path()),
        identity: Some((alice.cert, alice.key)),
        server_name: None,
    };
    let (s, c) = handshake(&acceptor, &with_cert, "localhost:1").await;
    c.expect("client");
    assert_eq!(s.expect("server").as_deref(), Some("alice"));

    let without = ClientTls {
        ca: Some(pki.ca_path()),
        ..ClientTls::default()
    };
    let (s, _) = handshake(&acceptor, &without, "localhost:1").await;
    assert!(
        matches!(s, Err(HandshakeError::Failed(_))),
        "no certificate accepted"
    );

    let other = TestPki::new(dir.path(), "other");
    let mallory = other.client("mallory", "alice");
    let forged = ClientTls {
        ca: Some(pki.ca_path()),
        identity: Some((mallory.cert, mallory.key)),
        server_name: None,
    };
    let (s, _) = handshake(&acceptor, &forged, "localhost:1").await;
    let e = s.expect_err("a certificate from another CA accepted");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
}

#[tokio::test]
async fn a_reload_serves_new_handshakes_with_the_new_certificate() {
    let dir = tempfile::tempdir().expect("dir");
    let old = TestPki::new(dir.path(), "old");
    let files = server_files(&old, false);
    let acceptor = Acceptor::load(files.clone()).expect("acceptor");
    let new = TestPki::new(dir.path(), "new");
    let issued = new.server("server", &["localhost"]);
    std::fs::copy(&issued.cert, &files.cert).expect("copy");
    std::fs::copy(&issued.key, &files.key).expect("copy");
    let trusts_new = ClientTls {
        ca: Some(new.ca_path()),
        ..ClientTls::default()
    };
    let (_, c) = handshake(&acceptor, &trusts_new, "localhost:1").await;
    assert!(c.is_err(), "the new certificate served before the reload");
    acceptor.reload().expect("reload");
    let (_, c) = handshake(&acceptor, &trusts_new, "localhost:1").await;
    c.expect("the new certificate after the reload");

    // A broken file leaves the current certificate in force.
    std::fs::write(&files.key, "not a key").expect("write");
    let e = acceptor.reload().expect_err("a broken key loaded");
    assert!(e.to_string().contains("no PRIVATE KEY"), "{e}");
    let (_, c) = handshake(&acceptor, &trusts_new, "localhost:1").await;
    c.expect("the certificate in force after a failed reload");
}

#[tokio::test]
async fn plaintext_is_refused_on_its_first_bytes_and_silence_times_out() {
    let dir = tempfile::tempdir().expect("dir");
    let pki = TestPki::new(dir.path(), "t");
    let acceptor = Acceptor::load(server_files(&pki, false)).expect("acceptor");
    let (mut c, s) = tokio::io::duplex(1024);
    c.write_all(b"\x00\x00\x00\x10not tls at all, a Ferry frame")
        .await
        .expect("write");
    let r = acceptor.accept(s, TIMEOUT).await;
    assert!(
        matches!(r, Err(HandshakeError::Failed(_))),
        "plaintext accepted"
    );

    let (_c, s) = tokio::io::duplex(1024);
    let r = acceptor.accept(s, Duration::from_millis(50)).await;
    assert!(
        matches!(r, Err(HandshakeError::Timeout(_))),
        "silence accepted"
    );
}

#[test]
fn files_that_are_missing_or_empty_are_named_in_the_error() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = ServerFiles {
        cert: dir.path().join("nope.pem"),
        key: dir.path().join("nope.key"),
        client_ca: None,
    };
    let e = Acceptor::load(missing).expect_err("missing file");
    assert!(e.to_string().contains("nope.pem"), "{e}");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let e = crate::load_certs(&empty).expect_err("empty file");
    assert!(e.to_string().contains("no CERTIFICATE"), "{e}");
}

#[test]
fn the_host_is_cut_from_the_address() {
    assert_eq!(host_of("localhost:6730"), "localhost");
    assert_eq!(host_of("10.0.0.1:6730"), "10.0.0.1");
    assert_eq!(host_of("[::1]:6730"), "::1");
    assert_eq!(host_of("broker"), "broker");
    assert_eq!(host_of("::1"), "::1");
}

#[tokio::test]
async fn a_record_header_announcing_too_much_is_refused_without_waiting_for_it() {
    let dir = tempfile::tempdir().expect("dir");
    let pki = TestPki::new(dir.path(), "t");
    let acceptor = Acceptor::load(server_files(&pki, false)).expect("acceptor");
    let (mut c, s) = tokio::io::duplex(1 << 20);
    let mut junk = vec![22u8, 3, 1, 0xff, 0xff];
    junk.extend((0..100_000u32).map(|i| (i * 7919 % 251) as u8));
    c.write_all(&junk).await.expect("write");
    let start = std::time::Instant::now();
    let r = acceptor.accept(s, TIMEOUT).await;
    eprintln!("{:?} after {:?}", r.as_ref().err(), start.elapsed());
    assert!(matches!(r, Err(HandshakeError::Failed(_))), "accepted");
}
