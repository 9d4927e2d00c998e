//! Mean, standard deviation and t-distribution confidence intervals of a sample, such as the
//! per-window rates of a run's measured phase.

use serde::Serialize;

use super::student_t;

/// A sample's summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SampleSummary {
    /// Sample size.
    pub n: usize,
    /// Arithmetic mean (0 for an empty sample).
    pub mean: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 below two values).
    pub sd: f64,
    /// 95% confidence interval of the mean, `[low, high]`; `None` below two values.
    pub ci95: Option<[f64; 2]>,
    /// 99.9% confidence interval of the mean; `None` below two values.
    pub ci999: Option<[f64; 2]>,
}

impl SampleSummary {
    /// Summarises `values`.
    pub fn of(values: &[f64]) -> Self {
        let n = values.len();
        if n == 0 {
            return SampleSummary {
                n,
                mean: 0.0,
                sd: 0.0,
                ci95: None,
                ci999: None,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return SampleSummary {
                n,
                mean,
                sd: 0.0,
                ci95: None,
                ci999: None,
            };
        }
        // Two passes: the textbook one-pass formula loses precision on large, close values
        // such as message rates.
        let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
        let sd = variance.sqrt();
        let se = sd / (n as f64).sqrt();
        let df = (n - 1) as u64;
        let interval = |confidence: f64| {
            let half = student_t::two_sided(confidence, df) * se;
            [mean - half, mean + half]
        };
        SampleSummary {
            n,
            mean,
            sd,
            ci95: Some(interval(0.95)),
            ci999: Some(interval(0.999)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) {
        assert!((a - b).abs() <= tolerance, "{a} vs {b}");
    }

    #[test]
    fn fixed_sample() {
        // Mean 5, sum of squared deviations 32, variance 32/7, sd 2.13809.
        let s = SampleSummary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        close(s.mean, 5.0, 1e-12);
        close(s.sd, (32.0f64 / 7.0).sqrt(), 1e-12);
        // Standard error 0.755929; t(0.975, 7) = 2.364624; t(0.9995, 7) = 5.407883.
        let [lo, hi] = s.ci95.unwrap();
        close(lo, 5.0 - 2.364624 * 0.755929, 1e-4);
        close(hi, 5.0 + 2.364624 * 0.755929, 1e-4);
        let [lo, hi] = s.ci999.unwrap();
        close(lo, 5.0 - 5.407883 * 0.755929, 1e-4);
        close(hi, 5.0 + 5.407883 * 0.755929, 1e-4);
    }

    #[test]
    fn small_samples() {
        let empty = SampleSummary::of(&[]);
        assert_eq!((empty.n, empty.mean, empty.ci95), (0, 0.0, None));
        let one = SampleSummary::of(&[3.5]);
        assert_eq!((one.n, one.mean, one.sd, one.ci999), (1, 3.5, 0.0, None));
        // Constant values: no spread, a zero-width interval.
        let flat = SampleSummary::of(&[7.0; 5]);
        assert_eq!(flat.ci95, Some([7.0, 7.0]));
    }

    #[test]
    fn large_close_values_keep_precision() {
        let s = SampleSummary::of(&[1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]);
        close(s.sd, 1.0, 1e-6);
    }
}
