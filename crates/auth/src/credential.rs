//! What is stored for a user: the SCRAM-SHA-256 stored key and server key, with the salt and
//! iteration count that derive them from the password (RFC 5802 §3). Neither key gives the
//! password back, and neither lets a thief authenticate: the exchange needs the client key,
//! which only the password yields.
//!
//! Text form, as PostgreSQL stores it: `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`
//! (base64).

use std::fmt;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ScramError;

/// The iteration count for new credentials unless configured: the RFC 7677 minimum, as
/// PostgreSQL uses. Each SCRAM client pays it once per connect.
pub const DEFAULT_ITERATIONS: u32 = 4096;
/// The smallest iteration count accepted (RFC 7677 §4: at least 4096).
pub const MIN_ITERATIONS: u32 = 4096;
/// The largest iteration count a client accepts from a server, so that a hostile server
/// cannot make it spin.
pub const MAX_ITERATIONS: u32 = 10_000_000;
/// Bytes of random salt per credential.
pub const SALT_LEN: usize = 16;

/// HMAC-SHA-256 of `msg` under `key`.
pub(crate) fn hmac(key: &[u8], msg: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// SHA-256 of `data`.
pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// `SaltedPassword := Hi(Normalize(password), salt, i)`: PBKDF2-HMAC-SHA-256.
pub(crate) fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(normalize(password).as_bytes(), salt, iterations, &mut out);
    out
}

/// SASLprep (RFC 4013) of a password; a password it refuses (unassigned or prohibited code
/// points) is used as given, as PostgreSQL does, so that any password still works.
pub(crate) fn normalize(password: &str) -> std::borrow::Cow<'_, str> {
    stringprep::saslprep(password).unwrap_or(std::borrow::Cow::Borrowed(password))
}

/// The keys kept for one user.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredCredential {
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// Random salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: [u8; 32],
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: [u8; 32],
}

impl fmt::Debug for StoredCredential {
    /// Shows the iteration count only: the keys are secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "StoredCredential(SCRAM-SHA-256, {} iterations)",
            self.iterations
        )
    }
}

impl StoredCredential {
    /// Derives a credential from `password` with a fresh random salt. Iteration counts below
    /// [`MIN_ITERATIONS`] are raised to it.
    pub fn new(password: &str, iterations: u32) -> StoredCredential {
        let mut salt = vec![0u8; SALT_LEN];
        rand::rngs::OsRng.fill_bytes(&mut salt);
        StoredCredential::with_salt(password, salt, iterations.max(MIN_ITERATIONS))
    }

    /// Derives a credential from `password` with a given salt and count (tests, vectors).
    pub fn with_salt(password: &str, salt: Vec<u8>, iterations: u32) -> StoredCredential {
        let salted = salted_password(password, &salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        StoredCredential {
            iterations,
            stored_key: sha256(&client_key),
            server_key: hmac(&salted, b"Server Key"),
            salt,
        }
    }

    /// The text form (see the module docs).
    pub fn encode(&self) -> String {
        format!(
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(self.stored_key),
            B64.encode(self.server_key)
        )
    }

    /// Parses the text form.
    pub fn decode(text: &str) -> Result<StoredCredential, ScramError> {
        let bad = || ScramError::Malformed("stored credential");
        let rest = text.strip_prefix("SCRAM-SHA-256$").ok_or_else(bad)?;
        let (params, keys) = rest.split_once('$').ok_or_else(bad)?;
        let (iterations, salt) = params.split_once(':').ok_or_else(bad)?;
        let (stored, server) = keys.split_once(':').ok_or_else(bad)?;
        let key = |s: &str| -> Result<[u8; 32], ScramError> {
            B64.decode(s)
                .ok()
                .and_then(|v| v.try_into().ok())
                .ok_or_else(bad)
        };
        Ok(StoredCredential {
            iterations: iterations.parse().map_err(|_| bad())?,
            salt: B64.decode(salt).map_err(|_| bad())?,
            stored_key: key(stored)?,
            server_key: key(server)?,
        })
    }
}

/// Whether `password` is the one `credential` was derived from, for gateways that receive a
/// password (a STOMP passcode, HTTP basic auth over TLS). Costs one PBKDF2 derivation; the
/// comparison is constant-time.
pub fn verify_password(credential: &StoredCredential, password: &str) -> bool {
    let salted = salted_password(password, &credential.salt, credential.iterations);
    let stored = sha256(&hmac(&salted, b"Client Key"));
    bool::from(stored.ct_eq(&credential.stored_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_round_trips_through_its_text_form() {
        let c = StoredCredential::new("pencil", 4096);
        let text = c.encode();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"));
        assert_eq!(StoredCredential::decode(&text).unwrap(), c);
        assert!(!text.contains("pencil"));
    }

    #[test]
    fn the_right_password_verifies_and_a_wrong_one_does_not() {
        let c = StoredCredential::new("pencil", 4096);
        assert!(verify_password(&c, "pencil"));
        assert!(!verify_password(&c, "pencil2"));
        assert!(!verify_password(&c, ""));
    }

    #[test]
    fn salts_are_random_and_low_counts_are_raised() {
        let a = StoredCredential::new("pencil", 1);
        let b = StoredCredential::new("pencil", 1);
        assert_ne!(a.salt, b.salt);
        assert_ne!(a.stored_key, b.stored_key);
        assert_eq!(a.iterations, MIN_ITERATIONS);
    }

    #[test]
    fn malformed_text_forms_are_refused() {
        for t in [
            "",
            "SCRAM-SHA-256$",
            "MD5$1:AA==$AA==:AA==",
            "SCRAM-SHA-256$x:AA==$AA==:AA==",
        ] {
            assert!(StoredCredential::decode(t).is_err(), "{t}");
        }
    }

    #[test]
    fn debug_output_shows_no_key() {
        let c = StoredCredential::new("pencil", 4096);
        let shown = format!("{c:?}");
        assert!(!shown.contains(&B64.encode(c.stored_key)));
    }
}
