//! `ferry bench`: load generators that measure a running broker through the public client API.
//!
//! Modules:
//! - [`args`]: the flags of each workload and duration parsing;
//! - [`payload`]: the bench message body (send timestamp and run id up front);
//! - [`stats`]: shared counters, the measurement phase, latency histograms;
//! - [`producer`] and [`consumer`]: the actor tasks;
//! - [`throughput`]: the throughput workload that runs them;
//! - [`report`]: the results, as text and as JSON.

pub mod args;
pub mod consumer;
pub mod payload;
pub mod producer;
pub mod report;
pub mod stats;
pub mod throughput;

use anyhow::Result;
use clap::{Args, Subcommand};

/// Flags of `ferry bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Debug, Subcommand)]
enum Workload {
    /// Producers and consumers on bench-<n> queues: messages per second and latency.
    Throughput(args::ThroughputArgs),
}

/// Runs a benchmark on a multi-threaded runtime, so producers and consumers really run in
/// parallel as separate clients would.
pub fn run(args: BenchArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.workload {
        Workload::Throughput(a) => runtime.block_on(throughput::run(a)),
    }
}
