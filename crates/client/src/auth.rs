//! The connect handshake, with SCRAM-SHA-256 when the options name a user:
//! `Connect` (client-first) → `AuthChallenge` (server-first) → `AuthResponse` (client-final,
//! the proof) → `Connected` (server-final, which the client checks: a broker that does not
//! hold the user's keys cannot produce it). Without a user but with a TLS client certificate,
//! `EXTERNAL`: the broker takes the user from the certificate.

use std::sync::Arc;

use ferry_auth::{ScramClient, MECHANISM};
use ferry_protocol::requests::{Connect, CONNECT_EPHEMERAL};
use ferry_protocol::responses::Connected;
use ferry_protocol::{Request, Response, PROTOCOL_VERSION};

use crate::connection::Shared;

/// The mechanism that takes the user from the TLS client certificate.
const EXTERNAL: &str = "EXTERNAL";
use crate::error::{expect_reply, ClientError};
use crate::options::ConnectOptions;

/// Sends `Connect` (and the authentication exchange) and returns the broker's `Connected`.
pub(crate) async fn connect(
    conn: &Arc<Shared>,
    opts: &ConnectOptions,
) -> Result<Connected, ClientError> {
    let mut connect = Connect {
        version: PROTOCOL_VERSION,
        client: opts.name.clone(),
        mechanism: String::new(),
        credentials: String::new(),
        keepalive_ms: u32::try_from(opts.keepalive.as_millis()).unwrap_or(u32::MAX),
        flags: if opts.ephemeral { CONNECT_EPHEMERAL } else { 0 },
    };
    let Some(user) = &opts.user else {
        if opts.tls.as_ref().is_some_and(|t| t.identity.is_some()) {
            // The certificate the TLS handshake presented proves who the client is.
            connect.mechanism = EXTERNAL.to_owned();
        }
        let reply = conn.call(&Request::Connect(connect)).await?;
        return expect_reply!(reply, Response::Connected(c) => c);
    };
    let (mut scram, first) = ScramClient::new(user, &opts.password.0);
    connect.mechanism = MECHANISM.to_owned();
    connect.credentials = first;
    let reply = conn.call(&Request::Connect(connect)).await?;
    let server_first = expect_reply!(reply, Response::AuthChallenge { data } => data)?;
    let client_final = scram
        .respond(&server_first)
        .map_err(|e| ClientError::Authentication(e.to_string()))?;
    let reply = conn
        .call(&Request::AuthResponse { data: client_final })
        .await?;
    let connected = expect_reply!(reply, Response::Connected(c) => c)?;
    scram
        .verify(&connected.auth)
        .map_err(|e| ClientError::Authentication(e.to_string()))?;
    Ok(connected)
}
