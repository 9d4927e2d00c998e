//! Per-window series: counts and latencies per fixed interval (`--window`), recorded lock-free
//! by every task, then labelled by phase. Windows are aligned so that one boundary falls on the
//! start of the measurement; only windows wholly inside the measured phase are labelled
//! `measure` and enter the statistics, so warm-up, cool-down and the drain at the end are
//! excluded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::sample::SampleSummary;

/// Most windows kept; events after the last one are not traced (the totals still count them).
const MAX_WINDOWS: usize = 1_000_000;

#[derive(Debug, Default)]
struct Slot {
    sent: AtomicU64,
    received: AtomicU64,
    latency_sum_us: AtomicU64,
    latency_count: AtomicU64,
    latency_max_us: AtomicU64,
}

/// Counters per window of one run.
#[derive(Debug)]
pub struct WindowSeries {
    origin: Instant,
    window: Duration,
    slots: Box<[Slot]>,
}

/// One window of the series, as reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WindowRow {
    /// Position in the series, from 0.
    pub index: usize,
    /// Start, in seconds relative to the start of the measurement (negative in the warm-up).
    pub start_s: f64,
    /// End, in seconds relative to the start of the measurement.
    pub end_s: f64,
    /// `warmup`, `measure` or `cooldown` (which also holds the drain after the load stops).
    pub phase: &'static str,
    /// Sends acknowledged in the window.
    pub sent: u64,
    /// Messages received in the window.
    pub received: u64,
    /// `sent` per second.
    pub sent_per_s: f64,
    /// `received` per second.
    pub received_per_s: f64,
    /// Mean of the latencies recorded in the window, ms; `None` without samples.
    pub latency_mean_ms: Option<f64>,
    /// Largest latency recorded in the window, ms; `None` without samples.
    pub latency_max_ms: Option<f64>,
}

/// Statistics of the measured windows' rates.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WindowStats {
    /// Sends acknowledged per second.
    pub sent_per_s: SampleSummary,
    /// Messages received per second.
    pub received_per_s: SampleSummary,
}

impl WindowSeries {
    /// A series for a run starting now-ish at `run_start`, measuring from `run_start + warmup`
    /// for about `expected` in all (warm-up, measurement, cool-down, drain).
    pub fn new(run_start: Instant, warmup: Duration, window: Duration, expected: Duration) -> Self {
        let window = window.max(Duration::from_millis(1));
        let before = warmup.as_nanos().div_ceil(window.as_nanos());
        let lead = window.saturating_mul(u32::try_from(before).unwrap_or(u32::MAX));
        let measure_start = run_start + warmup;
        let origin = measure_start.checked_sub(lead).unwrap_or(run_start);
        let span = expected + lead + window * 2;
        let count = usize::try_from(span.as_nanos() / window.as_nanos())
            .unwrap_or(MAX_WINDOWS)
            .clamp(1, MAX_WINDOWS);
        let slots = (0..count).map(|_| Slot::default()).collect();
        WindowSeries {
            origin,
            window,
            slots,
        }
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        self.window
    }

    fn slot(&self, at: Instant) -> Option<&Slot> {
        let offset = at.saturating_duration_since(self.origin).as_nanos();
        let i = usize::try_from(offset / self.window.as_nanos()).ok()?;
        self.slots.get(i)
    }

    /// Counts `n` sends acknowledged at `at`.
    pub fn sent(&self, at: Instant, n: u64) {
        if let Some(s) = self.slot(at) {
            s.sent.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts one message received at `at`.
    pub fn received(&self, at: Instant) {
        self.received_n(at, 1);
    }

    /// Counts `n` messages received at `at`.
    pub fn received_n(&self, at: Instant, n: u64) {
        if let Some(s) = self.slot(at) {
            s.received.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Records `n` latency samples of `micros` observed at `at`.
    pub fn latency(&self, at: Instant, micros: u64, n: u64) {
        self.latencies(at, micros.saturating_mul(n), n, micros);
    }

    /// Records `n` latency samples observed at `at`, summing to `sum_us`, the largest `max_us`.
    pub fn latencies(&self, at: Instant, sum_us: u64, n: u64, max_us: u64) {
        if let Some(s) = self.slot(at) {
            s.latency_sum_us.fetch_add(sum_us, Ordering::Relaxed);
            s.latency_count.fetch_add(n, Ordering::Relaxed);
            s.latency_max_us.fetch_max(max_us, Ordering::Relaxed);
        }
    }

    /// The rows up to the last window with activity (and at least to `measure_end`), labelled
    /// by phase against the measured interval `[measure_start, measure_end)`.
    pub fn rows(&self, measure_start: Instant, measure_end: Instant) -> Vec<WindowRow> {
        let w = self.window.as_secs_f64();
        let origin_to_measure = signed_secs(self.origin, measure_start);
        let measure_len = measure_end
            .saturating_duration_since(measure_start)
            .as_secs_f64();
        let last_active = self
            .slots
            .iter()
            .rposition(|s| s.sent.load(Ordering::Relaxed) + s.received.load(Ordering::Relaxed) > 0);
        let until_measure_end = ((origin_to_measure + measure_len) / w).ceil() as usize;
        let count = last_active
            .map_or(0, |i| i + 1)
            .max(until_measure_end)
            .min(self.slots.len());
        self.slots
            .iter()
            .take(count)
            .enumerate()
            .map(|(i, s)| {
                let start_s = i as f64 * w - origin_to_measure;
                let end_s = start_s + w;
                // A little slack for float rounding at the boundaries.
                let eps = 1e-9;
                let phase = if start_s < -eps {
                    "warmup"
                } else if end_s <= measure_len + eps {
                    "measure"
                } else {
                    "cooldown"
                };
                let sent = s.sent.load(Ordering::Relaxed);
                let received = s.received.load(Ordering::Relaxed);
                let n = s.latency_count.load(Ordering::Relaxed);
                let sum = s.latency_sum_us.load(Ordering::Relaxed);
                let max = s.latency_max_us.load(Ordering::Relaxed);
                WindowRow {
                    index: i,
                    start_s,
                    end_s,
                    phase,
                    sent,
                    received,
                    sent_per_s: sent as f64 / w,
                    received_per_s: received as f64 / w,
                    latency_mean_ms: (n > 0).then(|| sum as f64 / n as f64 / 1000.0),
                    latency_max_ms: (n > 0).then(|| max as f64 / 1000.0),
                }
            })
            .collect()
    }
}

/// Statistics over the `measure` rows.
pub fn measured_stats(rows: &[WindowRow]) -> WindowStats {
    let measured: Vec<&WindowRow> = rows.iter().filter(|r| r.phase == "measure").collect();
    let sent: Vec<f64> = measured.iter().map(|r| r.sent_per_s).collect();
    let received: Vec<f64> = measured.iter().map(|r| r.received_per_s).collect();
    WindowStats {
        sent_per_s: SampleSummary::of(&sent),
        received_per_s: SampleSummary::of(&received),
    }
}

/// `to - from` in seconds, negative when `to` is earlier.
fn signed_secs(from: Instant, to: Instant) -> f64 {
    if to >= from {
        (to - from).as_secs_f64()
    } else {
        -(from - to).as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_and_rates() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        // 250 ms warm-up, 100 ms windows: warm-up windows start 300 ms before the measurement.
        let series = WindowSeries::new(start, ms(250), ms(100), ms(1000));
        let measure_start = start + ms(250);
        let measure_end = measure_start + ms(500);
        series.sent(start + ms(10), 7); // before the first aligned boundary: warm-up
        series.sent(measure_start + ms(1), 5);
        series.received(measure_start + ms(1));
        series.latency(measure_start + ms(1), 2000, 2);
        series.latency(measure_start + ms(2), 4000, 1);
        series.sent(measure_end + ms(1), 3); // cool-down
        let rows = series.rows(measure_start, measure_end);
        let phases: Vec<&str> = rows.iter().map(|r| r.phase).collect();
        assert_eq!(
            phases,
            [
                "warmup", "warmup", "warmup", "measure", "measure", "measure", "measure",
                "measure", "cooldown"
            ]
        );
        assert_eq!(rows[0].sent, 7);
        assert!((rows[0].start_s + 0.3).abs() < 1e-9);
        let first = &rows[3];
        assert_eq!((first.sent, first.received), (5, 1));
        assert!((first.sent_per_s - 50.0).abs() < 1e-9);
        assert!((first.latency_mean_ms.unwrap() - 8.0 / 3.0).abs() < 1e-9);
        assert_eq!(first.latency_max_ms, Some(4.0));
        assert_eq!(rows[4].latency_mean_ms, None);
        assert_eq!(rows[8].sent, 3);
        let stats = measured_stats(&rows);
        assert_eq!(stats.sent_per_s.n, 5);
        assert!((stats.sent_per_s.mean - 10.0).abs() < 1e-9);
        assert!(stats.sent_per_s.ci95.is_some());
    }

    #[test]
    fn no_warmup_starts_at_zero() {
        let start = Instant::now();
        let series = WindowSeries::new(
            start,
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        series.sent(start, 1);
        let rows = series.rows(start, start + Duration::from_secs(2));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].phase, "measure");
        assert_eq!(rows[0].start_s, 0.0);
    }
}
