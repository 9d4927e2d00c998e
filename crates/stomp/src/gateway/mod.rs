//! The STOMP gateway: STOMP connections carried over the broker's own sessions.
//!
//! Each STOMP connection (over TCP, or over WebSocket, see [`crate::websocket`]) gets one
//! broker session, opened in process with [`ferry_broker::local::Sessions`]: STOMP frames
//! become the native protocol's requests, run by the same handlers (permission checks,
//! limits, counters, store paths) as a native connection's; subscriptions are the broker's
//! push subscriptions, whose deliveries the broker encodes straight into MESSAGE frames with
//! the gateway's encoder and queues on the session's outbound queue (its byte budget, credit
//! and held auto-ack deliveries as for a native connection). When the STOMP connection ends
//! for any reason, the gateway ends the session at once, and its unacknowledged client-ack
//! deliveries go back to their queues.
//!
//! Modules: [`connection`] (handshake, frames in order, the end), [`failure`] (why a
//! connection closes with an ERROR), [`mapping`] (destinations
//! and headers, MESSAGE frames), [`subscription`] (the encoder of a subscription's MESSAGE
//! frames), [`sender`] (`/sender/NAME` subscriptions), [`acks`] (the ids ACK and NACK name),
//! [`writer`] (frames out, heart-beats, slow readers), [`wire`] (TCP and WebSocket as byte
//! sources and frame sinks).

pub mod acks;
pub mod connection;
pub mod failure;
pub mod mapping;
pub mod sender;
pub mod subscription;
pub mod wire;
pub mod writer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::access::Principal;
use ferry_broker::local::Sessions;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::codec::Limits;

/// How the gateway behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A SEND or SUBSCRIBE to a queue or topic that does not exist creates it.
    pub auto_create: bool,
    /// The heart-beat interval the gateway offers both ways, in ms (0: none).
    pub heartbeat_ms: u32,
    /// Time to send CONNECT.
    pub connect_timeout: Duration,
    /// Time a frame may take to arrive once it has started.
    pub read_timeout: Duration,
    /// A client that takes nothing for this long is disconnected.
    pub write_timeout: Duration,
    /// Frames in progress on one connection before it stops reading.
    pub max_pending: usize,
    /// Subscriptions on one connection.
    pub max_subscriptions: usize,
    /// Messages pushed ahead of the client's acknowledgements when SUBSCRIBE names none.
    pub default_prefetch: u32,
    /// STOMP connections served at once (over TCP and WebSocket together).
    pub max_connections: usize,
    /// WebSocket connections from pages of other origins are served (the HTTP listener's
    /// `http_allow_remote`); otherwise a page must come from the address it connects to.
    pub allow_remote_origins: bool,
    /// The broker's TLS acceptor, when its listeners speak TLS: the STOMP listener then
    /// speaks TLS with the same certificate (and asks for client certificates when the broker
    /// does). WebSocket connections come through the HTTP listener, which has its own.
    pub tls: Option<ferry_tls::Acceptor>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            auto_create: true,
            heartbeat_ms: 1_000,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_pending: 256,
            max_subscriptions: 256,
            default_prefetch: 100,
            max_connections: 1024,
            allow_remote_origins: false,
            tls: None,
        }
    }
}

impl Settings {
    /// The settings a broker configuration implies: its STOMP auto-create, timeouts and
    /// connection limit.
    pub fn from_config(config: &ferry_broker::BrokerConfig) -> Settings {
        let ms = |n: u32| Duration::from_millis(u64::from(n));
        Settings {
            auto_create: config.stomp_auto_create,
            connect_timeout: ms(config.handshake_timeout_ms),
            read_timeout: ms(config.read_timeout_ms),
            write_timeout: ms(config.write_timeout_ms),
            max_connections: config.limits.max_connections as usize,
            allow_remote_origins: config.http_allow_remote,
            ..Settings::default()
        }
    }
}

/// What every connection of the gateway shares.
pub(crate) struct Inner {
    pub(crate) sessions: Sessions,
    pub(crate) settings: Settings,
    pub(crate) limits: Limits,
    names: AtomicU64,
    /// Random per gateway: made-up client names differ from those of earlier runs.
    salt: u32,
    slots: Arc<Semaphore>,
}

impl Inner {
    /// A client name for a connection without `client-id`, registered for the session alone:
    /// in a user's own name space (`USER.stomp-…`, which the broker lets the user have), unique
    /// in this process, and with a random part so that it is new across restarts too (the
    /// broker refuses a made-up name that is registered already).
    pub(crate) fn generated_name(&self, principal: &Principal) -> String {
        let n = self.names.fetch_add(1, Ordering::Relaxed);
        let salt = self.salt;
        match principal {
            Principal::User(user) => format!("{user}.stomp-{salt:x}-{n}"),
            _ => format!("stomp-{salt:x}-{n}"),
        }
    }
}

/// The STOMP gateway of one broker. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl Gateway {
    /// A gateway opening its sessions with `sessions` (from
    /// [`ferry_broker::RunningBroker::sessions`]); frame limits follow the broker's body limit.
    pub fn new(sessions: Sessions, settings: Settings) -> Gateway {
        let body = sessions.limits().max_body_bytes as usize;
        let slots = Arc::new(Semaphore::new(settings.max_connections));
        Gateway {
            inner: Arc::new(Inner {
                sessions,
                settings,
                limits: Limits::with_body(body),
                names: AtomicU64::new(1),
                salt: random_salt(),
                slots,
            }),
        }
    }

    /// The gateway's settings.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The frame limits the gateway enforces (and advertises in CONNECTED).
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Serves STOMP over TCP on `listener` until the broker shuts down.
    pub fn serve_tcp(&self, listener: TcpListener) -> JoinHandle<()> {
        let gw = self.inner.clone();
        if let Ok(addr) = listener.local_addr() {
            info!(%addr, "STOMP listening");
        }
        let shutdown = gw.sessions.shutdown_token();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(1);
            loop {
                let accepted = tokio::select! {
                    r = listener.accept() => r,
                    _ = shutdown.cancelled() => return,
                };
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        warn!(error = %e, ?backoff, "STOMP accept failed");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                        continue;
                    }
                };
                backoff = Duration::from_millis(1);
                let _ = stream.set_nodelay(true);
                let gw = gw.clone();
                match gw.settings.tls.clone() {
                    None => {
                        let (rd, wr) = stream.into_split();
                        tokio::spawn(async move {
                            serve_connection(
                                gw,
                                wire::Stream::new(rd),
                                wire::Stream::new(wr),
                                peer.to_string(),
                                Some(peer.ip()),
                            )
                            .await;
                        });
                    }
                    // The handshake runs in the connection's own task, bounded by the time a
                    // client has to send CONNECT; after it, nothing knows the transport.
                    Some(tls) => {
                        tokio::spawn(async move {
                            let timeout = gw.settings.connect_timeout;
                            match tls.accept(stream, timeout).await {
                                Ok(accepted) => {
                                    let (rd, wr) = tokio::io::split(accepted.stream);
                                    serve_connection(
                                        gw,
                                        wire::Stream::new(rd),
                                        wire::Stream::new(wr),
                                        peer.to_string(),
                                        Some(peer.ip()),
                                    )
                                    .await;
                                }
                                Err(e) => {
                                    debug!(%peer, error = %e, "STOMP TLS handshake failed");
                                    gw.sessions.count_tls_handshake_failed();
                                }
                            }
                        });
                    }
                }
            }
        })
    }

    /// Serves one connection given as a byte source and a frame sink (WebSocket).
    pub(crate) async fn serve<S: wire::ByteSource, W: wire::FrameSink>(
        &self,
        src: S,
        sink: W,
        peer: String,
        ip: Option<std::net::IpAddr>,
    ) {
        serve_connection(self.inner.clone(), src, sink, peer, ip).await;
    }
}

async fn serve_connection<S: wire::ByteSource, W: wire::FrameSink>(
    gw: Arc<Inner>,
    src: S,
    sink: W,
    peer: String,
    ip: Option<std::net::IpAddr>,
) {
    let Ok(_slot) = gw.slots.clone().try_acquire_owned() else {
        debug!(%peer, "STOMP connection refused: at the connection limit");
        let details = format!(
            "at most {} STOMP connections at once",
            gw.settings.max_connections
        );
        refuse(&gw, sink, "the server is at its connection limit", &details).await;
        return;
    };
    // The broker's limit per address counts STOMP connections with native ones.
    let _address = match ip.map(|ip| gw.sessions.admit_address(ip)).transpose() {
        Ok(slot) => slot,
        Err(reason) => {
            debug!(%peer, %reason, "STOMP connection refused: at the limit per address");
            refuse(
                &gw,
                sink,
                &reason,
                "close some connections from this address first",
            )
            .await;
            return;
        }
    };
    connection::serve(gw, src, sink, peer, ip).await;
}

/// 32 random bits from the standard library's per-process hash keys (no generator needed
/// for a name that only has to differ from earlier runs').
fn random_salt() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish() as u32
}

/// Answers a connection refused before its CONNECT with an ERROR frame, and closes it.
async fn refuse<W: wire::FrameSink>(gw: &Inner, mut sink: W, message: &str, details: &str) {
    let v = crate::codec::Version::V1_0;
    let frame = mapping::error(message, details, None, v);
    let _ = tokio::time::timeout(
        gw.settings.write_timeout,
        wire::FrameSink::write(&mut sink, &[mapping::encode(&frame, v)]),
    )
    .await;
    let _ =
        tokio::time::timeout(gw.settings.write_timeout, wire::FrameSink::close(&mut sink)).await;
}
