//! Quantiles of Student's t-distribution, for confidence intervals of a mean, from `statrs`.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The `p` quantile of Student's t with `df` degrees of freedom (`0 < p < 1`, `df >= 1`):
/// the `t` with `P(T <= t) = p`. NaN for `p` outside (0, 1) or no degrees of freedom.
pub fn quantile(p: f64, df: u64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// The multiplier of the standard error for a two-sided `confidence` interval (e.g. 0.95).
pub fn two_sided(confidence: f64, df: u64) -> f64 {
    quantile(0.5 + confidence / 2.0, df)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) {
        assert!((a - b).abs() <= tolerance, "{a} vs {b}");
    }

    /// Two-sided 95% critical values from printed t tables.
    #[test]
    fn matches_tables_at_95_percent() {
        for (df, t) in [
            (1, 12.706),
            (2, 4.303),
            (3, 3.182),
            (4, 2.776),
            (5, 2.571),
            (9, 2.262),
            (10, 2.228),
            (20, 2.086),
            (29, 2.045),
            (30, 2.042),
            (120, 1.980),
        ] {
            close(two_sided(0.95, df), t, 0.0005);
        }
        // Towards the normal distribution.
        close(two_sided(0.95, 100_000), 1.95996, 0.0001);
    }

    /// Two-sided 99.9% critical values (the FTaB report's confidence level).
    #[test]
    fn matches_tables_at_99_9_percent() {
        for (df, t) in [
            (1, 636.619),
            (2, 31.599),
            (3, 12.924),
            (5, 6.869),
            (10, 4.587),
            (20, 3.850),
            (30, 3.646),
        ] {
            close(two_sided(0.999, df), t, 0.0005 * t.max(1.0));
        }
    }

    #[test]
    fn one_sided_and_symmetric() {
        close(quantile(0.5, 7), 0.0, 1e-12);
        close(quantile(0.95, 10), 1.812, 0.0005);
        close(quantile(0.05, 10), -1.812, 0.0005);
        close(quantile(0.99, 4), 3.747, 0.0005);
        assert!(quantile(0.0, 3).is_nan());
        assert!(quantile(1.0, 3).is_nan());
    }

    #[test]
    fn closed_forms() {
        // df = 1 is Cauchy: P(T <= 1) = 3/4; df = 2: t = (2p - 1) / sqrt(2 p (1 - p)).
        close(quantile(0.75, 1), 1.0, 1e-9);
        let p: f64 = 0.9;
        close(
            quantile(p, 2),
            (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt(),
            1e-9,
        );
        assert!(quantile(0.95, 0).is_nan());
    }
}
