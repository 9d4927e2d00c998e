//! Why a connection ended: what the connection, its handshake and its keep-alive report, and
//! the kind counted for operators.

use std::time::Duration;

use ferry_protocol::{ErrorCode, WireError};

use crate::outbound;
use crate::stats::CloseKind;

/// Why a connection ended, for the logs.
#[derive(Debug)]
pub enum CloseReason {
    /// The client closed its side (end of stream).
    PeerClosed,
    /// The client sent `Disconnect`.
    Disconnected,
    /// A frame was malformed or too large.
    Malformed(WireError),
    /// Reading failed (a reset, say).
    Io(std::io::Error),
    /// No connect came in time.
    HandshakeTimeout,
    /// The connect was refused for good.
    Refused(ErrorCode),
    /// The broker is shutting down.
    Shutdown,
    /// The node was taken for dead by the others: its sessions no longer own their names.
    Fenced,
    /// No frame for 1.5 keep-alive intervals.
    Idle(Duration),
    /// A frame took longer than the read timeout to arrive.
    ReadTimeout(Duration),
    /// The writer gave up: the socket failed or took no replies for the write timeout.
    Write(outbound::Failure),
    /// An operator closed the session (management API).
    Operator,
}

impl CloseReason {
    /// The kind counted for operators.
    pub fn kind(&self) -> CloseKind {
        match self {
            CloseReason::PeerClosed | CloseReason::Disconnected => CloseKind::ClientClosed,
            CloseReason::Malformed(_) => CloseKind::ProtocolError,
            CloseReason::Io(_) => CloseKind::IoError,
            CloseReason::HandshakeTimeout | CloseReason::Idle(_) | CloseReason::ReadTimeout(_) => {
                CloseKind::Idle
            }
            CloseReason::Refused(ErrorCode::Unauthorized) => CloseKind::AuthFailure,
            CloseReason::Refused(_) => CloseKind::ProtocolError,
            CloseReason::Shutdown | CloseReason::Fenced => CloseKind::Shutdown,
            CloseReason::Write(f) if f.slow_reader => CloseKind::SlowReader,
            CloseReason::Write(_) => CloseKind::IoError,
            CloseReason::Operator => CloseKind::Operator,
        }
    }
}
