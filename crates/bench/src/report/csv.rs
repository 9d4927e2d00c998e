//! `--csv FILE`: the per-window series, one row per target and window.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, Result};

use super::BenchReport;

/// The CSV header.
pub const HEADER: &str = "target,index,phase,start_s,end_s,sent,received,sent_per_s,\
received_per_s,latency_mean_ms,latency_max_ms";

/// The series as CSV text (empty cells for windows without latency samples).
pub fn render(report: &BenchReport) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    for result in &report.results {
        for w in &result.windows {
            let _ = writeln!(
                out,
                "{},{},{},{:.3},{:.3},{},{},{:.1},{:.1},{},{}",
                result.target,
                w.index,
                w.phase,
                w.start_s,
                w.end_s,
                w.sent,
                w.received,
                w.sent_per_s,
                w.received_per_s,
                opt(w.latency_mean_ms),
                opt(w.latency_max_ms),
            );
        }
    }
    out
}

/// Writes the series to `path`.
pub fn write(report: &BenchReport, path: &Path) -> Result<()> {
    std::fs::write(path, render(report))
        .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows() {
        let text = render(&super::super::sample::report());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], HEADER);
        assert_eq!(
            lines[1],
            "ferry,0,measure,0.000,1.000,1000,995,1000.0,995.0,1.500,"
        );
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
    }
}
