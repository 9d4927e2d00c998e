//! `--json FILE`: the report, pretty-printed.

use std::path::Path;

use anyhow::{anyhow, Result};

use super::BenchReport;

/// The report as a JSON value.
pub fn to_value(report: &BenchReport) -> Result<serde_json::Value> {
    Ok(serde_json::to_value(report)?)
}

/// Writes the report to `path`.
pub fn write(report: &BenchReport, path: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(path, text + "\n").map_err(|e| anyhow!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape() {
        let j = to_value(&super::super::sample::report()).unwrap();
        assert_eq!(j["workload"], "throughput");
        assert_eq!(j["params"]["producers"], 2);
        let r = &j["results"][0];
        assert_eq!(r["target"], "ferry");
        assert_eq!(r["sent_per_s"], 1000.0);
        assert_eq!(r["latency_ms"]["p999"], 4.0);
        assert_eq!(r["latencies_ms"]["send_to_ack"]["count"], 2000);
        assert_eq!(r["windows"][0]["phase"], "measure");
        assert_eq!(r["windows"][0]["latency_max_ms"], serde_json::Value::Null);
        assert_eq!(
            r["window_stats"]["sent_per_s"]["ci95"],
            serde_json::Value::Null
        );
    }
}
