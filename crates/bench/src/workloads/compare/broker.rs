//! The broker a comparison starts for the `ferry` target when no `--server` is given: started
//! through a [`BrokerLauncher`] (the `ferry` binary starts one in-process, tests use their test
//! server), measured, and stopped at the end of the comparison.
//!
//! The traits return boxed futures rather than use `async_trait`, so that implementors need no
//! macro.

use std::future::Future;
use std::pin::Pin;

use anyhow::Result;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Starts a Ferry broker with default settings on a fresh data directory.
pub trait BrokerLauncher: Send + Sync {
    /// Starts a broker; it runs until [`OwnBroker::stop`].
    fn start(&self) -> BoxFuture<'_, Result<Box<dyn OwnBroker>>>;
}

/// A broker a comparison started.
pub trait OwnBroker: Send {
    /// Its address, `HOST:PORT`.
    fn addr(&self) -> String;
    /// What it is and where its data is, for the terminal.
    fn describe(&self) -> String;
    /// Stops it and removes its data.
    fn stop(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// A launcher that cannot start brokers: comparisons need `--server` for the `ferry` target.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLauncher;

impl BrokerLauncher for NoLauncher {
    fn start(&self) -> BoxFuture<'_, Result<Box<dyn OwnBroker>>> {
        Box::pin(async {
            anyhow::bail!("this program cannot start a broker: give --server HOST:PORT")
        })
    }
}
