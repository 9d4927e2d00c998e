//! Authentication inside the connect handshake (protocol version 4).
//!
//! ```text
//! Connect(mechanism SCRAM-SHA-256, client-first)  ->
//!                                  <- AuthChallenge(server-first)
//! AuthResponse(client-final)                       ->
//!                                  <- Connected(server-final) | Error Unauthorized, closed
//! ```
//!
//! The challenge answers the `Connect`'s request id; the outcome answers the `AuthResponse`'s.
//!
//! `EXTERNAL` takes the user from the TLS client certificate verified during the TLS
//! handshake (the common name of its subject); the user must exist.
//!
//! An address over its failed-authentication rate is refused before any work
//! (`LimitExceeded`). A failed exchange (wrong proof, unknown user, a malformed message, any
//! frame other than `AuthResponse`) is counted for its address, logged with the user name and
//! address (never a secret), answered `Unauthorized` after the configured delay, and closes
//! the connection: a new attempt costs a new connection. Unknown users are answered like known
//! ones (see `ferry_auth::scram`).

use std::net::IpAddr;
use std::sync::Arc;

use ferry_auth::scram::{ClientFirst, ServerExchange};
use ferry_auth::{ScramError, StoredCredential, MECHANISM};
use ferry_protocol::requests::Connect;
use ferry_protocol::{ErrorCode, RawFrame, Request, Response};
use tracing::{info, warn};

use crate::access::Principal;
use crate::close_reason::CloseReason;
use crate::shared::Shared;
use crate::stats::Stats;

/// The `EXTERNAL` mechanism: the user is the TLS client certificate's.
pub const EXTERNAL: &str = "EXTERNAL";

/// A proven identity, and the mechanism's last message for `Connected`.
pub struct Authenticated {
    /// The request id the outcome answers (the last frame of the exchange).
    pub reply_id: u32,
    /// Who the session runs as.
    pub principal: Principal,
    /// SCRAM's server-final message (empty for other mechanisms).
    pub server_final: String,
}

/// Why no identity came out of the exchange.
pub enum Refusal {
    /// Answer this under that request id and keep the connection (the client may connect
    /// again differently).
    Answer(u32, Response),
    /// Answer this under that request id and close the connection.
    Close(u32, Response),
    /// Close without an answer (the connection failed or ended).
    Ended(CloseReason),
}

/// Where the handshake reads the client's next frame from.
pub trait NextFrame {
    /// The next complete frame, or why the connection ends.
    fn next(&mut self) -> impl std::future::Future<Output = Result<RawFrame, CloseReason>> + Send;
    /// Queues a reply to the client under `request_id`.
    fn reply(&self, request_id: u32, response: Response);
}

/// Authenticates the client of connect `c` (request `rid`) from `ip`; `tls_user` is the user
/// named by a verified TLS client certificate, if any.
pub async fn authenticate<F: NextFrame + Send>(
    shared: &Arc<Shared>,
    c: &Connect,
    rid: u32,
    frames: &mut F,
    ip: Option<IpAddr>,
    tls_user: Option<&str>,
) -> Result<Authenticated, Refusal> {
    let access = &shared.access;
    match c.mechanism.as_str() {
        "" => match access.admit_anonymous(ip) {
            Ok(()) => Ok(Authenticated {
                reply_id: rid,
                principal: Principal::Anonymous,
                server_final: String::new(),
            }),
            Err(why) => Err(Refusal::Answer(
                rid,
                Response::error(ErrorCode::Unauthorized, why),
            )),
        },
        EXTERNAL => external(shared, rid, ip, tls_user).await,
        MECHANISM => scram(shared, c, rid, frames, ip).await,
        other => Err(Refusal::Answer(
            rid,
            Response::error(
                ErrorCode::Unauthorized,
                format!(
                    "unknown authentication mechanism '{other}'; this broker offers {MECHANISM}"
                ),
            ),
        )),
    }
}

/// `EXTERNAL`: the user is the common name of the verified TLS client certificate's subject,
/// and must exist. The certificate was verified during the TLS handshake; a connection without
/// one, or whose subject names no user, is refused like a failed password.
async fn external(
    shared: &Arc<Shared>,
    rid: u32,
    ip: Option<IpAddr>,
    tls_user: Option<&str>,
) -> Result<Authenticated, Refusal> {
    let Some(user) = tls_user else {
        return Err(Refusal::Answer(
            rid,
            Response::error(
                ErrorCode::Unauthorized,
                "EXTERNAL authentication needs a verified TLS client certificate with a \
                 common name (CN) in its subject",
            ),
        ));
    };
    match shared.store.users().user(user).await {
        Ok(Some(_)) => {
            Stats::add(&shared.stats.auth_succeeded, 1);
            Ok(Authenticated {
                reply_id: rid,
                principal: Principal::User(Arc::from(user)),
                server_final: String::new(),
            })
        }
        Ok(None) => {
            Stats::add(&shared.stats.auth_failed, 1);
            if let Some(ip) = ip {
                shared.access.record_failure(ip);
            }
            warn!(
                peer = %ip.map_or_else(|| "unknown".to_owned(), |i| i.to_string()),
                user = %user,
                "EXTERNAL authentication failed: the certificate's subject names no user"
            );
            tokio::time::sleep(shared.access.failure_delay).await;
            Err(Refusal::Close(
                rid,
                Response::error(
                    ErrorCode::Unauthorized,
                    format!("authentication failed: the client certificate names user '{user}', who does not exist"),
                ),
            ))
        }
        Err(e) => Err(Refusal::Answer(
            rid,
            Response::error(e.code(), format!("cannot read users: {e}")),
        )),
    }
}

async fn scram<F: NextFrame + Send>(
    shared: &Arc<Shared>,
    c: &Connect,
    rid: u32,
    frames: &mut F,
    ip: Option<IpAddr>,
) -> Result<Authenticated, Refusal> {
    let access = &shared.access;
    if let Some(wait) = ip.and_then(|ip| access.blocked(ip)) {
        Stats::add(&shared.stats.auth_refused_rate, 1);
        return Err(Refusal::Close(
            rid,
            Response::error(
                ErrorCode::LimitExceeded,
                format!(
                    "too many failed authentications from this address: try again in {} s",
                    wait.as_secs().max(1)
                ),
            ),
        ));
    }
    let first = match ClientFirst::parse(&c.credentials) {
        Ok(f) => f,
        Err(e) => return Err(fail(shared, ip, None, rid, &e).await),
    };
    let credential = match shared.store.users().user(first.user()).await {
        Ok(Some(u)) => match StoredCredential::decode(&u.credential) {
            Ok(c) => Some(c),
            Err(_) => {
                warn!(user = %u.name, "the stored credential does not parse; refusing the user");
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            return Err(Refusal::Answer(
                rid,
                Response::error(e.code(), format!("cannot read users: {e}")),
            ))
        }
    };
    let known = credential.is_some();
    let (exchange, server_first) =
        ServerExchange::start(first, credential, &access.secret, access.iterations);
    frames.reply(rid, Response::AuthChallenge { data: server_first });
    let frame = match frames.next().await {
        Ok(f) => f,
        Err(reason) => {
            if let Some(ip) = ip {
                access.record_failure(ip);
            }
            Stats::add(&shared.stats.auth_failed, 1);
            return Err(Refusal::Ended(reason));
        }
    };
    let user = exchange.user().to_owned();
    let rid = frame.request_id;
    let final_message = match Request::decode(&frame) {
        Ok(Request::AuthResponse { data }) => data,
        _ => {
            let e = ScramError::Malformed("expected AuthResponse");
            return Err(fail(shared, ip, Some(&user), rid, &e).await);
        }
    };
    match exchange.finish(&final_message) {
        Ok((user, server_final)) => {
            Stats::add(&shared.stats.auth_succeeded, 1);
            Ok(Authenticated {
                reply_id: rid,
                principal: Principal::User(Arc::from(user.as_str())),
                server_final,
            })
        }
        Err(e) => {
            if !known {
                info!(user = %user, "authentication for an unknown user");
            }
            Err(fail(shared, ip, Some(&user), rid, &e).await)
        }
    }
}

/// Counts, logs and delays a failed authentication; the answer closes the connection.
async fn fail(
    shared: &Shared,
    ip: Option<IpAddr>,
    user: Option<&str>,
    rid: u32,
    e: &ScramError,
) -> Refusal {
    Stats::add(&shared.stats.auth_failed, 1);
    if let Some(ip) = ip {
        shared.access.record_failure(ip);
    }
    warn!(
        peer = %ip.map_or_else(|| "unknown".to_owned(), |i| i.to_string()),
        user = %user.unwrap_or("?"),
        reason = %e,
        "authentication failed"
    );
    tokio::time::sleep(shared.access.failure_delay).await;
    let message = match e {
        ScramError::Malformed(_) => e.to_string(),
        _ => "authentication failed: unknown user or wrong password".to_owned(),
    };
    Refusal::Close(rid, Response::error(ErrorCode::Unauthorized, message))
}
