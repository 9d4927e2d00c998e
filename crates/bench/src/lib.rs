//! `ferry-bench`: the benchmark harness behind `ferry bench`.
//!
//! A workload (what load to generate and what to measure) runs against a target through a
//! [`drivers::Driver`], so the same workload can later measure NATS, RabbitMQ or PostgreSQL.
//!
//! Modules:
//! - [`args`]: flags every workload shares (`--duration`, `--warmup`, `--cooldown`, `--window`,
//!   `--target`, `--json`, `--csv`) and duration parsing;
//! - [`drivers`]: the `Driver` trait, target selection, the `ferry` driver;
//! - [`payload`]: the bench message body (send timestamp and run id up front);
//! - [`progress`]: the live progress line on standard error while a workload runs;
//! - [`stats`]: latency histograms, sample statistics with t-distribution confidence
//!   intervals, coordinated-omission correction, per-window series;
//! - [`workloads`]: `throughput`, `latency`, `ftab`, `fanout`, `selector` and `compare`;
//! - [`report`]: the results as a terminal table, JSON (`schema/result.schema.json`), CSV and
//!   an HTML page of plots.

pub mod args;
pub mod drivers;
pub mod payload;
pub mod progress;
pub mod report;
pub mod stats;
pub mod workloads;

pub use workloads::compare::CompareArgs;
pub use workloads::fanout::FanoutArgs;
pub use workloads::ftab::FtabArgs;
pub use workloads::latency::LatencyArgs;
pub use workloads::selector::SelectorArgs;
pub use workloads::throughput::ThroughputArgs;

/// Runs `fut` (a workload) on a multi-threaded runtime, so producers and consumers really run
/// in parallel as separate clients would.
pub fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(fut: F) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(fut)
}
