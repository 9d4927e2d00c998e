//! A rate limit for log lines that come in storms (sessions opening and closing): up to
//! [`BURST`] lines at once, refilled at [`PER_SECOND`] lines a second; the lines over the limit
//! are counted and the next line that gets through says how many were left out.

use std::sync::Mutex;
use std::time::Instant;

/// Lines allowed at once.
pub const BURST: f64 = 50.0;
/// Lines allowed per second after a burst.
pub const PER_SECOND: f64 = 10.0;

/// A token bucket; a std mutex held for a few arithmetic operations.
pub struct LogLimit {
    state: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    last: Instant,
    suppressed: u64,
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit {
            state: Mutex::new(Bucket {
                tokens: BURST,
                last: Instant::now(),
                suppressed: 0,
            }),
        }
    }
}

impl LogLimit {
    /// Whether a line may be written now: `Some(n)` with the number of lines left out since
    /// the last one written, `None` when this one is to be left out (and counted).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut b = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.last = now;
        b.tokens = (b.tokens + elapsed * PER_SECOND).min(BURST);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(std::mem::take(&mut b.suppressed))
        } else {
            b.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_storm_is_cut_after_the_burst_and_the_next_line_counts_what_was_left_out() {
        let limit = LogLimit::default();
        let t0 = Instant::now();
        let admitted = (0..200).filter(|_| limit.admit_at(t0).is_some()).count();
        assert_eq!(admitted, BURST as usize);
        // A second later PER_SECOND lines go through; the first names the 150 left out.
        assert_eq!(limit.admit_at(t0 + Duration::from_secs(1)), Some(150));
        assert_eq!(limit.admit_at(t0 + Duration::from_secs(1)), Some(0));
    }
}
