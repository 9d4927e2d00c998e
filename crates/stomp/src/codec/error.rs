//! [`FrameError`] (reading) and [`EncodeError`] (writing): each refusal its own variant, with
//! what a server's ERROR frame should say.

use super::command::Command;

/// Why bytes from a peer are not a frame. Every one is fatal to the connection: a server
/// answers with an ERROR frame and closes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The frame (so far) is longer than the frame limit.
    #[error("frame larger than the limit of {limit} bytes")]
    FrameTooLarge {
        /// The limit.
        limit: usize,
    },
    /// More header lines than allowed.
    #[error("more than {limit} headers in one frame")]
    TooManyHeaders {
        /// The limit.
        limit: usize,
    },
    /// A header line (or the command line) longer than allowed.
    #[error("a header line longer than {limit} bytes")]
    HeaderLineTooLong {
        /// The limit.
        limit: usize,
    },
    /// A body (announced, or before its NUL) longer than allowed.
    #[error("body larger than the limit of {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The command line names no STOMP command.
    #[error("unknown command '{0}'")]
    UnknownCommand(String),
    /// A header line without a colon, or with an empty name.
    #[error("malformed header line '{0}': expected name:value")]
    MalformedHeader(String),
    /// A backslash followed by something the version does not define (or by nothing).
    #[error("undefined escape sequence '{0}' in a header")]
    InvalidEscape(String),
    /// Header text that is not UTF-8.
    #[error("header text is not UTF-8")]
    InvalidUtf8,
    /// A `content-length` that is not a decimal number of bytes.
    #[error("invalid content-length '{0}'")]
    InvalidContentLength(String),
    /// The byte after `content-length` bytes of body is not the NUL that ends the frame.
    #[error("the frame does not end with NUL after its content-length of {0} bytes")]
    MissingNul(usize),
    /// A body on a frame whose command does not allow one.
    #[error("a {0} frame must not have a body")]
    BodyNotAllowed(Command),
}

/// Why a frame cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A header that the frame's escaping (none for 1.0 and CONNECT/CONNECTED, no `\r` for
    /// 1.1) cannot carry: a line break, or a colon in a name.
    #[error("header '{0}' cannot be written without escaping, which this frame does not have")]
    Unrepresentable(String),
    /// A `content-length` header that is not the body's length.
    #[error("content-length header '{given}' differs from the body's {actual} bytes")]
    ContentLength {
        /// The header's value.
        given: String,
        /// The body's length.
        actual: usize,
    },
    /// A body on a frame whose command does not allow one.
    #[error("a {0} frame must not have a body")]
    BodyNotAllowed(Command),
}

/// At most 64 characters of `bytes`, for an error message.
pub(crate) fn shown(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes.get(..64).unwrap_or(bytes)).into_owned()
}
