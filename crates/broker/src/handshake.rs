//! The start of a connection: frames until a `Connect` is accepted, then the session.
//!
//! Frames before connect get `Unauthorized` (`Ping` gets `Pong`, `Disconnect` ends the
//! connection); a refused connect leaves the connection open for another try, except
//! `UnsupportedVersion`, which closes it. The whole handshake must end within
//! `handshake_timeout_ms`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::requests::{Connect, CONNECT_EPHEMERAL, CONNECT_FLAGS};
use ferry_protocol::responses::Connected;
use ferry_protocol::{split_frame, ErrorCode, Request, Response, WireError, PROTOCOL_VERSION};
use ferry_store::Registration;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;

use crate::close_reason::CloseReason;
use crate::config::MIN_KEEPALIVE_MS;
use crate::handlers::{store_error, validate};
use crate::session::{Outbound, Session};
use crate::shared::Shared;
use crate::stats::Stats;

/// A session that has started, with the keep-alive interval it was granted.
pub struct Started {
    /// The session.
    pub session: Arc<Session>,
    /// The keep-alive interval granted.
    pub keepalive: Duration,
}

/// Reads frames until a connect request is accepted, and answers it.
pub async fn run(
    shared: &Arc<Shared>,
    rd: &mut OwnedReadHalf,
    rbuf: &mut BytesMut,
    out: &Outbound,
    ip: Option<IpAddr>,
) -> Result<Started, CloseReason> {
    let deadline = tokio::time::Instant::now() + shared.policy.handshake_timeout;
    loop {
        let frame = loop {
            match split_frame(rbuf, shared.limits.max_frame_bytes) {
                Ok(Some(f)) => break f,
                Ok(None) => {}
                Err(e) => return Err(CloseReason::Malformed(e)),
            }
            tokio::select! {
                r = rd.read_buf(rbuf) => match r {
                    Ok(0) => return Err(CloseReason::PeerClosed),
                    Ok(_) => {}
                    Err(e) => return Err(CloseReason::Io(e)),
                },
                _ = tokio::time::sleep_until(deadline) => return Err(CloseReason::HandshakeTimeout),
                _ = out.closing().cancelled() => {
                    return Err(out.failure().map_or(CloseReason::Shutdown, CloseReason::Write));
                }
            }
        };
        let rid = frame.request_id;
        let reply = |resp: Response| {
            let mut b = BytesMut::new();
            resp.encode(rid, &mut b);
            let _ = out.send(b.freeze());
        };
        match Request::decode(&frame) {
            Ok(Request::Connect(c)) => match connect(shared, c, out, ip).await {
                Ok(started) => {
                    reply(Response::Connected(Connected {
                        version: PROTOCOL_VERSION,
                        client: started.session.client.clone(),
                        limits: shared.limits,
                        keepalive_ms: started.keepalive.as_millis() as u32,
                    }));
                    return Ok(started);
                }
                Err(resp) => {
                    let fatal = matches!(&resp, Response::Error(e) if e.code == ErrorCode::UnsupportedVersion);
                    reply(resp);
                    if fatal {
                        return Err(CloseReason::Refused(ErrorCode::UnsupportedVersion));
                    }
                }
            },
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

/// Checks a connect request and starts the session, or returns the error response.
async fn connect(
    shared: &Arc<Shared>,
    c: Connect,
    out: &Outbound,
    ip: Option<IpAddr>,
) -> Result<Started, Response> {
    if c.version != PROTOCOL_VERSION {
        return Err(Response::error(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this broker speaks version {PROTOCOL_VERSION}",
                c.version
            ),
        ));
    }
    if c.flags & !CONNECT_FLAGS != 0 {
        return Err(Response::error(
            ErrorCode::InvalidArgument,
            format!(
                "unknown connect flags {:#x}: protocol version {PROTOCOL_VERSION} defines {CONNECT_FLAGS:#x}",
                c.flags & !CONNECT_FLAGS
            ),
        ));
    }
    validate::name("client", &c.client, &shared.limits).map_err(Response::Error)?;
    if let Some(ip) = ip {
        check_new_name_rate(shared, &c.client, ip).await?;
    }
    let Some(session_id) = shared.claim_client(&c.client) else {
        return Err(Response::error(
            ErrorCode::AlreadyOnline,
            format!("client '{}' is already online", c.client),
        ));
    };
    // The local map is the fast path; the store decides across every node sharing it (and
    // registers the name: for this session alone when the client says so).
    let ephemeral = c.flags & CONNECT_EPHEMERAL != 0;
    let registration = if ephemeral {
        Registration::Ephemeral
    } else {
        Registration::Permanent
    };
    if let Err(e) = shared
        .store
        .claim_session(&c.client, session_id, registration)
        .await
    {
        shared.release_client(&c.client, session_id);
        return Err(store_error(&e));
    }
    Ok(Started {
        session: Arc::new(Session::new(session_id, c.client, out.clone(), ephemeral)),
        keepalive: granted_keepalive(c.keepalive_ms, shared.policy.keepalive_ms),
    })
}

/// Refuses a name the store does not know yet when `ip` has registered more new names than
/// its rate allows.
async fn check_new_name_rate(shared: &Shared, client: &str, ip: IpAddr) -> Result<(), Response> {
    let admission = &shared.admission;
    if !admission.limits_new_clients() {
        return Ok(());
    }
    match shared.store.client_exists(client).await {
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
