//! Coordinated-omission correction.
//!
//! A load generator that waits for one request before issuing the next stops sending while
//! the target stalls, so the stall shows up as a single slow sample instead of the many
//! requests that a real open-loop client would have had waiting. Two remedies:
//!
//! - open loop ([`Schedule`]): each request has an intended send time on a fixed-rate
//!   schedule, and its latency is measured from that time, however late it was actually
//!   issued. The `latency` workload does this.
//! - back-filling ([`record_corrected`]): when only the service time and the expected interval
//!   between requests are known, a sample longer than the interval also records the samples
//!   the missed requests would have seen (the same idea as hdrhistogram's `record_correct`).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::histogram::MAX_LATENCY_MICROS;

/// A fixed-rate schedule of intended send times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// When request 0 is due.
    pub start: Instant,
    /// Time between requests.
    pub interval: Duration,
}

impl Schedule {
    /// `rate` requests per second from `start` (rate must be positive).
    pub fn at_rate(start: Instant, rate: f64) -> Self {
        Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / rate.max(1e-9)),
        }
    }

    /// When request `i` is due.
    pub fn intended(&self, i: u64) -> Instant {
        // Multiplying in nanoseconds keeps rounding from accumulating over long runs.
        let nanos = self.interval.as_nanos().saturating_mul(u128::from(i));
        self.start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The latency of a request due at `intended` and completed at `done`: from the intended
    /// time, not from when it was issued.
    pub fn latency(intended: Instant, done: Instant) -> Duration {
        done.saturating_duration_since(intended)
    }
}

/// Records `value_us` and, when it exceeds `expected_interval_us`, the latencies the requests
/// that should have been issued meanwhile would have seen: `value - interval`,
/// `value - 2 * interval`, ... down to one interval.
pub fn record_corrected(h: &mut Histogram<u64>, value_us: u64, expected_interval_us: u64) {
    let value = value_us.clamp(1, MAX_LATENCY_MICROS);
    h.saturating_record(value);
    if expected_interval_us == 0 {
        return;
    }
    let mut missing = value.saturating_sub(expected_interval_us);
    while missing >= expected_interval_us {
        h.saturating_record(missing);
        missing -= expected_interval_us;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::histogram::new_histogram;

    /// A server that answers in 100 µs except for one 2 s stall, driven at 1000 requests per
    /// second for 10 s, as a closed-loop client (waiting, so the schedule slips during the
    /// stall) and as an open-loop one (latency against the schedule).
    struct Simulation {
        naive: Histogram<u64>,
        open_loop: Histogram<u64>,
        backfilled: Histogram<u64>,
    }

    fn simulate() -> Simulation {
        let start = Instant::now();
        let schedule = Schedule::at_rate(start, 1000.0);
        let service = |i: u64| {
            if i == 5000 {
                Duration::from_secs(2)
            } else {
                Duration::from_micros(100)
            }
        };
        let (mut naive, mut open_loop, mut backfilled) =
            (new_histogram(), new_histogram(), new_histogram());
        // The open-loop server handles requests in order: each starts when it is due or when
        // the previous one finished, whichever is later.
        let mut free_at = start;
        for i in 0..10_000 {
            let due = schedule.intended(i);
            let begin = due.max(free_at);
            let done = begin + service(i);
            free_at = done;
            let us = |d: Duration| d.as_micros() as u64;
            open_loop.saturating_record(us(Schedule::latency(due, done)).max(1));
            // What a client that waits for each reply sees: only the service time.
            naive.saturating_record(us(service(i)));
            record_corrected(&mut backfilled, us(service(i)), 1000);
        }
        Simulation {
            naive,
            open_loop,
            backfilled,
        }
    }

    #[test]
    fn a_stall_shows_up_in_the_high_percentiles_only_when_corrected() {
        let s = simulate();
        // Uncorrected, the stall is one sample in 10,000: invisible below the maximum.
        assert_eq!(s.naive.value_at_quantile(0.999), 100);
        assert!(s.naive.max() >= 1_999_000);
        // Corrected: about 2000 requests were due during the stall and waited up to 2 s (open
        // loop: about 2200, with the catching up), so p90 and p99 show it.
        for h in [&s.open_loop, &s.backfilled] {
            assert!(
                h.value_at_quantile(0.50) < 1000,
                "{}",
                h.value_at_quantile(0.5)
            );
            assert!(
                h.value_at_quantile(0.90) > 500_000,
                "{}",
                h.value_at_quantile(0.9)
            );
            assert!(
                h.value_at_quantile(0.99) > 1_800_000,
                "{}",
                h.value_at_quantile(0.99)
            );
            assert!(h.max() >= 1_999_000);
        }
        // Back-filling adds the ~1999 requests that were never sent.
        assert_eq!(s.backfilled.len(), 10_000 + 1999);
        assert_eq!(s.open_loop.len(), 10_000);
    }

    #[test]
    fn short_samples_are_recorded_once() {
        let mut h = new_histogram();
        record_corrected(&mut h, 500, 1000);
        record_corrected(&mut h, 1000, 1000);
        record_corrected(&mut h, 700, 0);
        assert_eq!(h.len(), 3);
        record_corrected(&mut h, 3500, 1000);
        // 3500, 2500, 1500.
        assert_eq!(h.len(), 6);
    }

    #[test]
    fn schedule_does_not_drift() {
        let start = Instant::now();
        let s = Schedule::at_rate(start, 3.0);
        assert_eq!(s.intended(0), start);
        let late = s.intended(3_000_000) - start;
        // 1/3 s is 333,333,333 ns: a million seconds within a second.
        assert!(late.as_secs_f64() > 999_999.0 && late.as_secs_f64() < 1_000_001.0);
    }
}
