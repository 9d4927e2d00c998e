//! [`Command`]: every client and server command of STOMP 1.0, 1.1 and 1.2.

use std::fmt;

/// A frame's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// Client: open a session (1.0 and later).
    Connect,
    /// Client: open a session (1.1 and later; as CONNECT, and tells a 1.1+ server apart from
    /// HTTP).
    Stomp,
    /// Client: send a message to a destination.
    Send,
    /// Client: subscribe to a destination.
    Subscribe,
    /// Client: end a subscription.
    Unsubscribe,
    /// Client: acknowledge a message.
    Ack,
    /// Client: refuse a message (1.1 and later).
    Nack,
    /// Client: begin a transaction.
    Begin,
    /// Client: commit a transaction.
    Commit,
    /// Client: abort a transaction.
    Abort,
    /// Client: end the session.
    Disconnect,
    /// Server: the session is open.
    Connected,
    /// Server: a message for a subscription.
    Message,
    /// Server: a frame that asked for a receipt was processed.
    Receipt,
    /// Server: something went wrong; the connection closes after it.
    Error,
}

impl Command {
    /// Every command, clients' then servers'.
    pub const ALL: [Command; 15] = [
        Command::Connect,
        Command::Stomp,
        Command::Send,
        Command::Subscribe,
        Command::Unsubscribe,
        Command::Ack,
        Command::Nack,
        Command::Begin,
        Command::Commit,
        Command::Abort,
        Command::Disconnect,
        Command::Connected,
        Command::Message,
        Command::Receipt,
        Command::Error,
    ];

    /// The command as it is written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Connect => "CONNECT",
            Command::Stomp => "STOMP",
            Command::Send => "SEND",
            Command::Subscribe => "SUBSCRIBE",
            Command::Unsubscribe => "UNSUBSCRIBE",
            Command::Ack => "ACK",
            Command::Nack => "NACK",
            Command::Begin => "BEGIN",
            Command::Commit => "COMMIT",
            Command::Abort => "ABORT",
            Command::Disconnect => "DISCONNECT",
            Command::Connected => "CONNECTED",
            Command::Message => "MESSAGE",
            Command::Receipt => "RECEIPT",
            Command::Error => "ERROR",
        }
    }

    /// The command written `bytes` (exactly, case-sensitive, as the spec says).
    pub fn parse(bytes: &[u8]) -> Option<Command> {
        Command::ALL
            .into_iter()
            .find(|c| c.as_str().as_bytes() == bytes)
    }

    /// Whether clients send it (otherwise servers do).
    pub fn is_client(self) -> bool {
        !matches!(
            self,
            Command::Connected | Command::Message | Command::Receipt | Command::Error
        )
    }

    /// Whether its frames may carry a body: SEND, MESSAGE and ERROR only.
    pub fn allows_body(self) -> bool {
        matches!(self, Command::Send | Command::Message | Command::Error)
    }

    /// Whether its headers are escaped (in versions that escape): all but CONNECT, STOMP and
    /// CONNECTED, which are exchanged before the version is agreed.
    pub fn escapes_headers(self) -> bool {
        !matches!(self, Command::Connect | Command::Stomp | Command::Connected)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_parses_from_its_name_and_nothing_else_does() {
        for c in Command::ALL {
            assert_eq!(Command::parse(c.as_str().as_bytes()), Some(c));
            assert_eq!(c.to_string(), c.as_str());
        }
        for bad in [&b"send"[..], b"SEND ", b"", b"CONNECTX", b"HTTP/1.1"] {
            assert_eq!(Command::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Command::ALL.iter().filter(|c| c.is_client()).count(), 11);
        assert_eq!(Command::ALL.iter().filter(|c| c.allows_body()).count(), 3);
        assert!(!Command::Connected.escapes_headers() && Command::Message.escapes_headers());
    }
}
