//! What the handlers share: the broker's management facade, the sampled rates, the
//! listener's bounds (from the broker's `http_*` settings), the slots of the requests served
//! at once and each client address's share of them.

use std::sync::Arc;
use std::time::Duration;

use ferry_broker::config::HttpBounds;
use tokio::sync::Semaphore;

use crate::rates::Rates;
use crate::shares::Shares;
use crate::Management;

/// Bounds of the HTTP listener.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time to receive a request's headers.
    pub header_timeout: Duration,
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// API requests served at once, across connections, each until its answer's last byte is
    /// written (the health checks are not counted); one more gets 429 `ServerFull`.
    pub max_requests: usize,
    /// Of those, the most one client IP address may have at once; one more from it gets 429
    /// `ServerFull` (see [`crate::shares`]).
    pub max_requests_per_address: usize,
    /// Time to receive a request's body, from when its request is admitted: a body still
    /// coming after this is answered 408 and its connection closed.
    pub body_timeout: Duration,
    /// Time an answer may wait for the client to take more of it: a connection whose client
    /// reads nothing for this long is closed, and its answer's memory freed.
    pub write_timeout: Duration,
    /// Most bytes of JSON in a page of browsed messages (a page always shows one message).
    pub max_page_bytes: usize,
}

impl From<&HttpBounds> for HttpLimits {
    fn from(b: &HttpBounds) -> Self {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        HttpLimits {
            max_connections: b.max_connections as usize,
            header_timeout: ms(b.header_timeout_ms),
            max_body_bytes: b.max_body_bytes as usize,
            max_requests: b.max_requests as usize,
            max_requests_per_address: b.requests_per_address() as usize,
            body_timeout: ms(b.body_timeout_ms),
            write_timeout: ms(b.write_timeout_ms),
            max_page_bytes: b.max_page_bytes as usize,
        }
    }
}

impl Default for HttpLimits {
    /// The defaults of the broker's `http_*` settings.
    fn default() -> Self {
        HttpLimits::from(&HttpBounds::default())
    }
}

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    /// The broker.
    pub mgmt: Management,
    /// Sampled rates.
    pub rates: Rates,
    /// The listener's bounds.
    pub limits: HttpLimits,
    /// One permit per API request being served ([`HttpLimits::max_requests`]).
    pub requests: Arc<Semaphore>,
    /// Each client address's requests being served ([`HttpLimits::max_requests_per_address`]).
    pub shares: Arc<Shares>,
}

impl AppState {
    /// State over a broker's facade and its sampler.
    pub fn new(mgmt: Management, rates: Rates, limits: HttpLimits) -> Arc<AppState> {
        Arc::new(AppState {
            mgmt,
            rates,
            limits,
            requests: Arc::new(Semaphore::new(limits.max_requests)),
            shares: Shares::new(limits.max_requests_per_address),
        })
    }
}
