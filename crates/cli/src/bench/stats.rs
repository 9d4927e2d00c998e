//! What producers and consumers share while a bench runs: the phase, counters, and latency
//! histograms (one per task, merged at the end, so recording takes no lock).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Before measuring: traffic flows but is not counted.
pub const WARMUP: u8 = 0;
/// Counted and timed.
pub const MEASURE: u8 = 1;
/// Producers stop; consumers drain.
pub const STOP: u8 = 2;

/// Highest latency a histogram records, in µs (60 s); longer ones are clamped to it.
const MAX_LATENCY_MICROS: u64 = 60_000_000;

/// A latency histogram in µs with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low, sigfig
    // <= 5), so this cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_MICROS, 3)
        .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
}

/// Records `d` in µs, clamped to the histogram's range.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(micros.clamp(1, MAX_LATENCY_MICROS));
}

/// Records `n` samples of `d` in µs (a batch acknowledged at once).
pub fn record_n(h: &mut Histogram<u64>, d: Duration, n: u64) {
    let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record_n(micros.clamp(1, MAX_LATENCY_MICROS), n);
}

/// Counters and phase shared by every task of one run.
#[derive(Debug)]
pub struct Shared {
    /// Identifies this run's messages.
    pub run_id: u64,
    /// When the run started.
    pub started: Instant,
    phase: AtomicU8,
    /// Sends acknowledged by the broker during the measurement.
    pub sent_measured: AtomicU64,
    /// This run's messages received during the measurement.
    pub received_measured: AtomicU64,
    /// Sends acknowledged in any phase.
    pub sent_total: AtomicU64,
    /// This run's messages received in any phase.
    pub received_total: AtomicU64,
    /// Sends the broker refused or that failed.
    pub send_errors: AtomicU64,
    /// Acks that failed.
    pub ack_errors: AtomicU64,
    /// Deliveries from earlier runs (consumed and acked, not counted).
    pub foreign: AtomicU64,
    /// µs after `started` of the last send acknowledgement (message-count mode).
    pub last_sent_at: AtomicU64,
    /// µs after `started` of the last receipt (message-count mode).
    pub last_received_at: AtomicU64,
    /// Messages left to send in message-count mode (`u64::MAX` in duration mode).
    pub to_send: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Shared {
    /// A fresh run in `phase`, with `to_send` messages to send (`None`: until stopped).
    pub fn new(run_id: u64, phase: u8, to_send: Option<u64>) -> Self {
        Shared {
            run_id,
            started: Instant::now(),
            phase: AtomicU8::new(phase),
            sent_measured: AtomicU64::new(0),
            received_measured: AtomicU64::new(0),
            sent_total: AtomicU64::new(0),
            received_total: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            ack_errors: AtomicU64::new(0),
            foreign: AtomicU64::new(0),
            last_sent_at: AtomicU64::new(0),
            last_received_at: AtomicU64::new(0),
            to_send: AtomicU64::new(to_send.unwrap_or(u64::MAX)),
            first_error: std::sync::Mutex::new(None),
        }
    }

    /// The current phase.
    pub fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    /// Moves to `phase`.
    pub fn set_phase(&self, phase: u8) {
        self.phase.store(phase, Ordering::Release);
    }

    /// Whether the run is over.
    pub fn stopping(&self) -> bool {
        self.phase() == STOP
    }

    /// Claims up to `n` messages to send; 0 when there are none left or the run is stopping.
    pub fn claim(&self, n: u64) -> u64 {
        if self.phase() == STOP {
            return 0;
        }
        let mut claimed = 0;
        // fetch_update retries on contention; the closure only computes.
        let _ = self
            .to_send
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                claimed = left.min(n);
                (claimed > 0).then(|| left - claimed)
            });
        claimed
    }

    /// µs since the run started.
    pub fn elapsed_micros(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Remembers the first error seen, for the report.
    pub fn note_error(&self, what: String) {
        // A poisoned lock only means another task panicked while noting; keep its value.
        let mut first = self
            .first_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        first.get_or_insert(what);
    }

    /// The first error seen, if any.
    pub fn first_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// A latency distribution summary, in µs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
}

impl LatencySummary {
    /// Summarises a histogram of µs.
    pub fn of(h: &Histogram<u64>) -> Self {
        LatencySummary {
            count: h.len(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_uniform_samples() {
        let mut h = new_histogram();
        for us in 1..=1000 {
            record(&mut h, Duration::from_micros(us));
        }
        let s = LatencySummary::of(&h);
        assert_eq!(s.count, 1000);
        assert_eq!(s.p50, 500);
        assert_eq!(s.p90, 900);
        assert_eq!(s.p99, 990);
        assert_eq!(s.p999, 999);
        assert_eq!(s.max, 1000);
    }

    #[test]
    fn extremes_are_clamped() {
        let mut h = new_histogram();
        record(&mut h, Duration::ZERO);
        record(&mut h, Duration::from_secs(3600));
        assert_eq!(h.len(), 2);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= MAX_LATENCY_MICROS);
    }

    #[test]
    fn claims_stop_at_zero_and_on_stop() {
        let s = Shared::new(1, MEASURE, Some(5));
        assert_eq!(s.claim(3), 3);
        assert_eq!(s.claim(3), 2);
        assert_eq!(s.claim(3), 0);
        let s = Shared::new(1, MEASURE, None);
        assert_eq!(s.claim(10), 10);
        s.set_phase(STOP);
        assert_eq!(s.claim(10), 0);
    }
}
