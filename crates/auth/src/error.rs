//! [`ScramError`]: why an exchange, or the decoding of a stored credential, failed.

use thiserror::Error;

/// Why an exchange failed. The messages name the step, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScramError {
    /// A message that does not follow RFC 5802's grammar; names the part at fault.
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    /// The client's proof is wrong: wrong password or unknown user (not told apart).
    #[error("authentication failed")]
    InvalidProof,
    /// The server's signature is wrong: it does not hold this user's keys.
    #[error("the server's SCRAM signature is wrong: it does not know this user's keys")]
    InvalidServerSignature,
    /// The server answered with an error (`e=...`).
    #[error("the server refused authentication: {0}")]
    ServerError(String),
    /// An iteration count outside what a client accepts.
    #[error("SCRAM iteration count {0} is out of range")]
    Iterations(u32),
}
