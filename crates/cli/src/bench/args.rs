//! Flags of the bench workloads, and parsing of durations such as `10s`, `500ms` or `2m`.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

use crate::connection::ConnArgs;

/// Flags of `ferry bench throughput`.
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
    #[arg(long, value_name = "IN_FLIGHT", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub window: u32,
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
    /// How long to measure (e.g. 10s, 500ms, 2m), after the warm-up.
    #[arg(long, value_parser = parse_duration, default_value = "10s", conflicts_with = "messages")]
    pub duration: Duration,
    /// Send exactly this many messages instead, without warm-up, and time them.
    #[arg(long)]
    pub messages: Option<u64>,
    /// Warm-up before measuring (duration mode only).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub warmup: Duration,
    /// Persistent messages (the only kind the broker has so far).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub persistent: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Parses `10s`, `1.5s`, `500ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let Ok(value) = number.parse::<f64>() else {
        bail!("'{s}' is not a duration (e.g. 10s, 500ms, 2m)");
    };
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1000.0,
        "us" => value / 1_000_000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => bail!("unknown unit '{other}' in '{s}' (use ms, s, m or h)"),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| anyhow::anyhow!("duration '{s}' is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
