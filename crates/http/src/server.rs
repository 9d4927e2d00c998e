//! The accept loop: at most [`HttpLimits::max_connections`] connections at once (one more is
//! closed at once), a deadline for a request's headers (slow clients), a deadline for a
//! client to take more of an answer ([`HttpLimits::write_timeout`]: one that stops reading is
//! cut off, and its answer freed), keep-alive, and a graceful end when the broker shuts down. When the broker's listeners speak TLS
//! ([`Management::tls`]), so does this one: each connection's TLS handshake must end within
//! the header deadline, and a failed one closes the connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::rates::Rates;
use crate::routes;
use crate::stall::StallLimit;
use crate::state::{AppState, HttpLimits};
use crate::Management;

/// A connection's byte stream: a TCP socket or TLS over one.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// Serves the HTTP API on `listener` until the broker shuts down.
pub fn serve(listener: TcpListener, mgmt: Management, limits: HttpLimits) -> JoinHandle<()> {
    serve_with(listener, mgmt, limits, axum::Router::new())
}

/// [`serve`], with more routes beside the API's: those of other crates that answer on the
/// HTTP listener (STOMP over WebSocket at `/stomp`). They get neither the API's guard nor
/// its JSON errors, and connections may be upgraded (WebSocket).
pub fn serve_with(
    listener: TcpListener,
    mgmt: Management,
    limits: HttpLimits,
    extra: axum::Router,
) -> JoinHandle<()> {
    let rates = Rates::start(mgmt.clone());
    let app = extra.merge(routes::router(
        AppState::new(mgmt.clone(), rates, limits),
        limits,
    ));
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let shutdown = mgmt.shutdown_token();
    let tls = mgmt.tls().cloned();
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, tls = tls.is_some(), "HTTP API, metrics and console listening");
    }
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                r = listener.accept() => r,
                _ = shutdown.cancelled() => return,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                debug!(%peer, "HTTP connection refused: at the connection limit");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            // The peer's address, for the failed-authentication limit per address; and the
            // write limit lifted once the connection is upgraded (its protocol bounds it then).
            let armed = Arc::new(AtomicBool::new(true));
            let disarm = armed.clone();
            let app = app
                .clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer)))
                .layer(axum::middleware::map_response(move |r: Response| {
                    if r.status() == StatusCode::SWITCHING_PROTOCOLS {
                        disarm.store(false, Ordering::Release);
                    }
                    std::future::ready(r)
                }));
            let service = TowerToHyperService::new(app);
            let shutdown = shutdown.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let io: Box<dyn Io> = match tls {
                    None => Box::new(stream),
                    Some(tls) => match tls.accept(stream, limits.header_timeout).await {
                        Ok(accepted) => Box::new(accepted.stream),
                        Err(e) => {
                            debug!(%peer, error = %e, "HTTP connection's TLS handshake failed");
                            return;
                        }
                    },
                };
                let io = StallLimit::new(io, limits.write_timeout, armed);
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .keep_alive(true)
                    .max_buf_size(64 * 1024)
                    .serve_connection(TokioIo::new(io), service)
                    .with_upgrades();
                tokio::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            debug!(%peer, error = %e, "HTTP connection ended");
                        }
                    }
                    _ = shutdown.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                    }
                }
                drop(permit);
            });
        }
    })
}
