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
    /// The user to authenticate as (SCRAM-SHA-256); `None`: no authentication (a broker with
    /// no users, on loopback, or one granting anonymous sessions something).
    pub user: Option<String>,
    /// The user's password. Never sent: SCRAM proves it without it crossing the wire.
    pub password: Password,
    /// Upper bound for the TCP connect and the handshake together, per address tried.
    pub connect_timeout: Duration,
    /// The keep-alive interval to ask for ([`Duration::ZERO`]: the broker's choice). The
    /// broker closes a session silent for 1.5 intervals; the client pings whenever it has
    /// sent nothing for half the interval it is granted, so an idle session stays open.
    pub keepalive: Duration,
    /// The name is made up for this session alone (the CLI's generated names): the broker
    /// need not keep it registered once the session ends.
    pub ephemeral: bool,
    /// Connect over TLS: which CA to trust (the system's roots by default), a client
    /// certificate to present, and the name to verify the broker's certificate against (the
    /// host of the address by default). `None`: plain TCP. A client certificate with no
    /// [`ConnectOptions::user`] authenticates as the certificate's user (`EXTERNAL`).
    pub tls: Option<ferry_tls::ClientTls>,
}

impl ConnectOptions {
    /// Options with no credentials and a 10 s connect timeout.
    pub fn new(addr: impl Into<String>, name: impl Into<String>) -> Self {
        ConnectOptions {
            addr: addr.into(),
            name: name.into(),
            user: None,
            password: Password::default(),
            connect_timeout: Duration::from_secs(10),
            keepalive: Duration::ZERO,
            ephemeral: false,
            tls: None,
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

    /// Authenticates as `user` with `password` (SCRAM-SHA-256).
    pub fn user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self.password = Password(password.into());
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Asks for a keep-alive interval (see [`ConnectOptions::keepalive`]).
    pub fn keepalive(mut self, interval: Duration) -> Self {
        self.keepalive = interval;
        self
    }

    /// Connects over TLS as `tls` says (see [`ConnectOptions::tls`]).
    pub fn tls(mut self, tls: ferry_tls::ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Marks the name as made up for this session alone (see [`ConnectOptions::ephemeral`]).
    pub fn ephemeral(mut self, ephemeral: bool) -> Self {
        self.ephemeral = ephemeral;
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

/// A password, shown as `***` by `Debug` so that options can be logged.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}
