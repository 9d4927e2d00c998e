//! Integration tests of the `ferry` binary's client commands: each test starts an in-process
//! broker ([`ferry_testkit::TestServer`]) and runs the real binary against it as a subprocess.
//!
//! Modules: [`support`] (running the binary), [`queue`], [`send_recv`], [`recv_safety`],
//! [`errors`], [`shell`], [`time`], [`topics`].

mod admin;
mod errors;
mod queue;
mod recv_safety;
mod send_recv;
mod shell;
mod support;
mod time;
mod tls;
mod topics;
mod wildcards;
