//! Whether a connection is still alive: a session from which no complete frame arrives for
//! 1.5 keep-alive intervals is closed (as MQTT does), and so is a connection whose frame has
//! started arriving but not ended within the read timeout (a client sending a byte at a time),
//! or whose requests have been held back by its request budgets for the read timeout (a client
//! pipelining far more waiting requests than it is allowed). Time during which the connection
//! is held up by its outbound budget (the client is not reading; the write timeout covers
//! that) or by memory pressure counts for nothing.
//!
//! Checked on a coarse tick rather than with a timer per frame: the reader only notes that a
//! frame arrived; the tick turns that into times. A check is at most one tick late.

use std::time::Duration;

use tokio::time::Instant;

use crate::close_reason::CloseReason;

/// Shortest and longest tick.
const MIN_TICK: Duration = Duration::from_millis(10);
const MAX_TICK: Duration = Duration::from_secs(1);

/// What the connection is doing, for [`Liveness::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reading and starting requests.
    Active,
    /// Held up by its request budgets (requests in progress, bytes they hold).
    Held,
    /// Held up by something else: its outbound budget, memory pressure.
    Paused,
}

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

    /// A check at `now`: `mode` what the connection is doing, `seen` whether a complete frame
    /// was started since the last check, `waiting` whether a frame is buffered but not started
    /// (an incomplete one, or, when held, any). Returns why the connection must close, if it
    /// must.
    pub fn check(
        &mut self,
        now: Instant,
        mode: Mode,
        seen: bool,
        waiting: bool,
    ) -> Option<CloseReason> {
        if mode == Mode::Paused || seen {
            self.last_frame = now;
            // A frame left waiting behind one just started came after it.
            self.partial_since = (mode != Mode::Paused && waiting).then_some(now);
            return None;
        }
        if waiting {
            let since = *self.partial_since.get_or_insert(now);
            if now.duration_since(since) >= self.read_timeout {
                return Some(CloseReason::ReadTimeout(self.read_timeout));
            }
        } else {
            self.partial_since = None;
        }
        if mode == Mode::Held {
            // Silent while its requests wait: that is not idleness.
            self.last_frame = now;
            return None;
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
        assert!(l.check(t0 + 2 * S, Mode::Active, false, false).is_none());
        assert!(
            l.check(t0 + 2 * S, Mode::Active, true, false).is_none(),
            "a frame"
        );
        assert!(l.check(t0 + 4 * S, Mode::Active, false, false).is_none());
        assert!(matches!(
            l.check(t0 + 5 * S, Mode::Active, false, false),
            Some(CloseReason::Idle(_))
        ));
    }

    #[test]
    fn a_frame_that_never_ends_closes_after_the_read_timeout() {
        let t0 = Instant::now();
        let mut l = Liveness::new(100 * S, 2 * S);
        assert!(l.check(t0, Mode::Active, true, true).is_none());
        assert!(l.check(t0 + S, Mode::Active, false, true).is_none());
        assert!(matches!(
            l.check(t0 + 2 * S, Mode::Active, false, true),
            Some(CloseReason::ReadTimeout(_))
        ));
    }

    #[test]
    fn requests_held_back_by_the_budgets_close_after_the_read_timeout() {
        let t0 = Instant::now();
        let mut l = Liveness::new(3 * S, 4 * S);
        assert!(l.check(t0, Mode::Held, false, false).is_none());
        assert!(
            l.check(t0 + 10 * S, Mode::Held, false, false).is_none(),
            "waiting for replies with nothing more sent is neither idle nor late"
        );
        assert!(l.check(t0 + 11 * S, Mode::Held, false, true).is_none());
        assert!(matches!(
            l.check(t0 + 15 * S, Mode::Held, false, true),
            Some(CloseReason::ReadTimeout(_))
        ));
    }

    #[test]
    fn time_without_reading_does_not_count() {
        let t0 = Instant::now();
        let mut l = Liveness::new(3 * S, 2 * S);
        assert!(l.check(t0 + 10 * S, Mode::Paused, false, true).is_none());
        assert!(l.check(t0 + 11 * S, Mode::Active, false, true).is_none());
        assert!(l.check(t0 + 12 * S, Mode::Active, false, false).is_none());
        assert!(l.check(t0 + 14 * S, Mode::Active, false, false).is_some());
        assert_eq!(l.tick_period(), Duration::from_millis(250));
    }
}
