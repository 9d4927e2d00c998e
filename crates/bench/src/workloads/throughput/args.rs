//! Flags of `ferry-bench throughput`.

use clap::Args;

use crate::args::CommonArgs;

/// Requests in flight per producer when `--in-flight` is not given.
pub const DEFAULT_IN_FLIGHT: u32 = 64;

/// Flags of `ferry-bench throughput`.
#[derive(Debug, Clone, Args)]
pub struct ThroughputArgs {
    /// Producer tasks, each with its own connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub producers: u32,
    /// Consumer tasks, each with its own connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub consumers: u32,
    /// Body size in bytes (at least 16: a send timestamp and a run id lead every body).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(16..))]
    pub size: u32,
    /// Number of queues, named bench-0, bench-1, ...; created if missing.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub queues: u32,
    /// Requests each producer keeps in flight (pipelined on its connection).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_IN_FLIGHT, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub in_flight: u32,
    /// Messages per request: 1 sends one by one, more uses send_batch.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    /// Most messages sent but not yet received before producers pause (0 = no limit). A limit
    /// measures the rate the broker sustains end to end instead of letting producers build an
    /// ever-growing backlog that starves the consumers; it applies only with consumers.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_backlog: u64,
    /// Deliveries each consumer subscription may hold unacked.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub prefetch: u32,
    /// Send exactly this many messages instead, without warm-up or cool-down, and time them.
    #[arg(long, conflicts_with = "duration")]
    pub messages: Option<u64>,
    /// Persistent messages (true), or non-persistent ones kept in memory only (false; ferry,
    /// amqp, and nats in core mode).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub persistent: bool,
    /// Also write an HTML page with plots of the run to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}
