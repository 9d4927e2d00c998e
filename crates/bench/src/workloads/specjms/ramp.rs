//! The ramp at the start of a run: each interaction's start rate rises linearly from 0 to its
//! configured rate over `--ramp`, as the spec's drivers ramp to rate, before the warm-up at
//! full rate and the measurement. A broker then fills its caches, files and connections under
//! a growing load instead of a step, so that deliveries running behind at the end of the
//! warm-up (which the message-count rule would count inside the measurement) mean that the
//! broker cannot carry the rate, not that it was started cold. Neither the ramp nor the
//! warm-up counts in the audit.

use std::time::Duration;

/// When the `k`-th start (from 0) of an interaction started `rate` times a second is due,
/// from the start of a ramp lasting `ramp`. The rate at `t` is `rate * t / ramp` during the
/// ramp, so `k` starts have been due by `t = sqrt(2 k ramp / rate)`; from the end of the ramp
/// (`k = rate * ramp / 2`) on, one every `1 / rate`: `t = ramp / 2 + k / rate`.
pub fn due(k: u64, rate: f64, ramp: Duration) -> Duration {
    if rate <= 0.0 {
        return Duration::MAX;
    }
    let t = ramp.as_secs_f64();
    let k = k as f64;
    let secs = if k < rate * t / 2.0 {
        (2.0 * k * t / rate).sqrt()
    } else {
        t / 2.0 + k / rate
    };
    Duration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(k: u64, rate: f64, ramp: f64) -> f64 {
        due(k, rate, Duration::from_secs_f64(ramp)).as_secs_f64()
    }

    #[test]
    fn without_a_ramp_starts_are_evenly_spaced() {
        assert_eq!(secs(0, 10.0, 0.0), 0.0);
        assert!((secs(25, 10.0, 0.0) - 2.5).abs() < 1e-8);
    }

    #[test]
    fn the_rate_rises_linearly_then_holds() {
        // (Durations hold nanoseconds.) 100/s over a 10 s ramp: 500 starts in the ramp; the 100th at sqrt(2 x 100 x 10 /
        // 100) = 4.472 s, the 400th at sqrt(80) = 8.944 s, the 500th at 10 s, then one every
        // 10 ms: the 600th at 5 + 6 = 11 s.
        assert!((secs(100, 100.0, 10.0) - 20f64.sqrt()).abs() < 1e-8);
        assert!((secs(400, 100.0, 10.0) - 80f64.sqrt()).abs() < 1e-8);
        assert!((secs(499, 100.0, 10.0) - (2.0 * 499.0 * 10.0 / 100.0f64).sqrt()).abs() < 1e-8);
        assert!((secs(500, 100.0, 10.0) - 10.0).abs() < 1e-8);
        assert!((secs(600, 100.0, 10.0) - 11.0).abs() < 1e-8);
        // Half the rate at half the ramp: between 5.0 s and 5.1 s, about 0.1 s x 50/s; by
        // hand k = 5 t^2 runs from 125 to 130.05, so starts 125 to 130.
        let in_window = (0..1000)
            .filter(|&k| (5.0..5.1).contains(&secs(k, 100.0, 10.0)))
            .count();
        assert_eq!(in_window, 6);
        assert_eq!(due(3, 0.0, Duration::from_secs(1)), Duration::MAX);
    }
}
