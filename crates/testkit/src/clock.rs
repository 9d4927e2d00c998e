//! A clock the test moves by hand, for delays and time to live without sleeping.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ferry_broker::Clock;
use tokio::sync::watch;

/// A broker clock that stands still until the test calls [`ManualClock::advance`] or
/// [`ManualClock::set`]; whatever waits for a time on it is woken when it gets there.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<u64>,
}

impl ManualClock {
    /// A clock reading `start_ms` (ms since the Unix epoch).
    pub fn new(start_ms: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            now: watch::Sender::new(start_ms),
        })
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now.send_modify(|t| *t = t.saturating_add(ms));
    }

    /// Sets the clock to `ms`.
    pub fn set(&self, ms: u64) {
        self.now.send_replace(ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        *self.now.borrow()
    }

    fn sleep_until_ms(&self, at_ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as the clock; if it is gone, time stops: wait forever.
            if rx.wait_for(|t| *t >= at_ms).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}
