//! The protocol version carried in the connect handshake.

/// The version this build speaks. A broker answers a connect carrying any other version with
/// [`crate::ErrorCode::UnsupportedVersion`] and closes the connection.
///
/// Version 2 added topics, transactions and non-persistent messages (two fields at the end of
/// every outgoing message). Version 3 added the keep-alive interval and session flags to
/// `Connect`, and the interval granted to `Connected`. Version 4 added authentication: the
/// mechanism in `Connect`, the `AuthChallenge` / `AuthResponse` exchange, and the server's final
/// message in `Connected`.
pub const PROTOCOL_VERSION: u16 = 4;
