//! The flags `ferry-bench fanout` and `ferry-bench selector` share.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// How subscribers acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AckArg {
    /// Acknowledged by the broker when pushed.
    Auto,
    /// Acknowledged by the subscriber once handled (batched).
    Client,
}

/// Flags of the publish/subscribe workloads.
#[derive(Debug, Clone, Args)]
pub struct PubSubArgs {
    /// Persistent messages (true), or non-persistent ones kept in memory only (false; with
    /// the nats target this picks core NATS instead of JetStream).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub persistent: bool,
    /// Durable subscriptions (bench-sub-0, bench-sub-1, ...; removed at the end) instead of
    /// non-durable ones.
    #[arg(long)]
    pub durable: bool,
    /// How subscribers acknowledge.
    #[arg(long, value_enum, default_value_t = AckArg::Client)]
    pub ack: AckArg,
    /// Body size in bytes (at least 16: a send timestamp and a run id lead every body).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(16..))]
    pub size: u32,
    /// Messages per publish request.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    /// Publish requests (batches) in flight at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub in_flight: u32,
    /// Deliveries each subscription may have pushed ahead (lowered to the broker's limit).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    pub prefetch: u32,
    /// Most deliveries owed to the subscribers and not yet received before the publisher
    /// pauses (0 = no limit): measures the rate sustained end to end instead of a growing
    /// backlog.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_backlog: u64,
    /// Start a broker of the bench's own (`ferry serve` as a child process, default settings,
    /// fresh data directory, removed at the end) instead of using --server, and report its CPU
    /// time per message.
    #[arg(long, conflicts_with = "broker_pid")]
    pub own_broker: bool,
    /// The process id of the broker at --server, to report its CPU time per message (read
    /// from /proc/PID/stat; the broker must run on this machine).
    #[arg(long, value_name = "PID")]
    pub broker_pid: Option<u32>,
    /// The `ferry` binary that --own-broker runs. Not a flag: set by the binary itself.
    #[arg(skip)]
    pub ferry_binary: Option<PathBuf>,
}

impl PubSubArgs {
    /// Whether subscribers acknowledge themselves.
    pub fn ack_client(&self) -> bool {
        self.ack == AckArg::Client
    }
}
