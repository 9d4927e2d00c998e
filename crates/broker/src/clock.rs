//! The broker's clock: where every time the broker stamps or compares comes from (message
//! arrival, delivery and expiry times, lease deadlines). [`SystemClock`] in production; tests
//! inject a clock they move by hand, so that delays and time to live are tested without
//! sleeping.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of "now", ms since the Unix epoch, and a way to wait for a later time.
pub trait Clock: Send + Sync + 'static {
    /// The current time, ms since the Unix epoch.
    fn now_ms(&self) -> u64;

    /// Resolves once [`Clock::now_ms`] has reached `at_ms` (at once if it has). The broker's
    /// jobs also re-check on their own, so an early wake-up is harmless.
    fn sleep_until_ms(&self, at_ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn sleep_until_ms(&self, at_ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let wait = at_ms.saturating_sub(self.now_ms());
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
}
