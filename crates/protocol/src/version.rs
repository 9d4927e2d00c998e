//! The protocol version carried in the connect handshake.

/// The version this build speaks. A broker answers a connect carrying any other version with
/// [`crate::ErrorCode::UnsupportedVersion`] and closes the connection.
pub const PROTOCOL_VERSION: u16 = 1;
