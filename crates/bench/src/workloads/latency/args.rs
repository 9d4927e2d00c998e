//! Flags of `ferry-bench latency`.

use clap::Args;

use crate::args::CommonArgs;

/// Flags of `ferry-bench latency`.
#[derive(Debug, Clone, Args)]
pub struct LatencyArgs {
    /// Messages per second, in all, on a fixed schedule (open loop).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Sender connections; the rate is split evenly between them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub producers: u32,
    /// Consumer connections (0: send-to-ack latency only).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub consumers: u32,
    /// Body size in bytes (at least 16: a send timestamp and a run id lead every body).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(16..))]
    pub size: u32,
    /// Number of queues, named bench-0, bench-1, ...; created if missing.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub queues: u32,
    /// Most sends outstanding per sender. Beyond it the sender waits; the wait still counts in
    /// the corrected latency, which is measured from the intended send time.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_outstanding: u32,
    /// Deliveries each consumer subscription may hold unacked.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub prefetch: u32,
    /// Also write an HTML page with plots of the run to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}
