//! [`Frame`]: a command, its headers in order, and a body; and the protocol [`Version`] that
//! decides how headers are escaped.

use bytes::Bytes;

use super::command::Command;

/// A STOMP protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// STOMP 1.0: no header escaping.
    V1_0,
    /// STOMP 1.1: `\n`, `\c` and `\\` escaped.
    V1_1,
    /// STOMP 1.2: `\r`, `\n`, `\c` and `\\` escaped.
    V1_2,
}

impl Version {
    /// Every version, oldest first.
    pub const ALL: [Version; 3] = [Version::V1_0, Version::V1_1, Version::V1_2];

    /// As written in `accept-version` and `version` headers.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V1_1 => "1.1",
            Version::V1_2 => "1.2",
        }
    }

    /// The version written `s`.
    pub fn parse(s: &str) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// One frame. Headers keep their order and repetitions as received; [`Frame::header`] gives the
/// first of a name, which is the one that counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The command.
    pub command: Command,
    /// Headers, unescaped, in order.
    pub headers: Vec<(String, String)>,
    /// The body (empty for most commands).
    pub body: Bytes,
}

impl Frame {
    /// A frame of `command` without headers or body.
    pub fn new(command: Command) -> Frame {
        Frame {
            command,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// This frame with header `name: value` added after the others.
    pub fn header_with(mut self, name: impl Into<String>, value: impl Into<String>) -> Frame {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// This frame with `body`.
    pub fn body_with(mut self, body: impl Into<Bytes>) -> Frame {
        self.body = body.into();
        self
    }

    /// The value of the first header named `name` (names are case-sensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
