//! The start of a connection: frames until a `Connect` is accepted, then the session.
//!
//! Frames before connect get `Unauthorized` (`Ping` gets `Pong`, `Disconnect` ends the
//! connection); a refused connect leaves the connection open for another try, except
//! `UnsupportedVersion`, which closes it, and failed authentications (see
//! [`crate::authenticate`]). The whole handshake, authentication included, must end within
//! `handshake_timeout_ms`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::requests::{Connect, CONNECT_EPHEMERAL, CONNECT_FLAGS};
use ferry_protocol::responses::Connected;
use ferry_protocol::{
    speaks_version, split_frame, ErrorCode, ErrorReply, RawFrame, Request, Response, WireError,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use ferry_store::Registration;
use tokio::io::AsyncReadExt;

use crate::access::Principal;
use crate::authenticate::{authenticate, NextFrame, Refusal};
use crate::close_reason::CloseReason;
use crate::config::MIN_KEEPALIVE_MS;
use crate::handlers::{store_error, validate};
use crate::session::{Outbound, Session};
use crate::shared::Shared;
use crate::stats::Stats;
use crate::wire::WireRead;

/// A session that has started, with the keep-alive interval it was granted.
pub struct Started {
    /// The session.
    pub session: Arc<Session>,
    /// The keep-alive interval granted.
    pub keepalive: Duration,
}

/// The frames of a connection during its handshake, until its deadline.
struct Frames<'a> {
    shared: &'a Shared,
    rd: &'a mut WireRead,
    rbuf: &'a mut BytesMut,
    out: &'a Outbound,
    deadline: tokio::time::Instant,
}

impl NextFrame for Frames<'_> {
    async fn next(&mut self) -> Result<RawFrame, CloseReason> {
        loop {
            match split_frame(self.rbuf, self.shared.limits.max_frame_bytes) {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(e) => return Err(CloseReason::Malformed(e)),
            }
            tokio::select! {
                r = self.rd.read_buf(self.rbuf) => match r {
                    Ok(0) => return Err(CloseReason::PeerClosed),
                    Ok(_) => {}
                    Err(e) => return Err(CloseReason::Io(e)),
                },
                _ = tokio::time::sleep_until(self.deadline) => return Err(CloseReason::HandshakeTimeout),
                _ = self.out.closing().cancelled() => {
                    return Err(self.out.failure().map_or(CloseReason::Shutdown, CloseReason::Write));
                }
            }
        }
    }

    fn reply(&self, request_id: u32, response: Response) {
        let mut b = BytesMut::new();
        response.encode(request_id, &mut b);
        let _ = self.out.send(b.freeze());
    }
}

/// Reads frames until a connect request is accepted, and answers it. `tls_user`: the user a
/// verified TLS client certificate names, if any.
pub async fn run(
    shared: &Arc<Shared>,
    rd: &mut WireRead,
    rbuf: &mut BytesMut,
    out: &Outbound,
    ip: Option<IpAddr>,
    tls_user: Option<&str>,
) -> Result<Started, CloseReason> {
    let mut frames = Frames {
        shared,
        rd,
        rbuf,
        out,
        deadline: tokio::time::Instant::now() + shared.policy.handshake_timeout,
    };
    loop {
        let frame = frames.next().await?;
        let rid = frame.request_id;
        let reply = |resp: Response| frames.reply(rid, resp);
        match Request::decode(&frame) {
            Ok(Request::Connect(c)) => {
                if let Err(e) = precheck(shared, &c) {
                    let fatal = e.code == ErrorCode::UnsupportedVersion;
                    reply(Response::Error(e));
                    if fatal {
                        return Err(CloseReason::Refused(ErrorCode::UnsupportedVersion));
                    }
                    continue;
                }
                let who = match authenticate(shared, &c, rid, &mut frames, ip, tls_user).await {
                    Ok(who) => who,
                    Err(Refusal::Answer(id, resp)) => {
                        frames.reply(id, resp);
                        continue;
                    }
                    Err(Refusal::Close(id, resp)) => {
                        frames.reply(id, resp);
                        return Err(CloseReason::Refused(ErrorCode::Unauthorized));
                    }
                    Err(Refusal::Ended(reason)) => return Err(reason),
                };
                let rid = who.reply_id;
                let version = c.version;
                match connect(shared, c, out, ip, who.principal).await {
                    Ok(started) => {
                        // Before the reply: no request of the session (a subscribe) can come
                        // before it, so every push is written for the client's version.
                        started.session.set_version(version);
                        frames.reply(
                            rid,
                            Response::Connected(Connected {
                                version,
                                client: started.session.client.clone(),
                                limits: shared.limits,
                                keepalive_ms: started.keepalive.as_millis() as u32,
                                auth: who.server_final,
                            }),
                        );
                        return Ok(started);
                    }
                    Err(resp) => frames.reply(rid, resp),
                }
            }
            Ok(Request::Disconnect) => {
                reply(Response::Ok);
                return Err(CloseReason::Disconnected);
            }
            Ok(Request::Ping) => reply(Response::Pong),
            Ok(_) => reply(Response::error(
                ErrorCode::Unauthorized,
                "connect first: this connection has no session",
            )),
            Err(WireError::UnknownKind(kind)) => reply(Response::error(
                ErrorCode::UnknownRequest,
                format!("unknown request type {kind:#06x}"),
            )),
            Err(e) => return Err(CloseReason::Malformed(e)),
        }
    }
}

/// The keep-alive interval granted for `asked` ms (0: the broker's choice).
pub fn granted_keepalive(asked: u32, max: u32) -> Duration {
    let ms = if asked == 0 {
        max
    } else {
        asked.clamp(MIN_KEEPALIVE_MS, max.max(MIN_KEEPALIVE_MS))
    };
    Duration::from_millis(u64::from(ms))
}

/// Checks what a connect request says of itself (version, flags, name) before anything else.
fn precheck(shared: &Shared, c: &Connect) -> Result<(), ErrorReply> {
    if !speaks_version(c.version) {
        return Err(ErrorReply::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this broker speaks version \
                 {MIN_PROTOCOL_VERSION} up to version {PROTOCOL_VERSION}",
                c.version
            ),
        ));
    }
    if c.flags & !CONNECT_FLAGS != 0 {
        return Err(ErrorReply::new(
            ErrorCode::InvalidArgument,
            format!(
                "unknown connect flags {:#x}: protocol version {} defines {CONNECT_FLAGS:#x}",
                c.flags & !CONNECT_FLAGS,
                c.version
            ),
        ));
    }
    validate::name("client", &c.client, &shared.limits)?;
    Ok(())
}

/// Binds the client name to `principal` and starts the session, or returns the error response.
async fn connect(
    shared: &Arc<Shared>,
    c: Connect,
    out: &Outbound,
    ip: Option<IpAddr>,
    principal: Principal,
) -> Result<Started, Response> {
    let ephemeral = c.flags & CONNECT_EPHEMERAL != 0;
    let keepalive = granted_keepalive(c.keepalive_ms, shared.policy.keepalive_ms);
    let session = bind_session(shared, c.client, ephemeral, out, ip, principal, false).await?;
    Ok(Started { session, keepalive })
}

/// Starts a session as client `client` for `principal` (a user may open sessions under its
/// own name, or names its grants allow), claiming the name here and in the store (`ephemeral`:
/// registered for this session alone); the error response when refused. Native connections
/// and gateways' in-process sessions ([`crate::local`]) both start here. `generated`: a
/// gateway made the name up for a client that named none; a user's made-up names are
/// `USER.SOMETHING` (the user's own name space, besides what its grants allow), and a made-up
/// name must be new, so it never inherits a registration, or messages addressed to it.
pub(crate) async fn bind_session(
    shared: &Arc<Shared>,
    client: String,
    ephemeral: bool,
    out: &Outbound,
    ip: Option<IpAddr>,
    principal: Principal,
    generated: bool,
) -> Result<Arc<Session>, Response> {
    if let Principal::User(user) = &principal {
        let own_space = generated
            && client
                .strip_prefix(user.as_ref())
                .is_some_and(|rest| rest.len() > 1 && rest.starts_with('.'));
        let grants = shared.access.grants(&principal);
        if !own_space && !grants.allows_client(user, &client) {
            return Err(Response::error(
                ErrorCode::Unauthorized,
                format!(
                    "permission denied: user '{user}' may not open sessions as client '{client}' \
                     (its own name, or a 'client PATTERN' grant)"
                ),
            ));
        }
    }
    if generated {
        match shared.store.sessions().client_exists(&client).await {
            Ok(false) => {}
            Ok(true) => {
                return Err(Response::error(
                    ErrorCode::AlreadyOnline,
                    format!("the made-up client name '{client}' is registered already"),
                ))
            }
            Err(e) => return Err(store_error(&e)),
        }
    }
    if let Some(ip) = ip {
        check_new_name_rate(shared, &client, ip).await?;
    }
    let Some(session_id) = shared.claim_client(&client) else {
        return Err(Response::error(
            ErrorCode::AlreadyOnline,
            format!("client '{client}' is already online"),
        ));
    };
    // The local map is the fast path; the store decides across every node sharing it (and
    // registers the name: for this session alone when the client says so).
    let registration = if ephemeral {
        Registration::Ephemeral
    } else {
        Registration::Permanent
    };
    if let Err(e) = shared
        .store
        .sessions()
        .claim_session(&client, session_id, registration)
        .await
    {
        shared.release_client(&client, session_id);
        return Err(store_error(&e));
    }
    Ok(Arc::new(Session::new(
        session_id,
        client,
        out.clone(),
        ephemeral,
        principal,
    )))
}

/// Refuses a name the store does not know yet when `ip` has registered more new names than
/// its rate allows.
async fn check_new_name_rate(shared: &Shared, client: &str, ip: IpAddr) -> Result<(), Response> {
    let admission = &shared.admission;
    if !admission.limits_new_clients() {
        return Ok(());
    }
    match shared.store.sessions().client_exists(client).await {
        Ok(true) => Ok(()),
        Ok(false) if admission.allow_new_client(ip) => Ok(()),
        Ok(false) => {
            Stats::add(&shared.stats.connects_refused_new_name_rate, 1);
            Err(Response::error(
                ErrorCode::LimitExceeded,
                format!(
                    "too many new client names from {ip}: at most {} a second; connect under a name used before, or later",
                    admission.new_per_sec()
                ),
            ))
        }
        Err(e) => Err(store_error(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keepalive_granted_is_the_brokers_or_the_clients_within_bounds() {
        let ms = |d: Duration| d.as_millis();
        assert_eq!(ms(granted_keepalive(0, 60_000)), 60_000);
        assert_eq!(ms(granted_keepalive(5_000, 60_000)), 5_000);
        assert_eq!(ms(granted_keepalive(600_000, 60_000)), 60_000);
        assert_eq!(ms(granted_keepalive(1, 60_000)), 100);
    }
}
