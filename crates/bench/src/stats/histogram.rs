//! Latency histograms: HDR histograms in µs with 3 significant digits, one per task and merged
//! at the end so that recording takes no lock; summaries are reported in milliseconds.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency a histogram records, in µs (60 s); longer ones are clamped to it.
pub const MAX_LATENCY_MICROS: u64 = 60_000_000;

/// A latency histogram in µs with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low, sigfig
    // <= 5), so this cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_MICROS, 3)
        .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
}

/// `d` in µs, clamped to what a histogram records.
pub fn clamp_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros())
        .unwrap_or(u64::MAX)
        .clamp(1, MAX_LATENCY_MICROS)
}

/// Records `d` in µs, clamped to the histogram's range.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(clamp_micros(d));
}

/// Records `n` samples of `d` in µs (a batch acknowledged at once).
pub fn record_n(h: &mut Histogram<u64>, d: Duration, n: u64) {
    h.saturating_record_n(clamp_micros(d), n);
}

/// A latency distribution, in milliseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Largest sample.
    pub max: f64,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl LatencySummary {
    /// Summarises a histogram of µs (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        LatencySummary {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            p9999: ms(h.value_at_quantile(0.9999)),
            max: ms(h.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_uniform_samples() {
        let mut h = new_histogram();
        for us in 1..=10_000 {
            record(&mut h, Duration::from_micros(us));
        }
        let s = LatencySummary::of(&h);
        assert_eq!(s.count, 10_000);
        // 3 significant digits: values are exact up to 2048 µs, within 0.1% above.
        assert!((s.mean - 5.0005).abs() < 0.01, "{s:?}");
        assert!((s.p50 - 5.0).abs() < 0.01, "{s:?}");
        assert!((s.p90 - 9.0).abs() < 0.01, "{s:?}");
        assert!((s.p99 - 9.9).abs() < 0.01, "{s:?}");
        assert!((s.p999 - 9.99).abs() < 0.01, "{s:?}");
        assert!((s.p9999 - 9.999).abs() < 0.01, "{s:?}");
        assert!((s.max - 10.0).abs() < 0.01, "{s:?}");
    }

    #[test]
    fn exact_below_2048_micros() {
        let mut h = new_histogram();
        for us in 1..=1000 {
            record(&mut h, Duration::from_micros(us));
        }
        let s = LatencySummary::of(&h);
        assert_eq!(
            (s.p50, s.p90, s.p99, s.p999, s.max),
            (0.5, 0.9, 0.99, 0.999, 1.0)
        );
    }

    #[test]
    fn extremes_are_clamped() {
        let mut h = new_histogram();
        record(&mut h, Duration::ZERO);
        record_n(&mut h, Duration::from_secs(3600), 2);
        assert_eq!(h.len(), 3);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= MAX_LATENCY_MICROS);
    }

    #[test]
    fn empty_histogram_summarises_to_zero() {
        let s = LatencySummary::of(&new_histogram());
        assert_eq!(s.count, 0);
        assert_eq!(s.max, 0.0);
    }
}
