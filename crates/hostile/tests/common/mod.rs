//! What the HTTP scenarios share: the real binary with its HTTP listener on.

use std::net::SocketAddr;

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
