//! `ferry bench`: the command-line wiring of the benchmark harness. The workloads, drivers,
//! statistics and reports live in the `ferry-bench` crate; this module names the subcommands
//! and, for `compare`, provides the in-process broker ([`own_broker`]).

mod own_broker;

use anyhow::Result;
use clap::{Args, Subcommand};

/// Flags of `ferry bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Threads of the load generator's runtime [default: one per core]. On a small machine
    /// shared with the broker, fewer threads leave more of the cores to the broker.
    #[arg(long, value_name = "N", global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Debug, Subcommand)]
enum Workload {
    /// Producers and consumers on bench-<n> queues: messages per second and latency.
    Throughput(ferry_bench::ThroughputArgs),
    /// Open loop at a fixed rate: latency percentiles corrected for coordinated omission.
    Latency(ferry_bench::LatencyArgs),
    /// The FTaB client archetypes (Alice, Bob, Larry, Tola/Maruja, Carl/Rick) in any mix:
    /// per-operation response time and throughput.
    Ftab(ferry_bench::FtabArgs),
    /// One publisher on a topic, N subscriptions each consumed by its own consumer: published
    /// and delivered messages per second, end-to-end latency.
    Fanout(ferry_bench::FanoutArgs),
    /// N subscriptions with selectors on message properties (or without): published and
    /// delivered messages per second and the broker's CPU time per message.
    Selector(ferry_bench::SelectorArgs),
    /// One workload against several targets in alternating rounds, with ratios to Ferry
    /// (starts a broker of its own for the ferry target unless --server is given).
    Compare(ferry_bench::CompareArgs),
}

/// Runs a benchmark on a multi-threaded runtime.
pub fn run(args: BenchArgs) -> Result<()> {
    let threads = args.threads;
    match args.workload {
        Workload::Throughput(a) => {
            ferry_bench::block_on(threads, ferry_bench::workloads::throughput::run(a))
        }
        Workload::Latency(a) => {
            ferry_bench::block_on(threads, ferry_bench::workloads::latency::run(a))
        }
        Workload::Ftab(a) => ferry_bench::block_on(threads, ferry_bench::workloads::ftab::run(a)),
        Workload::Fanout(mut a) => {
            a.pubsub.ferry_binary = std::env::current_exe().ok();
            ferry_bench::block_on(threads, ferry_bench::workloads::fanout::run(a))
        }
        Workload::Selector(mut a) => {
            a.pubsub.ferry_binary = std::env::current_exe().ok();
            ferry_bench::block_on(threads, ferry_bench::workloads::selector::run(a))
        }
        Workload::Compare(mut a) => {
            a.server_given = server_given();
            ferry_bench::block_on(
                threads,
                ferry_bench::workloads::compare::run(a, &own_broker::InProcess),
            )
        }
    }
}

/// Whether the command line or the environment names a broker (`--server`, `FERRY_SERVER`):
/// clap's parsed value cannot tell a given address from the default.
fn server_given() -> bool {
    std::env::var_os("FERRY_SERVER").is_some()
        || std::env::args().any(|a| a == "--server" || a.starts_with("--server="))
}
