//! How to connect: one broker address, or several nodes of one cluster tried in order.

use std::time::Duration;

/// Everything [`crate::Client::connect_with`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// `host:port` of the broker's native protocol listener (default port 6730), or several
    /// nodes of one cluster separated by commas (`a:6730,b:6730`): [`crate::Client::connect_with`]
    /// tries them in order and keeps the first that accepts the session.
    pub addr: String,
    /// The client name: `[A-Za-z0-9._-]`, 1 to 200 characters. One live session per name.
    pub name: String,
    /// Credentials; empty when the broker needs none.
    pub credentials: String,
    /// Upper bound for the TCP connect and the handshake together, per address tried.
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

    /// Options for several nodes of one cluster, tried in order on connect (no credentials,
    /// a 10 s connect timeout per node).
    pub fn with_addrs<S: AsRef<str>>(addrs: &[S], name: impl Into<String>) -> Self {
        let joined: Vec<&str> = addrs.iter().map(|a| a.as_ref().trim()).collect();
        ConnectOptions::new(joined.join(","), name)
    }

    /// The addresses to try, in order.
    pub fn addrs(&self) -> Vec<&str> {
        self.addr
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_addresses_are_listed_in_order() {
        assert_eq!(ConnectOptions::new("a:1", "n").addrs(), vec!["a:1"]);
        let o = ConnectOptions::with_addrs(&["a:1", " b:2", "c:3"], "n");
        assert_eq!(o.addr, "a:1,b:2,c:3");
        assert_eq!(o.addrs(), vec!["a:1", "b:2", "c:3"]);
        assert_eq!(
            ConnectOptions::new("a:1, ,b:2,", "n").addrs(),
            vec!["a:1", "b:2"]
        );
    }
}
