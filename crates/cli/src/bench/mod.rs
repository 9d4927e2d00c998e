//! `ferry bench`: the command-line wiring of the benchmark harness. The workloads, drivers,
//! statistics and reports live in the `ferry-bench` crate; this module only names the
//! subcommands.

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
    Throughput(ferry_bench::ThroughputArgs),
    /// Open loop at a fixed rate: latency percentiles corrected for coordinated omission.
    Latency(ferry_bench::LatencyArgs),
}

/// Runs a benchmark on a multi-threaded runtime.
pub fn run(args: BenchArgs) -> Result<()> {
    match args.workload {
        Workload::Throughput(a) => {
            ferry_bench::block_on(ferry_bench::workloads::throughput::run(a))
        }
        Workload::Latency(a) => ferry_bench::block_on(ferry_bench::workloads::latency::run(a)),
    }
}
