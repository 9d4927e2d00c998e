//! A histogram's percentile curve: latency at percentiles spaced evenly on the "nines" scale
//! (50, 90, 99, 99.9, ... and points between), the usual way to plot a latency distribution so
//! that the tail is as visible as the median.

use hdrhistogram::Histogram;

/// Percentiles the curve is sampled at.
const PERCENTILES: &[f64] = &[
    0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.75, 99.9, 99.95, 99.975, 99.99,
    99.995, 99.999, 100.0,
];

/// `[percentile, ms]` points of `h` (µs); empty for an empty histogram.
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    PERCENTILES
        .iter()
        .map(|&p| {
            let micros = if p >= 100.0 {
                h.max()
            } else {
                h.value_at_percentile(p)
            };
            [p, micros as f64 / 1000.0]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn uniform_values() {
        let mut h = new_histogram();
        for us in 1..=1000 {
            h.record(us).unwrap();
        }
        let c = percentile_curve(&h);
        assert_eq!(c.len(), PERCENTILES.len());
        assert_eq!(c[3], [50.0, 0.5]);
        assert_eq!(c.last().copied(), Some([100.0, 1.0]));
        assert!(c.windows(2).all(|w| w[0][1] <= w[1][1]));
        assert!(percentile_curve(&new_histogram()).is_empty());
    }
}
