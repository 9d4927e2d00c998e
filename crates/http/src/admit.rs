//! How many API requests are served at once, and what a client that goes away changes.
//!
//! - At most [`HttpLimits::max_requests`] requests are served at once, across every
//!   connection. A request holds its slot until its answer's last byte has been handed to the
//!   connection (or the connection is gone), not merely until its handler returns: an answer
//!   waiting for a client that does not read still counts. So the memory held by answers is
//!   bounded by the number of slots times the largest answer, whatever the number of
//!   connections. One request more is answered at once with 429 `ServerFull` and
//!   `Retry-After: 1`. The health checks (`/healthz`, `/readyz`) take no slot: a busy API is
//!   still alive and ready.
//! - Of those, one client IP address may have at most
//!   [`HttpLimits::max_requests_per_address`] at once ([`crate::shares`]): one more from it is
//!   answered 429 `ServerFull` saying that its own share is full, while other addresses are
//!   still served.
//! - A request's body must arrive within [`HttpLimits::body_timeout`] of its admission: one
//!   that trickles in (or stops) is answered 408 (`LimitExceeded`) and its connection closed,
//!   so a slow upload cannot keep its slot for long.
//! - A change (any method but `GET`, `HEAD` and `OPTIONS`) runs to its end once started, even
//!   if its client goes away meanwhile: an import of definitions or a user's change of password
//!   and grants is never left half done because a connection dropped. A read is dropped with
//!   its connection. (Nothing served over HTTP takes a message: browsing changes nothing.)
//!
//! [`HttpLimits::max_requests`]: crate::HttpLimits::max_requests
//! [`HttpLimits::body_timeout`]: crate::HttpLimits::body_timeout
//! [`HttpLimits::max_requests_per_address`]: crate::HttpLimits::max_requests_per_address

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferry_protocol::ErrorCode;
use futures_core::Stream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Sleep;

use crate::error::ApiError;
use crate::shares::Share;
use crate::state::AppState;

/// Routes served without a slot: cheap, and what an orchestrator polls to decide whether the
/// broker lives.
fn unlimited(path: &str) -> bool {
    path == "/healthz" || path == "/readyz"
}

fn busy(max: usize) -> Response {
    retry_soon(format!(
        "the HTTP API is serving {max} requests already: try again shortly"
    ))
}

/// The answer to a request over its address's share (while others may still be served).
fn share_full(ip: IpAddr, share: usize, max: usize) -> Response {
    retry_soon(format!(
        "this client's address {ip} has {share} requests being served already, its whole \
         share of the HTTP API's {max}: try again once one is answered"
    ))
}

/// 429 `ServerFull` with `message`, to be tried again in a second.
fn retry_soon(message: String) -> Response {
    let mut r = ApiError::new(ErrorCode::ServerFull, message).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// What a request holds while it is served: its slot among all, and its place in its
/// address's share (none when the peer is unknown: a router served without the accept loop).
struct Slot {
    _permit: OwnedSemaphorePermit,
    _share: Option<Share>,
}

/// The middleware (see the module docs).
pub async fn admit(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if unlimited(req.uri().path()) {
        return next.run(req).await;
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    // The address's share first: a client over it is told so, whatever the others do.
    let share = match peer {
        Some(ip) => match state.shares.take(ip) {
            Some(share) => Some(share),
            None => {
                let (share, max) = (
                    state.limits.max_requests_per_address,
                    state.limits.max_requests,
                );
                return share_full(ip.to_canonical(), share, max);
            }
        },
        None => None,
    };
    let Ok(permit) = state.requests.clone().try_acquire_owned() else {
        return busy(state.limits.max_requests);
    };
    let slot = Slot {
        _permit: permit,
        _share: share,
    };
    let change = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let late = Arc::new(AtomicBool::new(false));
    let req = with_deadline(req, state.limits.body_timeout, late.clone());
    let response = if change {
        // A task of its own: dropping this future (the client went away) does not stop it.
        match tokio::spawn(next.run(req)).await {
            Ok(r) => r,
            Err(e) => ApiError::new(ErrorCode::Internal, format!("the request failed: {e}"))
                .into_response(),
        }
    } else {
        next.run(req).await
    };
    if late.load(Ordering::Acquire) {
        return holding(too_slow(state.limits.body_timeout), slot);
    }
    holding(response, slot)
}

/// The answer to a body that did not arrive in time; the connection is closed after it.
fn too_slow(limit: Duration) -> Response {
    let mut r = ApiError::new(
        ErrorCode::LimitExceeded,
        format!("the request body did not arrive within {limit:?}"),
    )
    .into_response();
    *r.status_mut() = StatusCode::REQUEST_TIMEOUT;
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// `req` with a body that fails once `limit` has passed, setting `late`.
fn with_deadline(req: Request, limit: Duration, late: Arc<AtomicBool>) -> Request {
    use axum::body::HttpBody;
    if req.body().is_end_stream() {
        return req;
    }
    let (parts, body) = req.into_parts();
    let stream = Deadline {
        inner: body.into_data_stream(),
        timer: Box::pin(tokio::time::sleep(limit)),
        late,
    };
    Request::from_parts(parts, Body::from_stream(stream))
}

/// A request body's data, until a deadline.
struct Deadline<S> {
    inner: S,
    timer: Pin<Box<Sleep>>,
    late: Arc<AtomicBool>,
}

impl<S: Stream<Item = Result<Bytes, axum::Error>> + Unpin> Stream for Deadline<S> {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.late.store(true, Ordering::Release);
                Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the request body did not arrive in time",
                )))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// `response` with `slot` held until its body has been sent or dropped.
fn holding(response: Response, slot: Slot) -> Response {
    use axum::body::HttpBody;
    if response.body().is_end_stream() {
        // Nothing left to send (a HEAD, an empty answer): the slot goes now.
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // A streamed body has no length of its own: keep the one the answer had, so it is still
    // sent with `Content-Length` rather than chunked.
    if let Some(len) = body.size_hint().exact() {
        parts
            .headers
            .entry(header::CONTENT_LENGTH)
            .or_insert_with(|| HeaderValue::from(len));
    }
    let stream = Holding {
        inner: body.into_data_stream(),
        _slot: slot,
    };
    Response::from_parts(parts, Body::from_stream(stream))
}

/// A body's data with a request slot that goes when the body does.
struct Holding<S> {
    inner: S,
    _slot: Slot,
}

impl<S: Stream<Item = Result<Bytes, axum::Error>> + Unpin> Stream for Holding<S> {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}
