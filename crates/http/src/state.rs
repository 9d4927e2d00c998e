//! What the handlers share: the broker's management facade, the sampled rates, the
//! listener's bounds and the slots of the requests served at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::rates::Rates;
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
    /// Time to receive a request's body, from when its request is admitted: a body still
    /// coming after this is answered 408 and its connection closed.
    pub body_timeout: Duration,
    /// Time an answer may wait for the client to take more of it: a connection whose client
    /// reads nothing for this long is closed, and its answer's memory freed.
    pub write_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            max_body_bytes: 4 << 20,
            max_requests: 32,
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
        }
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
}

impl AppState {
    /// State over a broker's facade and its sampler.
    pub fn new(mgmt: Management, rates: Rates, limits: HttpLimits) -> Arc<AppState> {
        Arc::new(AppState {
            mgmt,
            rates,
            limits,
            requests: Arc::new(Semaphore::new(limits.max_requests)),
        })
    }
}
