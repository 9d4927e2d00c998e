//! Flags of `ferry-bench compare`: the targets, the rounds, and the workload with its own flags.

use clap::{Args, Subcommand};

use crate::workloads::ftab::FtabArgs;
use crate::workloads::Workload as _;
use crate::{FanoutArgs, LatencyArgs, ThroughputArgs};

/// Flags of `ferry-bench compare WORKLOAD`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Targets to measure, comma-separated (ferry, nats, amqp, postgres).
    #[arg(long, global = true, value_delimiter = ',', default_value = "ferry")]
    pub targets: Vec<crate::args::TargetArg>,
    /// Rounds; each runs every target once, in an order rotated per round, so that drift of
    /// the machine hits all targets alike. Figures are medians over rounds.
    #[arg(long, global = true, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// The broker address was given (`--server` or `FERRY_SERVER`): measure that broker rather
    /// than starting one. Set by the command line, not a flag.
    #[arg(skip)]
    pub server_given: bool,
    /// The workload and its flags.
    #[command(subcommand)]
    pub workload: CompareWorkload,
}

/// The workload a comparison runs.
#[derive(Debug, Clone, Subcommand)]
pub enum CompareWorkload {
    /// Producers and consumers: messages per second and latency.
    Throughput(ThroughputArgs),
    /// Open loop at a fixed rate: coordinated-omission corrected latency.
    Latency(LatencyArgs),
    /// The FTaB client archetypes.
    Ftab(FtabArgs),
    /// One publisher on a topic, N subscriptions (ferry and nats targets: core NATS for
    /// non-persistent messages, JetStream for persistent ones).
    Fanout(FanoutArgs),
}

impl CompareWorkload {
    /// The flags every workload has.
    pub fn common(&self) -> &crate::args::CommonArgs {
        match self {
            CompareWorkload::Throughput(a) => &a.common,
            CompareWorkload::Latency(a) => &a.common,
            CompareWorkload::Ftab(a) => &a.common,
            CompareWorkload::Fanout(a) => &a.common,
        }
    }

    /// The flags every workload has, to change per target.
    pub fn common_mut(&mut self) -> &mut crate::args::CommonArgs {
        match self {
            CompareWorkload::Throughput(a) => &mut a.common,
            CompareWorkload::Latency(a) => &mut a.common,
            CompareWorkload::Ftab(a) => &mut a.common,
            CompareWorkload::Fanout(a) => &mut a.common,
        }
    }

    /// `--report FILE.html`, if given.
    pub fn html(&self) -> Option<&std::path::Path> {
        match self {
            CompareWorkload::Throughput(a) => a.html(),
            CompareWorkload::Latency(a) => a.html(),
            CompareWorkload::Ftab(a) => a.html(),
            CompareWorkload::Fanout(a) => a.html(),
        }
    }

    /// The workload's name.
    pub fn name(&self) -> &'static str {
        match self {
            CompareWorkload::Throughput(_) => "throughput",
            CompareWorkload::Latency(_) => "latency",
            CompareWorkload::Ftab(_) => "ftab",
            CompareWorkload::Fanout(_) => "fanout",
        }
    }
}
