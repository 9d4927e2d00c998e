//! The one error type of the client.

use ferry_protocol::{ErrorCode, ErrorReply, WireError};
use thiserror::Error;

/// Why a client call failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The broker refused the request: its code and message (`queue 'orders' does not exist`).
    #[error("{0}")]
    Server(#[from] ErrorReply),
    /// The socket failed (connect refused, reset, ...).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The broker sent bytes this client cannot make sense of; the connection is closed.
    #[error("protocol error: {0}")]
    Protocol(#[from] WireError),
    /// The connection is gone (closed by either side, or the client was disconnected).
    #[error("connection closed")]
    Closed,
    /// The connect did not complete within [`crate::ConnectOptions::connect_timeout`].
    #[error("timed out")]
    Timeout,
    /// Refused before sending: over a limit the broker advertised (or a field the wire format
    /// cannot carry). The text says which.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The broker failed to prove it knows the user's keys (a SCRAM server signature that
    /// does not verify, or a broken exchange): the connection is not trusted and is closed.
    #[error("authentication: {0}")]
    Authentication(String),
}

impl ClientError {
    /// The protocol error code, when there is one: the broker's code for [`ClientError::Server`],
    /// [`ErrorCode::TooLarge`] for [`ClientError::TooLarge`], none otherwise.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(e) => Some(e.code),
            ClientError::TooLarge(_) => Some(ErrorCode::TooLarge),
            _ => None,
        }
    }

    /// A copy, for handing one failure to several waiters (an I/O error keeps kind and text).
    pub(crate) fn duplicate(&self) -> ClientError {
        match self {
            ClientError::Server(e) => ClientError::Server(e.clone()),
            ClientError::Io(e) => ClientError::Io(std::io::Error::new(e.kind(), e.to_string())),
            ClientError::Protocol(e) => ClientError::Protocol(e.clone()),
            ClientError::Closed => ClientError::Closed,
            ClientError::Timeout => ClientError::Timeout,
            ClientError::Authentication(e) => ClientError::Authentication(e.clone()),
            ClientError::TooLarge(s) => ClientError::TooLarge(s.clone()),
        }
    }

    /// The error for a reply of a kind that does not answer the request.
    pub(crate) fn unexpected(kind: ferry_protocol::FrameKind) -> ClientError {
        ClientError::Protocol(WireError::InvalidValue {
            field: "reply kind",
            value: u64::from(kind.as_u16()),
        })
    }
}

/// Fails unless the reply is the expected kind (a [`ClientError::unexpected`] otherwise).
macro_rules! expect_reply {
    ($resp:expr, $pat:pat => $out:expr) => {
        match $resp {
            $pat => Ok($out),
            other => Err($crate::error::ClientError::unexpected(other.kind())),
        }
    };
}
pub(crate) use expect_reply;
