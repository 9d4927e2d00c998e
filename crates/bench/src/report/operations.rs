//! Per-operation results of the `ftab` workload: for each kind of request a client makes
//! (send, read, queue query found / not found, ...), how many completed in the measurement,
//! their response-time distribution, and the per-window trace of throughput and mean response
//! time with its statistics, as the FTaB report gives them.

use serde::Serialize;

use crate::report::rate;
use crate::stats::{LatencySummary, SampleSummary, WindowRow};

/// Operation names in report order; others follow in name order.
pub const ORDER: &[&str] = &[
    "send",
    "read",
    "read_empty",
    "query_found",
    "query_not_found",
    "request_reply",
];

/// The operations of `ops` in report order.
pub fn ordered<V>(ops: &std::collections::BTreeMap<String, V>) -> Vec<(&String, &V)> {
    let mut out: Vec<(&String, &V)> = ops.iter().collect();
    out.sort_by_key(|(k, _)| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    out
}

/// One operation's results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OperationResult {
    /// Operations completed in the measurement.
    pub count: u64,
    /// `count` per second of measurement.
    pub per_s: f64,
    /// Operations that failed (any phase).
    pub errors: u64,
    /// Response time distribution, ms (measured phase).
    pub response_ms: LatencySummary,
    /// Statistics over the measured windows.
    pub window_stats: OperationWindowStats,
    /// Every window, warm-up and cool-down included and labelled.
    pub windows: Vec<OperationWindow>,
}

/// Statistics of one operation over the measured windows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OperationWindowStats {
    /// Operations per second.
    pub per_s: SampleSummary,
    /// Mean response time per window, ms (windows without operations left out).
    pub response_mean_ms: SampleSummary,
}

/// One window of one operation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OperationWindow {
    /// Position in the series, from 0.
    pub index: usize,
    /// Start, seconds relative to the start of the measurement.
    pub start_s: f64,
    /// End, seconds relative to the start of the measurement.
    pub end_s: f64,
    /// `warmup`, `measure` or `cooldown`.
    pub phase: &'static str,
    /// Operations completed in the window.
    pub count: u64,
    /// `count` per second.
    pub per_s: f64,
    /// Mean response time, ms; `None` without operations.
    pub response_mean_ms: Option<f64>,
    /// Longest response time, ms; `None` without operations.
    pub response_max_ms: Option<f64>,
}

impl OperationResult {
    /// The result of an operation traced in `rows` (its count in `sent`, its response times as
    /// the latency), with `count` operations measured over `secs`.
    pub fn new(
        count: u64,
        secs: f64,
        errors: u64,
        response_ms: LatencySummary,
        rows: &[WindowRow],
    ) -> Self {
        let windows: Vec<OperationWindow> = rows
            .iter()
            .map(|r| OperationWindow {
                index: r.index,
                start_s: r.start_s,
                end_s: r.end_s,
                phase: r.phase,
                count: r.sent,
                per_s: r.sent_per_s,
                response_mean_ms: r.latency_mean_ms,
                response_max_ms: r.latency_max_ms,
            })
            .collect();
        let measured = || windows.iter().filter(|w| w.phase == "measure");
        let per_s: Vec<f64> = measured().map(|w| w.per_s).collect();
        let means: Vec<f64> = measured().filter_map(|w| w.response_mean_ms).collect();
        OperationResult {
            count,
            per_s: rate(count, secs),
            errors,
            response_ms,
            window_stats: OperationWindowStats {
                per_s: SampleSummary::of(&per_s),
                response_mean_ms: SampleSummary::of(&means),
            },
            windows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(index: usize, phase: &'static str, sent: u64, mean: Option<f64>) -> WindowRow {
        WindowRow {
            index,
            start_s: index as f64 - 1.0,
            end_s: index as f64,
            phase,
            sent,
            received: 0,
            sent_per_s: sent as f64,
            received_per_s: 0.0,
            latency_mean_ms: mean,
            latency_max_ms: mean,
        }
    }

    #[test]
    fn measured_windows_only() {
        let rows = [
            row(0, "warmup", 100, Some(9.0)),
            row(1, "measure", 10, Some(2.0)),
            row(2, "measure", 20, Some(4.0)),
            row(3, "measure", 0, None),
            row(4, "cooldown", 50, Some(9.0)),
        ];
        let summary = LatencySummary::of(&crate::stats::new_histogram());
        let r = OperationResult::new(30, 3.0, 0, summary, &rows);
        assert_eq!(r.per_s, 10.0);
        assert_eq!(r.window_stats.per_s.n, 3);
        assert_eq!(r.window_stats.per_s.mean, 10.0);
        assert_eq!(r.window_stats.response_mean_ms.n, 2);
        assert_eq!(r.window_stats.response_mean_ms.mean, 3.0);
        assert_eq!(r.windows.len(), 5);
        assert_eq!(r.windows[2].count, 20);
    }
}
