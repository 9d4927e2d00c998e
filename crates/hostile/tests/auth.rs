//! Hostile clients against authentication, on the real binary with a user made offline
//! (`ferry user add --data-dir` before the first start): brute force, malformed and oversized
//! SCRAM messages, steps out of order, clients that vanish mid-exchange, and random bytes.
//! Each ends in `Unauthorized` (or `LimitExceeded`) and a closed connection, never in a
//! session, and the broker goes on serving the real user.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::{Command, Stdio};

use ferry_auth::ScramClient;
use ferry_client::{Client, ConnectOptions};
use ferry_protocol::requests::Connect;
use ferry_protocol::{ErrorCode, Request, Response, PROTOCOL_VERSION};
use ferry_testkit::{ferry_bin, BinaryServer, RawConn};
use rand::{Rng, SeedableRng};

const PASSWORD: &str = "correct horse";

/// What a hostile client sends after the challenge, given the combined nonce.
type SecondStep = dyn Fn(&str) -> Request;

/// A broker whose one user is `alice` (admin), started with `extra` flags.
fn broker(dir: &Path, extra: &[&str]) -> BinaryServer {
    let mut add = Command::new(ferry_bin())
        .args([
            "user",
            "add",
            "alice",
            "--grant",
            "admin",
            "--password-stdin",
            "--data-dir",
        ])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("ferry user add");
    use std::io::Write as _;
    writeln!(add.stdin.take().unwrap(), "{PASSWORD}").unwrap();
    assert!(add.wait().unwrap().success(), "the user is added offline");
    let mut args = vec!["--auth-failure-delay-ms", "0"];
    args.extend_from_slice(extra);
    BinaryServer::start_in(dir, &args).expect("ferry serve starts")
}

fn connect(mechanism: &str, credentials: String) -> Connect {
    Connect {
        version: PROTOCOL_VERSION,
        client: "alice".into(),
        mechanism: mechanism.into(),
        credentials,
        keepalive_ms: 0,
        flags: 0,
    }
}

/// The real user still gets in (nothing was left holding its name).
async fn alice_gets_in(b: &BinaryServer) {
    let opts = ConnectOptions::new(b.addr().to_string(), "alice").user("alice", PASSWORD);
    let c = Client::connect_with(opts).await.expect("alice connects");
    c.ping().await.unwrap();
}

fn refused(r: Response, code: ErrorCode) {
    match r {
        Response::Error(e) => assert_eq!(e.code, code, "{e}"),
        other => panic!("expected {code}, got {other:?}"),
    }
}

#[tokio::test]
async fn brute_force_is_limited_per_address_even_for_the_right_password() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), &["--max-auth-failures-per-min", "5"]);
    let addr = b.addr().to_string();
    for i in 0..5 {
        let opts = ConnectOptions::new(addr.clone(), "alice").user("alice", format!("guess{i}"));
        let e = Client::connect_with(opts).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e}");
    }
    let opts = ConnectOptions::new(addr, "alice").user("alice", PASSWORD);
    let e = Client::connect_with(opts).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::LimitExceeded), "{e}");
}

#[tokio::test]
async fn malformed_and_oversized_client_first_messages_close_without_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), &["--max-auth-failures-per-min", "0"]);
    let addr = b.addr().to_string();
    let long = format!("n,,n=alice,r={}", "x".repeat(60_000));
    for first in [
        "",
        "n",
        "p=tls-server-end-point,,n=alice,r=abc",
        "n,a=root,n=alice,r=abc",
        "n,,r=abc,n=alice",
        "n,,n=alice",
        "n,,n=al=ZZice,r=abc",
        "n,,n=alice,r=a,b",
        "\u{0}\u{1}\u{2}",
        long.as_str(),
    ] {
        let mut raw = RawConn::open(&addr).await.unwrap();
        let reply = raw
            .handshake(connect("SCRAM-SHA-256", first.to_owned()))
            .await
            .unwrap();
        refused(reply, ErrorCode::Unauthorized);
        assert!(
            raw.closed_by_peer().await,
            "{first:.40}: the connection closes"
        );
    }
    alice_gets_in(&b).await;
}

#[tokio::test]
async fn steps_out_of_order_and_bad_proofs_never_open_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), &["--max-auth-failures-per-min", "0"]);
    let addr = b.addr().to_string();
    // An AuthResponse with no exchange started is a request before connect.
    let mut raw = RawConn::open(&addr).await.unwrap();
    raw.send(
        1,
        &Request::AuthResponse {
            data: "c=biws,r=x,p=AAAA".into(),
        },
    )
    .await
    .unwrap();
    refused(raw.recv().await.unwrap().1, ErrorCode::Unauthorized);
    // After the challenge: another request, a second Connect, a wrong proof, a proof for
    // another nonce.
    let seconds: Vec<Box<SecondStep>> = vec![
        Box::new(|_| Request::ListQueues),
        Box::new(|_| Request::Connect(connect("", String::new()))),
        Box::new(|nonce| Request::AuthResponse {
            data: format!("c=biws,r={nonce},p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        }),
        Box::new(|_| Request::AuthResponse {
            data: "c=biws,r=someoneelse,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into(),
        }),
        Box::new(|nonce| Request::AuthResponse {
            data: format!("c=eSws,r={nonce},p=AAAA"),
        }),
    ];
    for second in seconds {
        let (_, first) = ScramClient::new("alice", PASSWORD);
        let mut raw = RawConn::open(&addr).await.unwrap();
        let Response::AuthChallenge { data } = raw
            .handshake(connect("SCRAM-SHA-256", first))
            .await
            .unwrap()
        else {
            panic!("expected a challenge");
        };
        let nonce = data.split(',').next().unwrap().trim_start_matches("r=");
        raw.send(2, &second(nonce)).await.unwrap();
        refused(raw.recv().await.unwrap().1, ErrorCode::Unauthorized);
        assert!(raw.closed_by_peer().await);
    }
    alice_gets_in(&b).await;
}

#[tokio::test]
async fn clients_that_vanish_mid_exchange_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), &["--max-auth-failures-per-min", "0"]);
    let addr = b.addr().to_string();
    for i in 0..200 {
        let (_, first) = ScramClient::new("alice", PASSWORD);
        let mut raw = RawConn::open(&addr).await.unwrap();
        raw.send(1, &Request::Connect(connect("SCRAM-SHA-256", first)))
            .await
            .unwrap();
        if i % 2 == 0 {
            // Wait for the challenge, then reset.
            let _ = raw.recv().await.unwrap();
        }
        raw.reset();
    }
    alice_gets_in(&b).await;
}

#[tokio::test]
async fn random_bytes_in_every_step_never_authenticate() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), &["--max-auth-failures-per-min", "0"]);
    let addr = b.addr().to_string();
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let text = |rng: &mut rand::rngs::StdRng| -> String {
        let n = rng.gen_range(0..200);
        (0..n)
            .map(|_| rng.gen_range(0x20u8..0x7f) as char)
            .collect()
    };
    for _ in 0..100 {
        let mut raw = RawConn::open(&addr).await.unwrap();
        let garbage = text(&mut rng);
        let first = if rng.gen_bool(0.5) {
            format!("n,,n=alice,r={}", garbage.replace(',', ""))
        } else {
            garbage
        };
        match raw
            .handshake(connect("SCRAM-SHA-256", first))
            .await
            .unwrap()
        {
            Response::AuthChallenge { .. } => {
                let data = text(&mut rng);
                raw.send(2, &Request::AuthResponse { data }).await.unwrap();
                refused(raw.recv().await.unwrap().1, ErrorCode::Unauthorized);
            }
            other => refused(other, ErrorCode::Unauthorized),
        }
        assert!(raw.closed_by_peer().await);
    }
    alice_gets_in(&b).await;
}
