//! Interoperability with STOMP clients nobody here wrote, against the real `ferry` binary:
//! - `support/stomppy_interop.py`: stomp.py (PyPI) over TCP: queues and topics, the three ack
//!   modes, STOMP 1.1 and 1.0, nack and redelivery, transactions committed and aborted (sends and acks), a
//!   selector, wildcards, a durable subscription across a disconnect and a `kill -9`, a
//!   transaction that is all or nothing across `kill -9` at random points,
//!   receipts, heart-beats, a 2 MB binary body, and messages crossing between STOMP and the
//!   CLI with their priority and properties;
//! - `support/stompjs/interop.mjs`: `@stomp/stompjs` (npm) in Node over WebSocket;
//! - `support/stomp_page.py`: a page in headless Chromium (Playwright) subscribed over
//!   WebSocket shows a message published with the CLI.
//!
//! `scripts/test` installs stomp.py, the npm packages, Playwright and Chromium.

use std::process::Command;

fn support(file: &str) -> String {
    format!("{}/tests/support/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} cannot start: {e} (scripts/test installs it)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("every check passed"),
        "{what}: {stdout}\n{stderr}"
    );
}

#[test]
fn stomp_py_works_against_ferry() {
    run(
        Command::new("python3")
            .arg(support("stomppy_interop.py"))
            .arg("--ferry")
            .arg(ferry_testkit::ferry_bin()),
        "the stomp.py interop script",
    );
}

/// A broker binary with the HTTP (WebSocket) and STOMP listeners on free ports.
fn binary_server() -> ferry_testkit::BinaryServer {
    ferry_testkit::BinaryServer::start(&[]).expect("ferry serve starts")
}

#[test]
fn stompjs_works_over_websocket() {
    let server = binary_server();
    let http = server.http_addr().expect("HTTP on");
    run(
        Command::new("node")
            .current_dir(support("stompjs"))
            .arg("interop.mjs")
            .arg("--ws")
            .arg(format!("ws://{http}/stomp"))
            .arg("--server")
            .arg(server.addr().to_string())
            .arg("--ferry")
            .arg(ferry_testkit::ferry_bin()),
        "the @stomp/stompjs interop script (npm ci in crates/stomp/tests/support/stompjs)",
    );
}

#[test]
fn a_page_in_chromium_shows_a_message_published_with_the_cli() {
    let server = binary_server();
    let http = server.http_addr().expect("HTTP on");
    run(
        Command::new("python3")
            .arg(support("stomp_page.py"))
            .arg("--http")
            .arg(http.to_string())
            .arg("--server")
            .arg(server.addr().to_string())
            .arg("--ferry")
            .arg(ferry_testkit::ferry_bin()),
        "the browser page (playwright and chromium)",
    );
}
