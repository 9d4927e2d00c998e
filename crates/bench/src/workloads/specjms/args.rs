//! Flags of `ferry-bench specjms`: only those it takes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::layout::{CfoLayout, Layout};
use crate::args::{parse_duration, parse_fsync, parse_window, CommonArgs, OutputArgs, TargetArg};
use crate::drivers::target::DEFAULT_SERVER;
use crate::drivers::{amqp, nats};

/// How the workload scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TopologyArg {
    /// More locations at fixed rates per location.
    Horizontal,
    /// Fixed locations, rates growing with BASE.
    Vertical,
    /// The counts and rates given by --sm, --dc, --sp, --hq, --families and --rates.
    Freeform,
}

/// Flags of `ferry-bench specjms`.
#[derive(Debug, Clone, Args)]
pub struct SpecjmsArgs {
    /// Topology: horizontal, vertical or freeform.
    #[arg(long, value_enum, default_value_t = TopologyArg::Horizontal)]
    pub topology: TopologyArg,
    /// The scale (horizontal: supermarkets; vertical: the rate factor).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub base: u32,
    /// Destination layout: queues, type-topics (selector on TargetLocationID) or central (one
    /// topic, selectors on location type, target and message type).
    #[arg(long, value_enum, default_value_t = Layout::Queues)]
    pub layout: Layout,
    /// Calls for offers: per-family topics, or one topic with an IN selector per supplier.
    #[arg(long, value_enum, default_value_t = CfoLayout::PerFamily)]
    pub cfo: CfoLayout,
    /// Send the spec's transactional messages in transactions.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub transactions: bool,
    /// Interactions that are on (1 to 7, comma-separated); the others are off.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6,7", value_parser = clap::value_parser!(u8).range(1..=7))]
    pub interactions: Vec<u8>,
    /// Freeform: interactions started per second, 7 comma-separated values (per SM for 1, 4,
    /// 5; per DC for 2; in all for 3, 6, 7).
    #[arg(long, value_delimiter = ',', num_args = 7)]
    pub rates: Option<Vec<f64>>,
    /// Freeform: supermarkets.
    #[arg(long, default_value_t = 10)]
    pub sm: u32,
    /// Freeform: distribution centers.
    #[arg(long, default_value_t = 2)]
    pub dc: u32,
    /// Freeform: suppliers.
    #[arg(long, default_value_t = 4)]
    pub sp: u32,
    /// Freeform: HQ instances.
    #[arg(long, default_value_t = 1)]
    pub hq: u32,
    /// Freeform: product families.
    #[arg(long, default_value_t = 10)]
    pub families: u32,
    /// Freeform: families each supplier offers.
    #[arg(long, default_value_t = 5)]
    pub families_per_sp: u32,
    /// Search for the largest BASE that passes the audit: double from --base until a run
    /// fails, then halve the interval.
    #[arg(long)]
    pub find_max: bool,
    /// Most runs of --find-max.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub max_trials: u32,
    /// Print the capacity model (service demands fitted over two or more runs, predicted
    /// largest BASE and delivery times) beside the measurement; needs the broker's process
    /// (--own-broker or --broker-pid). Calibrated on the --calibrate runs, else on the runs
    /// that passed (all runs when fewer than two passed).
    #[arg(long)]
    pub model: bool,
    /// Runs at these BASEs first (comma-separated, e.g. 5,10,20) to calibrate --model on;
    /// audited and reported like the others.
    #[arg(long, value_delimiter = ',', value_name = "BASE,...", requires = "model",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub calibrate: Vec<u32>,
    /// Connections per kind of location, for starts, handlers' sends and consumers each; 0
    /// (the default): each location has its own, as SPECjms agents do (locations sharing a
    /// sender wait for each other's transactions: late starts of the load generator, not of
    /// the broker).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub pool: u32,
    /// Most connections a location starts its interactions on at once (SPECjms: its driver
    /// threads). Each location keeps one spare ready, so that a start does not wait for
    /// another's commit; 1: each start waits for the one before.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub start_connections: u32,
    /// How long to measure each run, after the warm-up.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub duration: Duration,
    /// At the start of each run, the time over which every interaction's rate rises linearly
    /// from 0 to its configured rate (before --warmup; 0s: a step to full rate).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub ramp: Duration,
    /// Load at the full rate after the ramp, before measuring.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub warmup: Duration,
    /// After the load stops: the longest the backlog may take to drain without progress.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub drain: Duration,
    /// Per-interval trace window, with a unit.
    #[arg(long, value_name = "DURATION", value_parser = parse_window, default_value = "1s")]
    pub window: Duration,
    /// Keep the queues, topics and durable subscriptions the run made (bench-spec.*).
    #[arg(long)]
    pub keep: bool,
    /// What to measure: ferry, nats or amqp (a peer refuses what it cannot express, naming why).
    #[arg(long, value_enum, default_value_t = TargetArg::Ferry)]
    pub target: TargetArg,
    /// Ferry broker address (target ferry).
    #[arg(long, value_name = "HOST:PORT", env = "FERRY_SERVER", default_value = DEFAULT_SERVER)]
    pub server: String,
    /// Start `ferry serve` as a child process for the run (its CPU and disk are measured).
    #[arg(long, conflicts_with = "broker_pid")]
    pub own_broker: bool,
    /// The process id of the broker at --server, to read its CPU time (same machine).
    #[arg(long, value_name = "PID")]
    pub broker_pid: Option<u32>,
    /// The Ferry broker's fsync policy (always, interval:MS, never).
    #[arg(long, value_name = "POLICY", env = "FERRY_FSYNC", default_value = "always", value_parser = parse_fsync)]
    pub broker_fsync: String,
    /// NATS server URL (target nats).
    #[arg(long, value_name = "URL", env = "FERRY_NATS_URL", default_value = nats::DEFAULT_URL)]
    pub nats_url: String,
    /// RabbitMQ URL (target amqp).
    #[arg(long, value_name = "URL", env = "FERRY_AMQP_URL", default_value = amqp::DEFAULT_URL)]
    pub amqp_url: String,
    /// `--json`, `--csv`, `--quiet`.
    #[command(flatten)]
    pub output: OutputArgs,
    /// The `ferry` binary --own-broker starts. Not a flag (the binary's --ferry-bin).
    #[arg(skip)]
    pub ferry_binary: Option<PathBuf>,
    /// The shared flags, filled from the ones above. Not flags.
    #[arg(skip = CommonArgs::unset())]
    pub common: CommonArgs,
}

impl SpecjmsArgs {
    /// Fills [`SpecjmsArgs::common`] from the workload's own flags.
    pub fn with_common(mut self) -> Self {
        let c = &mut self.common;
        c.duration = self.duration;
        c.warmup = self.ramp + self.warmup;
        c.window = self.window;
        c.target = self.target;
        c.server = self.server.clone();
        c.broker_fsync = self.broker_fsync.clone();
        c.nats_url = self.nats_url.clone();
        c.amqp_url = self.amqp_url.clone();
        self.output.fill(c);
        c.keep = self.keep;
        self
    }
}
