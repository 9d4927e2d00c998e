//! What the scenarios against the real binary share: it with its HTTP listener on, and a start
//! it must refuse.
// Each test binary uses part of this module.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_testkit::BinaryServer;

/// `ferry serve` with default settings, and its HTTP address.
pub fn start() -> (BinaryServer, SocketAddr) {
    start_with(&[])
}

/// `ferry serve` with `flags`, and its HTTP address.
pub fn start_with(flags: &[&str]) -> (BinaryServer, SocketAddr) {
    let server = BinaryServer::start(flags).expect("ferry serve starts (cargo build -p ferry)");
    let http = server.http_addr().expect("the HTTP listener is on");
    (server, http)
}

/// `ferry serve` with `flags` on a fresh data directory, which must refuse to start: its
/// standard error.
pub fn refused_at_start(flags: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(ferry_testkit::ferry_bin())
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
        .args(["--stomp-listen", "off"])
        .args(flags)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ferry serve runs (cargo build -p ferry)");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("ferry serve {flags:?} {env:?} started");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{flags:?}: {status}, {err}");
    // Nothing was opened, let alone served: the store writes its files before the broker's
    // listeners answer (and a stopping broker removes its `runtime.toml`).
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "{flags:?} got as far as opening the store: {left:?}"
    );
    err
}
