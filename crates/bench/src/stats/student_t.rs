//! Quantiles of Student's t-distribution, for confidence intervals of a mean.
//!
//! The harness only needs integer degrees of freedom (sample size minus one), where the
//! probability `P(|T| < t)` has a closed form as a finite trigonometric series (Abramowitz and
//! Stegun, 26.7.3 and 26.7.4); the quantile inverts it by bisection, which is exact to the
//! precision of `f64` and needs no special functions.

use std::f64::consts::PI;

/// Above this many degrees of freedom the distribution is taken as this one: the quantiles
/// differ from it in the sixth digit at most, and the series would grow long.
const MAX_DF: u64 = 100_000;

/// `P(|T| < t)` for `t >= 0` and `df >= 1` degrees of freedom.
pub fn central_probability(t: f64, df: u64) -> f64 {
    let df = df.clamp(1, MAX_DF);
    let theta = (t / (df as f64).sqrt()).atan();
    let (sin, cos) = theta.sin_cos();
    let cos2 = cos * cos;
    if df % 2 == 1 {
        // 2/pi * (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), df - 3 in the last power.
        if df == 1 {
            return 2.0 * theta / PI;
        }
        let (mut term, mut sum) = (1.0, 1.0);
        for k in 1..=(df - 3) / 2 {
            let k = k as f64;
            term *= cos2 * (2.0 * k) / (2.0 * k + 1.0);
            sum += term;
        }
        2.0 / PI * (theta + sin * cos * sum)
    } else {
        // sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), df - 2 in the last power.
        let (mut term, mut sum) = (1.0, 1.0);
        for k in 1..=(df - 2) / 2 {
            let k = k as f64;
            term *= cos2 * (2.0 * k - 1.0) / (2.0 * k);
            sum += term;
        }
        sin * sum
    }
}

/// The `p` quantile of Student's t with `df` degrees of freedom (`0 < p < 1`, `df >= 1`):
/// the `t` with `P(T <= t) = p`. NaN for `p` outside (0, 1).
pub fn quantile(p: f64, df: u64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    if p < 0.5 {
        return -quantile(1.0 - p, df);
    }
    // P(T <= t) = 1/2 + P(|T| < t)/2 for t >= 0.
    let target = 2.0 * p - 1.0;
    let mut hi = 1.0;
    while central_probability(hi, df) < target {
        hi *= 2.0;
        if hi > 1e300 {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if central_probability(mid, df) < target {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-13 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
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
    fn probability_closed_forms() {
        // df = 1 is Cauchy: P(|T| < 1) = 1/2; df = 2: P(|T| < t) = t / sqrt(2 + t^2).
        close(central_probability(1.0, 1), 0.5, 1e-12);
        close(central_probability(2.0, 2), 2.0 / 6f64.sqrt(), 1e-12);
        close(central_probability(0.0, 9), 0.0, 1e-12);
    }
}
