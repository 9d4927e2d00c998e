//! The SCRAM-SHA-256 exchange (RFC 5802, RFC 7677), as sans-IO state machines:
//!
//! ```text
//! client                                   server
//! client-first  n,,n=<user>,r=<cnonce>  ->
//!                                       <-  r=<cnonce><snonce>,s=<salt>,i=<count>  server-first
//! client-final  c=biws,r=<nonce>,p=<proof> ->
//!                                       <-  v=<server signature>                   server-final
//! ```
//!
//! The password never crosses the wire; the server keeps only [`StoredCredential`]; each side
//! proves it knows its key. Channel binding is not offered (gs2 flag `n`, or `y` from a client
//! that supports it but saw none offered). A server answers an unknown user exactly as it does
//! a known one (a salt derived from the name and a server secret), so that the exchange does not
//! tell which names exist; the proof then fails as a wrong password does.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::RngCore;
use subtle::ConstantTimeEq;

pub use crate::error::ScramError;

use crate::credential::{
    hmac, salted_password, sha256, StoredCredential, MAX_ITERATIONS, MIN_ITERATIONS, SALT_LEN,
};

/// The mechanism's name, as SASL registers it.
pub const MECHANISM: &str = "SCRAM-SHA-256";

/// Bytes of randomness in each nonce (before base64).
const NONCE_BYTES: usize = 18;
/// The longest SCRAM message accepted; real ones are under 200 bytes.
pub const MAX_MESSAGE: usize = 1024;

fn nonce() -> String {
    let mut b = [0u8; NONCE_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut b);
    B64.encode(b)
}

/// `saslname` escaping of a user name (`=` and `,`).
fn escape(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

fn unescape(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(rest.get(..i).unwrap_or_default());
        let code = rest.get(i..i + 3);
        match code {
            Some("=3D") => out.push('='),
            Some("=2C") => out.push(','),
            _ => return Err(ScramError::Malformed("user name escape")),
        }
        rest = rest.get(i + 3..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

/// Splits `key=value` attributes; `expect` are the keys in their required order.
fn attributes<'a, const N: usize>(
    msg: &'a str,
    expect: [char; N],
    what: &'static str,
) -> Result<([&'a str; N], &'a str), ScramError> {
    let mut values = [""; N];
    let mut rest = msg;
    for (slot, key) in values.iter_mut().zip(expect) {
        let (part, tail) = rest.split_once(',').unwrap_or((rest, ""));
        let value = part
            .strip_prefix(key)
            .and_then(|p| p.strip_prefix('='))
            .ok_or(ScramError::Malformed(what))?;
        *slot = value;
        rest = tail;
    }
    Ok((values, rest))
}

fn printable_nonce(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    user: String,
    client_nonce: String,
    bare: String,
    gs2_header: String,
}

impl ClientFirst {
    /// Parses `gs2-header client-first-bare`. Refuses channel binding (`p=`), authzid,
    /// mandatory extensions (`m=`), empty or unprintable nonces, oversized messages.
    pub fn parse(msg: &str) -> Result<ClientFirst, ScramError> {
        if msg.len() > MAX_MESSAGE {
            return Err(ScramError::Malformed("message too long"));
        }
        let (flag, rest) = msg
            .split_once(',')
            .ok_or(ScramError::Malformed("gs2 header"))?;
        if flag != "n" && flag != "y" {
            return Err(ScramError::Malformed(
                "gs2 header: channel binding is not supported",
            ));
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(ScramError::Malformed("gs2 header"))?;
        if !authzid.is_empty() {
            return Err(ScramError::Malformed(
                "authorization identity is not supported",
            ));
        }
        let ([user, client_nonce], extensions) = attributes(bare, ['n', 'r'], "client-first")?;
        if !extensions.is_empty() {
            return Err(ScramError::Malformed("client-first extensions"));
        }
        let user = unescape(user)?;
        if user.is_empty() {
            return Err(ScramError::Malformed("empty user name"));
        }
        if !printable_nonce(client_nonce) {
            return Err(ScramError::Malformed("client nonce"));
        }
        Ok(ClientFirst {
            client_nonce: client_nonce.to_owned(),
            bare: bare.to_owned(),
            gs2_header: format!("{flag},,"),
            user,
        })
    }

    /// The user name the client claims (not proven yet).
    pub fn user(&self) -> &str {
        &self.user
    }
}

/// The server's side after it sent server-first, waiting for client-final.
pub struct ServerExchange {
    user: String,
    credential: StoredCredential,
    known: bool,
    nonce: String,
    gs2_header: String,
    auth_prefix: String,
}

impl ServerExchange {
    /// Answers `first` for the user's `credential`; `None` for an unknown user, answered
    /// alike with a salt derived from `server_secret` and the name (the same every time, so
    /// that asking twice tells nothing). Returns the exchange and the server-first message.
    pub fn start(
        first: ClientFirst,
        credential: Option<StoredCredential>,
        server_secret: &[u8],
        default_iterations: u32,
    ) -> (ServerExchange, String) {
        let known = credential.is_some();
        let credential = credential.unwrap_or_else(|| {
            let derived = hmac(server_secret, first.user.as_bytes());
            let salt = derived.get(..SALT_LEN).unwrap_or(&derived).to_vec();
            StoredCredential {
                iterations: default_iterations.max(MIN_ITERATIONS),
                salt,
                stored_key: hmac(server_secret, b"no such user"),
                server_key: [0u8; 32],
            }
        });
        let nonce = format!("{}{}", first.client_nonce, self::nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let auth_prefix = format!("{},{server_first},", first.bare);
        let exchange = ServerExchange {
            user: first.user,
            credential,
            known,
            nonce,
            gs2_header: first.gs2_header,
            auth_prefix,
        };
        (exchange, server_first)
    }

    /// The user name the exchange is for (not proven until [`ServerExchange::finish`]).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Checks client-final. On success, the proven user name and the server-final message.
    pub fn finish(self, client_final: &str) -> Result<(String, String), ScramError> {
        if client_final.len() > MAX_MESSAGE {
            return Err(ScramError::Malformed("message too long"));
        }
        let (without_proof, proof) = client_final
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("client-final proof"))?;
        let ([binding, nonce], extensions) = attributes(without_proof, ['c', 'r'], "client-final")?;
        if !extensions.is_empty() {
            return Err(ScramError::Malformed("client-final extensions"));
        }
        let binding = B64
            .decode(binding)
            .map_err(|_| ScramError::Malformed("channel binding"))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::Malformed("channel binding"));
        }
        if !bool::from(nonce.as_bytes().ct_eq(self.nonce.as_bytes())) {
            return Err(ScramError::Malformed("nonce does not match"));
        }
        let proof: [u8; 32] = B64
            .decode(proof)
            .ok()
            .and_then(|p| p.try_into().ok())
            .ok_or(ScramError::Malformed("proof"))?;
        let auth_message = format!("{}{without_proof}", self.auth_prefix);
        let signature = hmac(&self.credential.stored_key, auth_message.as_bytes());
        let mut client_key = [0u8; 32];
        for ((k, p), s) in client_key.iter_mut().zip(proof).zip(signature) {
            *k = p ^ s;
        }
        let matches = bool::from(sha256(&client_key).ct_eq(&self.credential.stored_key));
        if !(matches && self.known) {
            return Err(ScramError::InvalidProof);
        }
        let server_signature = hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok((self.user, format!("v={}", B64.encode(server_signature))))
    }
}

/// The client's side: create with [`ScramClient::new`], then answer server-first with
/// [`ScramClient::respond`], then check server-final with [`ScramClient::verify`].
pub struct ScramClient {
    password: String,
    client_nonce: String,
    bare: String,
    /// Set by `respond`: the AuthMessage and the salted password.
    state: Option<(String, [u8; 32])>,
}

impl ScramClient {
    /// Starts an exchange for `user`; returns the client and the client-first message.
    pub fn new(user: &str, password: &str) -> (ScramClient, String) {
        ScramClient::with_nonce(user, password, &nonce())
    }

    /// As [`ScramClient::new`] with a given nonce (test vectors).
    pub fn with_nonce(user: &str, password: &str, nonce: &str) -> (ScramClient, String) {
        let bare = format!("n={},r={nonce}", escape(user));
        let first = format!("n,,{bare}");
        let client = ScramClient {
            password: password.to_owned(),
            client_nonce: nonce.to_owned(),
            bare,
            state: None,
        };
        (client, first)
    }

    /// Answers server-first with client-final (the proof).
    pub fn respond(&mut self, server_first: &str) -> Result<String, ScramError> {
        if server_first.len() > MAX_MESSAGE {
            return Err(ScramError::Malformed("message too long"));
        }
        if let Some(e) = server_first.strip_prefix("e=") {
            return Err(ScramError::ServerError(e.to_owned()));
        }
        let ([nonce, salt, iterations], _) =
            attributes(server_first, ['r', 's', 'i'], "server-first")?;
        if !nonce.starts_with(&self.client_nonce)
            || nonce.len() == self.client_nonce.len()
            || !printable_nonce(nonce)
        {
            return Err(ScramError::Malformed("server nonce"));
        }
        let salt = B64
            .decode(salt)
            .map_err(|_| ScramError::Malformed("salt"))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| ScramError::Malformed("iteration count"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        let salted = salted_password(&self.password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.bare);
        let client_key = hmac(&salted, b"Client Key");
        let signature = hmac(&sha256(&client_key), auth_message.as_bytes());
        let mut proof = [0u8; 32];
        for ((p, k), s) in proof.iter_mut().zip(client_key).zip(signature) {
            *p = k ^ s;
        }
        self.state = Some((auth_message, salted));
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks server-final: the server proved it holds this user's keys.
    pub fn verify(&self, server_final: &str) -> Result<(), ScramError> {
        let (auth_message, salted) = self
            .state
            .as_ref()
            .ok_or(ScramError::Malformed("server-final before server-first"))?;
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(ScramError::ServerError(e.to_owned()));
        }
        let signature = server_final
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or(ScramError::Malformed("server-final"))?;
        let expected = hmac(&hmac(salted, b"Server Key"), auth_message.as_bytes());
        if bool::from(signature.as_slice().ct_eq(&expected)) {
            Ok(())
        } else {
            Err(ScramError::InvalidServerSignature)
        }
    }
}

#[cfg(test)]
mod tests;
