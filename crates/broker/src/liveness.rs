//! Whether a connection is still alive: a session from which no complete frame arrives for
//! 1.5 keep-alive intervals is closed (as MQTT does), and so is a connection whose frame has
//! started arriving but not ended within the read timeout (a client sending a byte at a time).
//!
//! Checked on a coarse tick rather than with a timer per frame: the reader only notes that a
//! frame arrived; the tick turns that into times. A check is at most one tick late.

use std::time::Duration;

use tokio::time::Instant;

use crate::connection::CloseReason;

/// Shortest and longest tick.
const MIN_TICK: Duration = Duration::from_millis(10);
const MAX_TICK: Duration = Duration::from_secs(1);

/// A connection's liveness clock.
#[derive(Debug)]
pub struct Liveness {
    idle_limit: Duration,
    read_timeout: Duration,
    last_frame: Instant,
    partial_since: Option<Instant>,
}

impl Liveness {
    /// Closes after `idle_limit` without a frame, or `read_timeout` into an incomplete one.
    pub fn new(idle_limit: Duration, read_timeout: Duration) -> Liveness {
        Liveness {
            idle_limit,
            read_timeout,
            last_frame: Instant::now(),
            partial_since: None,
        }
    }

    /// How often to [`Liveness::check`]: an eighth of the shorter limit, 10 ms to 1 s.
    pub fn tick_period(&self) -> Duration {
        (self.idle_limit.min(self.read_timeout) / 8).clamp(MIN_TICK, MAX_TICK)
    }

    /// A check at `now`: `reading` whether the connection reads requests (time it does not
    /// read, held up by its budgets, does not count), `seen` whether a complete frame arrived
    /// since the last check, `partial` whether an incomplete frame is buffered. Returns why
    /// the connection must close, if it must.
    pub fn check(
        &mut self,
        now: Instant,
        reading: bool,
        seen: bool,
        partial: bool,
    ) -> Option<CloseReason> {
        if !reading || seen {
            self.last_frame = now;
            // A frame left incomplete behind a complete one started after it.
            self.partial_since = (reading && partial).then_some(now);
            return None;
        }
        if partial {
            let since = *self.partial_since.get_or_insert(now);
            if now.duration_since(since) >= self.read_timeout {
                return Some(CloseReason::ReadTimeout(self.read_timeout));
            }
        } else {
            self.partial_since = None;
        }
        let silent = now.duration_since(self.last_frame);
        (silent >= self.idle_limit).then_some(CloseReason::Idle(silent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn silence_closes_after_the_idle_limit_and_frames_reset_it() {
        let t0 = Instant::now();
        let mut l = Liveness::new(3 * S, 10 * S);
        assert!(l.check(t0 + 2 * S, true, false, false).is_none());
        assert!(l.check(t0 + 2 * S, true, true, false).is_none(), "a frame");
        assert!(l.check(t0 + 4 * S, true, false, false).is_none());
        assert!(matches!(
            l.check(t0 + 5 * S, true, false, false),
            Some(CloseReason::Idle(_))
        ));
    }

    #[test]
    fn a_frame_that_never_ends_closes_after_the_read_timeout() {
        let t0 = Instant::now();
        let mut l = Liveness::new(100 * S, 2 * S);
        assert!(l.check(t0, true, true, true).is_none());
        assert!(l.check(t0 + S, true, false, true).is_none());
        assert!(matches!(
            l.check(t0 + 2 * S, true, false, true),
            Some(CloseReason::ReadTimeout(_))
        ));
    }

    #[test]
    fn time_without_reading_does_not_count() {
        let t0 = Instant::now();
        let mut l = Liveness::new(3 * S, 2 * S);
        assert!(l.check(t0 + 10 * S, false, false, true).is_none());
        assert!(l.check(t0 + 11 * S, true, false, true).is_none());
        assert!(l.check(t0 + 12 * S, true, false, false).is_none());
        assert!(l.check(t0 + 14 * S, true, false, false).is_some());
        assert_eq!(l.tick_period(), Duration::from_millis(250));
    }
}
