//! What the handlers share: the broker's management facade, the sampled rates and the
//! listener's bounds.

use std::sync::Arc;
use std::time::Duration;

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
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            max_body_bytes: 4 << 20,
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
}

impl AppState {
    /// State over a broker's facade and its sampler.
    pub fn new(mgmt: Management, rates: Rates, limits: HttpLimits) -> Arc<AppState> {
        Arc::new(AppState {
            mgmt,
            rates,
            limits,
        })
    }
}
