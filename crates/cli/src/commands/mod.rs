//! The client commands of the `ferry` binary, one module each:
//! - [`queue`]: `queue create | delete | list | describe | purge | browse | move`;
//! - [`send`]: `send` (one message to one or more queues);
//! - [`publish`]: `publish` (one message to a topic's subscriptions);
//! - [`message`]: the message flags `send` and `publish` share;
//! - [`recv`]: `recv` (take or peek, print, then ack);
//! - [`topic`]: `topic create | delete | list` and `unsubscribe`;
//! - [`subscribe`]: `subscribe` (to a topic; prints like `recv`);
//! - [`waiting`]: `waiting` (queues with messages addressed to this client);
//! - [`shell`]: the interactive `shell`;
//! - [`user`]: `user add | passwd | delete | list | show` and `permit` (straight to the store);
//! - [`status`], [`clients`]: `status`, `clients`, `client forget | disconnect` (over the HTTP
//!   API, as are `queue describe | purge | browse | move`).
//!
//! Each command connects once, does its work and disconnects; errors come back as one-line
//! `anyhow` errors that `main` prints.

pub mod clients;
pub mod message;
pub mod publish;
pub mod queue;
pub mod recv;
pub mod send;
pub mod shell;
pub mod status;
pub mod subscribe;
pub mod topic;
pub mod user;
pub mod waiting;

use anyhow::Result;
use serde_json::Value;

/// The value at `pointer` (`/clients/online`) in an answer of the HTTP API, `Null` where the
/// answer has none: a field an older or newer broker leaves out shows as `-`, not as a panic.
pub fn field<'v>(v: &'v Value, pointer: &str) -> &'v Value {
    v.pointer(pointer).unwrap_or(&Value::Null)
}

/// Writes `text` to standard output and flushes it. Unlike `print!`, a closed pipe or a full disk
/// is an error to report, not a panic; commands that must not lose data (`recv`) depend on
/// knowing that the text really left the process.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
}

/// Runs a client command to completion on a single-threaded runtime: one connection needs no
/// more, and it starts faster than a multi-threaded one.
pub fn block_on<F: std::future::Future<Output = Result<()>>>(f: F) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(f);
    // Dropping a runtime waits for blocking work such as a pending read of standard input in
    // the shell; the command is done, so do not wait long for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    result
}
