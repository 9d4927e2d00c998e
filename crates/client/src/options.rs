//! How to connect.

use std::time::Duration;

/// Everything [`crate::Client::connect_with`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// `host:port` of the broker's native protocol listener (default port 6730).
    pub addr: String,
    /// The client name: `[A-Za-z0-9._-]`, 1 to 200 characters. One live session per name.
    pub name: String,
    /// Credentials; empty when the broker needs none.
    pub credentials: String,
    /// Upper bound for the TCP connect and the handshake together.
    pub connect_timeout: Duration,
}

impl ConnectOptions {
    /// Options with no credentials and a 10 s connect timeout.
    pub fn new(addr: impl Into<String>, name: impl Into<String>) -> Self {
        ConnectOptions {
            addr: addr.into(),
            name: name.into(),
            credentials: String::new(),
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// Sets the credentials.
    pub fn credentials(mut self, credentials: impl Into<String>) -> Self {
        self.credentials = credentials.into();
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}
