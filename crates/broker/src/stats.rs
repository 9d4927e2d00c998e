//! Counters kept by the broker, for operators (logs, later the metrics endpoint) and tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// Broker-wide counters. All relaxed atomics: they are statistics, not synchronisation.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Connections refused with `ServerFull`.
    pub connections_refused_full: AtomicU64,
    /// Connections closed because a frame was malformed or oversized.
    pub connections_closed_malformed: AtomicU64,
    /// Requests answered.
    pub requests: AtomicU64,
    /// Messages stored by sends.
    pub messages_sent: AtomicU64,
    /// Deliveries handed out (receives and pushes).
    pub deliveries: AtomicU64,
}

impl Stats {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
