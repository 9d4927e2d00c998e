//! Hostile clients against the TLS port of the real binary: garbage instead of a handshake,
//! a handshake trickled a byte at a time, clients that vanish mid-handshake, and floods of
//! handshakes that never go further. Each connection is closed (at once for bytes that are not
//! TLS, at the handshake timeout for the slow and the silent), the broker's memory stays
//! bounded, connection slots are given back, and a real client still gets in.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use ferry_client::{Client, ClientTls, ConnectOptions};
use ferry_hostile::probe::RssSampler;
use ferry_testkit::BinaryServer;
use ferry_tls::test_pki::TestPki;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The broker's handshake timeout in these tests.
const HANDSHAKE_MS: u64 = 1000;
/// Resident memory the broker must stay under.
const RSS_BOUND: u64 = 300 << 20;

struct Tls {
    _dir: tempfile::TempDir,
    pki: TestPki,
    server: BinaryServer,
}

fn broker(max_connections: u32) -> Tls {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path(), "t");
    let s = pki.server("server", &["localhost"]);
    let (cert, key) = (s.cert.display().to_string(), s.key.display().to_string());
    let timeout = HANDSHAKE_MS.to_string();
    let max = max_connections.to_string();
    let server = BinaryServer::start(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--handshake-timeout-ms",
        &timeout,
        "--max-connections",
        &max,
        "--fsync",
        "never",
    ])
    .expect("ferry serve starts");
    Tls {
        _dir: dir,
        pki,
        server,
    }
}

impl Tls {
    fn client_tls(&self) -> ClientTls {
        ClientTls {
            ca: Some(self.pki.ca_path()),
            ..ClientTls::default()
        }
    }

    /// A real client still completes a TLS handshake and a session.
    async fn real_client_gets_in(&self, name: &str) {
        let opts = ConnectOptions::new(format!("localhost:{}", self.server.addr().port()), name)
            .tls(self.client_tls());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Client::connect_with(opts.clone()).await {
                Ok(c) => {
                    c.ping().await.expect("ping");
                    return;
                }
                Err(e) if Instant::now() > deadline => panic!("the real client is refused: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// The first record of a real ClientHello for this broker.
    async fn client_hello(&self) -> Vec<u8> {
        let connector = self.client_tls().connector().unwrap();
        let (a, mut b) = tokio::io::duplex(64 * 1024);
        let task = tokio::spawn(async move { connector.connect(a, "localhost:1").await });
        let mut header = [0u8; 5];
        b.read_exact(&mut header).await.unwrap();
        let len = u16::from_be_bytes([header[3], header[4]]) as usize;
        let mut body = vec![0u8; len];
        b.read_exact(&mut body).await.unwrap();
        task.abort();
        [header.to_vec(), body].concat()
    }
}

/// Waits for the broker to close `s`; how long it took (panics past `limit`).
async fn closed_within(s: &mut TcpStream, limit: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((start + limit).into(), s.read(&mut buf)).await {
            Err(_) => panic!("not closed within {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_instead_of_a_handshake_is_closed_at_once_with_bounded_memory() {
    let b = broker(1000);
    let rss = RssSampler::start(b.server.pid().unwrap());
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let addr = b.server.addr();
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(i);
            let mut s = TcpStream::connect(addr).await.unwrap();
            // Random bytes, HTTP, a record header announcing the largest record: up to
            // 256 KiB each.
            let len = rng.gen_range(8..=256 << 10);
            let mut junk = vec![0u8; len];
            rng.fill(&mut junk[..]);
            if i % 4 == 0 {
                junk[..3].copy_from_slice(b"GET");
            }
            if i % 4 == 1 {
                // A handshake record header announcing the largest record, then junk.
                junk.splice(..0, [22u8, 3, 1, 0xff, 0xff]);
            }
            let start = Instant::now();
            let _ = s.write_all(&junk).await;
            let wrote = start.elapsed();
            let took = closed_within(&mut s, Duration::from_secs(15)).await + wrote;
            (i, len, junk[0], wrote, took)
        }));
    }
    let mut slow = Vec::new();
    for t in tasks {
        let (i, len, first, wrote, took) = t.await.unwrap();
        // Closed on the first bytes, not at a timeout; on a loaded machine the accept itself
        // can wait, hence the generous bound.
        if took >= Duration::from_secs(10) {
            slow.push(format!(
                "client {i} ({len} bytes from {first}): written in {wrote:?}, closed after {took:?}"
            ));
        }
    }
    assert!(slow.is_empty(), "{slow:#?}");
    let peak = rss.stop().await;
    assert!(peak < RSS_BOUND, "peak RSS {} MiB", peak >> 20);
    b.real_client_gets_in("after-garbage").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_trickled_byte_by_byte_is_closed_at_the_handshake_timeout() {
    let b = broker(1000);
    let hello = b.client_hello().await;
    let mut s = TcpStream::connect(b.server.addr()).await.unwrap();
    let start = Instant::now();
    for byte in hello.iter().take(40) {
        if s.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    closed_within(&mut s, Duration::from_secs(10)).await;
    let since_connect = start.elapsed();
    assert!(
        since_connect >= Duration::from_millis(HANDSHAKE_MS - 100),
        "closed before the handshake timeout: {since_connect:?}"
    );
    assert!(
        since_connect < Duration::from_millis(HANDSHAKE_MS * 4),
        "closed long after the handshake timeout: {since_connect:?}"
    );
    b.real_client_gets_in("after-trickle").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_vanishing_mid_handshake_give_their_slots_back() {
    // 50 connection slots, 300 clients that send half a ClientHello and vanish (with or
    // without an end of stream first): if any slot leaked, the real client would be refused.
    let b = broker(50);
    let hello = b.client_hello().await;
    for i in 0..300 {
        let mut s = TcpStream::connect(b.server.addr()).await.unwrap();
        let _ = s.write_all(&hello[..hello.len() / 2]).await;
        if i % 2 == 0 {
            let _ = s.shutdown().await;
        }
        drop(s);
    }
    b.real_client_gets_in("after-vanishing").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_handshakes_that_go_no_further_is_bounded_and_closed() {
    // 100 slots and 400 clients that complete the TLS handshake and then say nothing: those
    // over the limit are closed at once, the others at the handshake timeout; memory stays
    // bounded and the slots come back.
    let b = broker(100);
    let rss = RssSampler::start(b.server.pid().unwrap());
    let connector = b.client_tls().connector().unwrap();
    let mut tasks = Vec::new();
    for _ in 0..400 {
        let connector = connector.clone();
        let addr = b.server.addr();
        tasks.push(tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let start = Instant::now();
            match connector.connect(tcp, "localhost:1").await {
                Ok(mut t) => {
                    let mut buf = [0u8; 1024];
                    let r = tokio::time::timeout(Duration::from_secs(10), async {
                        loop {
                            match t.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(_) => {}
                            }
                        }
                    })
                    .await;
                    assert!(r.is_ok(), "an idle TLS client was not closed");
                    (true, start.elapsed())
                }
                Err(_) => (false, start.elapsed()),
            }
        }));
    }
    let mut completed = 0;
    for t in tasks {
        let (done, took) = t.await.unwrap();
        completed += usize::from(done);
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
    let peak = rss.stop().await;
    assert!(peak < RSS_BOUND, "peak RSS {} MiB", peak >> 20);
    assert!(completed <= 400, "{completed}");
    b.real_client_gets_in("after-flood").await;
}
