//! The results of a run and their outputs.
//!
//! [`BenchReport`] is what every workload produces and what `--json` writes (schema:
//! `crates/bench/schema/result.schema.json`, documented in docs/benchmarks.md): the workload's
//! name, its parameters, and one [`TargetResult`] per target measured. The outputs are
//! separate modules that read the same struct: [`text`] (the terminal), [`json`], [`csv`] (the
//! per-window series), [`html`] (a self-contained page of SVG plots drawn by [`svg`]).
//! [`environment`] records what a run was measured with (version, commit, host, fsync,
//! command line). [`operations`] holds the per-operation results of the `ftab` workload, [`compare`] the
//! summary of `ferry-bench compare`.

pub mod compare;
pub mod csv;
pub mod environment;
pub mod html;
pub mod json;
pub mod operations;
pub mod stream;
pub mod svg;
pub mod text;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::drivers::Capabilities;
use crate::stats::windows::WindowStats;
use crate::stats::{LatencySummary, WindowRow};

/// Everything one invocation measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BenchReport {
    /// `throughput`, `latency`, ...
    pub workload: String,
    /// What the run was measured with; filled in when the run is published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<environment::Environment>,
    /// The workload's parameters, as run (workload-specific keys).
    pub params: serde_json::Value,
    /// One entry per target.
    pub results: Vec<TargetResult>,
    /// For `ferry-bench compare`: the figures per target (median over rounds) and their ratio
    /// to Ferry; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<compare::CompareSummary>,
}

/// What one target did under the workload.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TargetResult {
    /// `ferry`, ...
    pub target: String,
    /// When the target's acknowledgement means durable, as the driver states it.
    pub durability: String,
    /// What the target supports.
    pub capabilities: Capabilities,
    /// Seconds over which sends were counted.
    pub send_secs: f64,
    /// Seconds over which receipts were counted.
    pub receive_secs: f64,
    /// Sends acknowledged in the measured phase.
    pub sent: u64,
    /// Messages received in the measured phase.
    pub received: u64,
    /// `sent / send_secs`.
    pub sent_per_s: f64,
    /// `received / receive_secs`.
    pub received_per_s: f64,
    /// Body bytes sent per second, in MiB.
    pub sent_mib_per_s: f64,
    /// The headline latency distribution, ms: the one named by `latency_kind`.
    pub latency_ms: LatencySummary,
    /// Which distribution `latency_ms` is (a key of `latencies_ms`).
    pub latency_kind: String,
    /// Every latency distribution measured, ms, by name (`send_to_ack`, `end_to_end`, ...).
    pub latencies_ms: BTreeMap<String, LatencySummary>,
    /// Trace window length, seconds.
    pub window_s: f64,
    /// Mean, standard deviation and confidence intervals of the measured windows' rates.
    pub window_stats: WindowStats,
    /// The per-window series, warm-up and cool-down windows included and labelled.
    pub windows: Vec<WindowRow>,
    /// What went wrong.
    pub errors: ErrorCounts,
    /// Per-operation results (`send`, `read`, `query_found`, ...; the `ftab` workload);
    /// empty, and left out of the JSON, for the other workloads.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub operations: BTreeMap<String, operations::OperationResult>,
    /// Percentile curves of the latency distributions, by the names of `latencies_ms`:
    /// `[percentile, ms]` points from the histogram, for plotting.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub percentile_curves_ms: BTreeMap<String, Vec<[f64; 2]>>,
    /// The broker's CPU time during the measurement, when the workload could see the broker's
    /// process (`fanout`, `selector`); left out otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_cpu: Option<BrokerCpu>,
    /// The `stream` workload's figures (records per second and minute, loss); left out
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<stream::StreamFigures>,
}

/// The CPU time a broker process used during the measurement (user + system, all threads,
/// from `/proc/<pid>/stat`), and per message.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BrokerCpu {
    /// The broker's process id.
    pub pid: u32,
    /// CPU seconds used while measuring.
    pub cpu_s: f64,
    /// `cpu_s` over the measured seconds: 1.0 is one core busy.
    pub cores: f64,
    /// CPU µs per message sent (published).
    pub us_per_sent: f64,
    /// CPU µs per message received (delivered).
    pub us_per_received: f64,
    /// The bench process's own CPU time over the same span, in cores: near the machine's core
    /// count, the load generator (not the broker) limits the rates.
    pub bench_cores: f64,
}

/// Failures during a run.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ErrorCounts {
    /// Sends refused or failed.
    pub send: u64,
    /// Acknowledgements failed.
    pub ack: u64,
    /// Receives failed (each ends its consumer), and consumer tasks that failed.
    #[serde(default)]
    pub receive: u64,
    /// Messages of earlier runs consumed and not counted.
    pub foreign: u64,
    /// The first error seen.
    pub first: Option<String>,
}

impl ErrorCounts {
    /// Whether any operation failed.
    pub fn any(&self) -> bool {
        self.send + self.ack + self.receive > 0
    }
}

/// Fails (so that the command exits non-zero) when any operation of any target failed, with
/// the counts: a run whose operations failed did not measure what it says. No workload expects
/// failures today; one that did would not call this.
pub fn check_failures(report: &BenchReport) -> Result<()> {
    let failed: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.errors.any())
        .map(|r| {
            let e = &r.errors;
            format!(
                "{} sends, {} acks and {} receives failed on {} (first error: {})",
                e.send,
                e.ack,
                e.receive,
                r.target,
                e.first.as_deref().unwrap_or("unknown")
            )
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("{}", failed.join("; "))
    }
}

/// `n / secs`, 0 when no time passed.
pub fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// Writes the files the common flags ask for.
pub fn write_files(report: &BenchReport, json: Option<&Path>, csv: Option<&Path>) -> Result<()> {
    if let Some(path) = json {
        json::write(report, path)?;
    }
    if let Some(path) = csv {
        csv::write(report, path)?;
    }
    Ok(())
}

/// Writes the JSON, CSV and HTML files asked for.
/// Writes `text` to standard output.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
}

/// The end of every workload run: prints the text report under `header`, writes the files asked
/// for, and fails (after reporting) when sends or acks failed.
pub fn publish(
    report: &BenchReport,
    header: &str,
    json: Option<&Path>,
    csv: Option<&Path>,
    html: Option<&Path>,
) -> Result<()> {
    emit(&text::render(report, header))?;
    write_all(report, json, csv, html)?;
    check_failures(report)
}

/// Writes the JSON, CSV and HTML files that were asked for.
pub fn write_all(
    report: &BenchReport,
    json: Option<&Path>,
    csv: Option<&Path>,
    html: Option<&Path>,
) -> Result<()> {
    write_files(report, json, csv)?;
    if let Some(path) = html {
        html::write(report, path)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod sample {
    //! A report with fixed figures, for the output tests.

    use super::*;
    use crate::stats::windows::measured_stats;
    use crate::stats::SampleSummary;

    pub fn summary(count: u64) -> LatencySummary {
        LatencySummary {
            count,
            mean: 1.5,
            p50: 1.0,
            p90: 2.0,
            p99: 3.0,
            p999: 4.0,
            p9999: 5.0,
            max: 5.5,
        }
    }

    pub fn report() -> BenchReport {
        let windows = vec![WindowRow {
            index: 0,
            start_s: 0.0,
            end_s: 1.0,
            phase: "measure",
            sent: 1000,
            received: 995,
            sent_per_s: 1000.0,
            received_per_s: 995.0,
            latency_mean_ms: Some(1.5),
            latency_max_ms: None,
        }];
        let window_stats = measured_stats(&windows);
        assert_eq!(window_stats.sent_per_s, SampleSummary::of(&[1000.0]));
        BenchReport {
            workload: "throughput".into(),
            environment: None,
            params: serde_json::json!({"producers": 2}),
            results: vec![TargetResult {
                target: "ferry".into(),
                durability: "fsync".into(),
                capabilities: Capabilities {
                    by_sender: true,
                    addressed: true,
                    priorities: true,
                    queue_query: true,
                },
                send_secs: 2.0,
                receive_secs: 2.0,
                sent: 2000,
                received: 1990,
                sent_per_s: 1000.0,
                received_per_s: 995.0,
                sent_mib_per_s: 0.24,
                latency_ms: summary(1990),
                latency_kind: "end_to_end".into(),
                latencies_ms: BTreeMap::from([
                    ("send_to_ack".to_string(), summary(2000)),
                    ("end_to_end".to_string(), summary(0)),
                ]),
                window_s: 1.0,
                window_stats,
                windows,
                errors: ErrorCounts::default(),
                operations: BTreeMap::new(),
                percentile_curves_ms: BTreeMap::new(),
                broker_cpu: None,
                stream: None,
            }],
            compare: None,
        }
    }
}
