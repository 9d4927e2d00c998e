//! TLS against the real `ferry serve` process: `openssl s_client` completes a handshake on the
//! native and HTTP listeners, the CLI's `--tls`, `--ca`, `--cert` and `--key`, a plaintext
//! CLI refused, a client certificate authenticating as its user, and SIGHUP reloading the
//! certificate for new connections while an open one continues.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_client::{Client, ClientTls, ConnectOptions};
use ferry_testkit::BinaryServer;
use ferry_tls::test_pki::{Issued, TestPki};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::ferry_path;

fn tls_args(server: &Issued) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        server.cert.display().to_string(),
        "--tls-key".into(),
        server.key.display().to_string(),
    ]
}

fn start(args: &[String]) -> BinaryServer {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    BinaryServer::start(&a).expect("ferry serve starts")
}

/// `ferry ARGS` with `--server localhost:PORT`: exit code, stdout and stderr.
fn ferry(port: u16, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(ferry_path())
        .args(args)
        .arg("--server")
        .arg(format!("localhost:{port}"))
        .env_remove("FERRY_SERVER")
        .env_remove("FERRY_TLS")
        .env_remove("FERRY_CA")
        .stdin(Stdio::null())
        .output()
        .expect("run ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `openssl s_client` against `port` trusting `ca`, with `extra` arguments; its output, or
/// `None` (with the reason printed) when openssl is not installed.
fn s_client(port: u16, ca: &Path, extra: &[&str]) -> Option<String> {
    let out = Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args([
            "-servername",
            "localhost",
            "-verify_return_error",
            "-CAfile",
        ])
        .arg(ca)
        .args(extra)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) => Some(format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => {
            eprintln!("skipped: openssl is not installed ({e}); scripts/test installs it");
            None
        }
    }
}

#[test]
fn openssl_s_client_completes_a_handshake_on_the_native_and_http_listeners() {
    let d = tempfile::tempdir().unwrap();
    let pki = TestPki::new(d.path(), "t");
    let s = start(&tls_args(
        &pki.server("server", &["localhost", "127.0.0.1"]),
    ));
    let http = s.http_addr().expect("http on").port();
    for port in [s.addr().port(), http] {
        let Some(out) = s_client(port, &pki.ca_path(), &[]) else {
            return;
        };
        assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
        assert!(out.contains("TLSv1.3"), "{out}");
    }
    // A CA it does not trust: openssl refuses the broker's certificate.
    let other = TestPki::new(d.path(), "other");
    let out = s_client(s.addr().port(), &other.ca_path(), &[]).expect("openssl");
    assert!(!out.contains("Verify return code: 0 (ok)"), "{out}");
}

#[test]
fn the_cli_connects_with_ca_and_is_refused_without_tls_or_with_an_unknown_ca() {
    let d = tempfile::tempdir().unwrap();
    let pki = TestPki::new(d.path(), "t");
    let s = start(&tls_args(&pki.server("server", &["localhost"])));
    let port = s.addr().port();
    let ca = pki.ca_path().display().to_string();
    let (code, _, err) = ferry(port, &["queue", "create", "orders", "--ca", &ca]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ferry(port, &["send", "--queue", "orders", "hello", "--ca", &ca]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = ferry(port, &["recv", "--queue", "orders", "--ca", &ca]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hello"), "{out}");
    // Plain TCP against the TLS port.
    let (code, _, err) = ferry(port, &["queue", "list"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("ferry: cannot connect"), "{err}");
    // --tls alone trusts the system's roots, which did not sign this certificate.
    let (code, _, err) = ferry(port, &["queue", "list", "--tls"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
}

#[test]
fn a_client_certificate_authenticates_the_cli_as_its_user() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    let pki = TestPki::new(d.path(), "t");
    let add = Command::new(ferry_path())
        .args(["user", "add", "alice", "--password-stdin", "--data-dir"])
        .arg(&data)
        .args([
            "--grant",
            "manage queue alice-*",
            "--grant",
            "send queue alice-*",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(b"pw\n")?;
            c.wait()
        })
        .expect("ferry user add");
    assert!(add.success());
    let mut args = tls_args(&pki.server("server", &["localhost"]));
    args.extend([
        "--tls-client-ca".into(),
        pki.ca_path().display().to_string(),
    ]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = BinaryServer::start_in(&data, &a).expect("ferry serve");
    let port = s.addr().port();
    let alice = pki.client("alice", "alice");
    let (cert, key) = (
        alice.cert.display().to_string(),
        alice.key.display().to_string(),
    );
    let ca = pki.ca_path().display().to_string();
    let with_cert = ["--ca", &ca, "--cert", &cert, "--key", &key];
    let mut create = vec!["queue", "create", "alice-in"];
    create.extend(with_cert);
    let (code, _, err) = ferry(port, &create);
    assert_eq!(code, 0, "{err}");
    let mut forbidden = vec!["queue", "create", "bob-in"];
    forbidden.extend(with_cert);
    let (code, _, err) = ferry(port, &forbidden);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("user 'alice' lacks 'manage'"), "{err}");
    // Without a certificate, mutual TLS refuses the connection itself.
    let (code, _, err) = ferry(port, &["queue", "list", "--ca", &ca]);
    assert_eq!(code, 1, "{err}");
}

async fn connect(port: u16, ca: &Path, name: &str) -> Result<Client, ferry_client::ClientError> {
    let tls = ClientTls {
        ca: Some(ca.to_owned()),
        ..ClientTls::default()
    };
    Client::connect_with(ConnectOptions::new(format!("localhost:{port}"), name).tls(tls)).await
}

#[tokio::test]
async fn sighup_reloads_the_certificate_for_new_connections_while_open_ones_continue() {
    let d = tempfile::tempdir().unwrap();
    let old = TestPki::new(d.path(), "old");
    let files = old.server("server", &["localhost"]);
    let s = start(&tls_args(&files));
    let port = s.addr().port();
    let open = connect(port, &old.ca_path(), "before")
        .await
        .expect("old cert");
    let new = TestPki::new(d.path(), "new");
    let fresh = new.server("fresh", &["localhost"]);
    std::fs::copy(&fresh.cert, &files.cert).unwrap();
    std::fs::copy(&fresh.key, &files.key).unwrap();
    assert!(
        connect(port, &new.ca_path(), "early").await.is_err(),
        "no reload yet"
    );
    let hup = Command::new("kill")
        .args(["-HUP", &s.pid().expect("pid").to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        match connect(port, &new.ca_path(), "after").await {
            Ok(c) => break c,
            Err(e) if Instant::now() > deadline => panic!("no reload after SIGHUP: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    after.ping().await.unwrap();
    open.ping()
        .await
        .expect("the connection opened before the reload continues");
    let e = connect(port, &old.ca_path(), "late")
        .await
        .expect_err("old cert served");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
}

#[tokio::test]
async fn the_http_api_speaks_tls_with_the_same_certificate() {
    let d = tempfile::tempdir().unwrap();
    let pki = TestPki::new(d.path(), "t");
    let s = start(&tls_args(&pki.server("server", &["localhost"])));
    let http = s.http_addr().expect("http on");
    let tls = ClientTls {
        ca: Some(pki.ca_path()),
        ..ClientTls::default()
    };
    let tcp = tokio::net::TcpStream::connect(http).await.unwrap();
    let connector = tls.connector().unwrap();
    let mut t = connector
        .connect(tcp, &format!("localhost:{}", http.port()))
        .await
        .expect("TLS handshake with the HTTP listener");
    t.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    let _ = t.read_to_string(&mut answer).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Plain HTTP on the same port gets no answer: the connection is closed.
    let mut plain = tokio::net::TcpStream::connect(http).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut seen))
        .await
        .expect("closed");
    assert!(
        !String::from_utf8_lossy(&seen).contains("HTTP/1.1"),
        "{seen:?}"
    );
}

#[test]
fn the_admin_commands_reach_the_http_api_over_tls_with_http_ca() {
    let d = tempfile::tempdir().unwrap();
    let pki = TestPki::new(d.path(), "t");
    let s = start(&tls_args(&pki.server("server", &["localhost"])));
    let http = format!("localhost:{}", s.http_addr().expect("http on").port());
    let status = |extra: &[&str]| {
        let out = Command::new(ferry_path())
            .args(["status", "--http", &http])
            .args(extra)
            .env_remove("FERRY_TLS")
            .env_remove("FERRY_CA")
            .env_remove("FERRY_HTTP")
            .stdin(Stdio::null())
            .output()
            .expect("run ferry status");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let ca = pki.ca_path().display().to_string();
    let (ok, out) = status(&["--http-ca", &ca]);
    assert!(ok, "status over https with the CA: {out}");
    assert!(out.contains("queues"), "{out}");
    // Plain HTTP against the TLS listener, and TLS trusting only the system roots, both fail.
    let (ok, out) = status(&[]);
    assert!(!ok, "plain HTTP must not reach a TLS listener: {out}");
    assert!(
        out.contains("HTTP API at"),
        "a one-line error, not a panic: {out}"
    );
    let (ok, out) = status(&["--http-tls"]);
    assert!(!ok, "an unknown CA must be refused: {out}");
    assert!(
        out.contains("HTTP API at"),
        "a one-line error, not a panic: {out}"
    );
}
