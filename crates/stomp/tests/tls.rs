//! STOMP over TLS against the real binary: with `--tls-cert` and `--tls-key` the STOMP
//! listener speaks TLS with the broker's certificate, and a plaintext client gets nothing.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::Duration;

use ferry_testkit::BinaryServer;
use ferry_tls::test_pki::TestPki;
use ferry_tls::ClientTls;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONNECT: &[u8] = b"CONNECT\naccept-version:1.2\nhost:/\n\n\0";

#[tokio::test]
async fn the_stomp_listener_speaks_tls_with_the_brokers_certificate() {
    let d = tempfile::tempdir().unwrap();
    let pki = TestPki::new(d.path(), "t");
    let server = pki.server("server", &["localhost"]);
    let cert = server.cert.display().to_string();
    let key = server.key.display().to_string();
    let data = d.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let s = BinaryServer::start_in(&data, &["--tls-cert", &cert, "--tls-key", &key])
        .expect("ferry serve starts");
    let addr = s.stomp_addr().expect("the STOMP listener is on");

    let tls = ClientTls {
        ca: Some(pki.ca_path()),
        ..ClientTls::default()
    };
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut t = tls
        .connector()
        .unwrap()
        .connect(tcp, &format!("localhost:{}", addr.port()))
        .await
        .expect("TLS handshake with the STOMP listener");
    t.write_all(CONNECT).await.unwrap();
    let mut answer = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(20), t.read(&mut answer))
        .await
        .expect("an answer in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    assert!(answer.starts_with("CONNECTED\n"), "{answer:?}");

    // A plaintext STOMP client on the TLS port gets no STOMP answer: it is closed.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(CONNECT).await.unwrap();
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), plain.read_to_end(&mut seen))
        .await
        .expect("closed in time");
    assert!(
        !String::from_utf8_lossy(&seen).contains("CONNECTED"),
        "{seen:?}"
    );
}
