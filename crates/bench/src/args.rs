//! Flags every workload shares, and parsing of durations and of `--window`.
//!
//! Durations follow humantime's grammar (`10s`, `1.5s`, `500ms`, `2m`, `1m30s`), the grammar of
//! every duration flag of the `ferry` command line too; a number needs its unit (`0` aside).
//!
//! `--window` is the per-interval trace window and takes a duration with a unit (`1s`,
//! `500ms`). `ferry-bench throughput` once used `--window N` for requests in flight (now
//! `--in-flight N`); a bare integer is refused with a message naming `--in-flight` rather than
//! read as a number of seconds or milliseconds, so an old command line never changes meaning
//! silently.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use crate::drivers::nats::NatsMode;
use crate::drivers::target::DEFAULT_SERVER;
use crate::drivers::{amqp, nats, postgres, stomp, Target, TargetOptions};

/// The output flags of a workload with flags of its own (`specjms`, `stream`), which it copies
/// into its [`CommonArgs`] with [`OutputArgs::fill`].
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the per-window series as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// No live progress line.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

impl OutputArgs {
    /// Copies these flags into `common`.
    pub fn fill(&self, common: &mut CommonArgs) {
        common.json = self.json.clone();
        common.csv = self.csv.clone();
        common.quiet = self.quiet;
    }
}

/// Flags of every workload: timing, target and output files.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// How long to measure (e.g. 10s, 500ms, 2m), after the warm-up.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// Load before measuring, not counted.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub warmup: Duration,
    /// Load after measuring, not counted (keeps the end of the run out of the figures).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub cooldown: Duration,
    /// Per-interval trace window, with a unit (e.g. 1s, 500ms). Requests in flight are
    /// --in-flight N (throughput).
    #[arg(long, value_name = "DURATION", value_parser = parse_window, default_value = "1s")]
    pub window: Duration,
    /// What to measure: ferry, nats, amqp (RabbitMQ), postgres or stomp (any STOMP broker); peers are expected where
    /// `scripts/peers up` starts them unless their URL option says otherwise.
    #[arg(long, value_enum, default_value_t = TargetArg::Ferry)]
    pub target: TargetArg,
    /// Ferry broker address (target ferry).
    #[arg(long, value_name = "HOST:PORT", env = "FERRY_SERVER", default_value = DEFAULT_SERVER)]
    pub server: String,
    /// The Ferry broker's fsync policy (always, interval:MS, never): a broker the harness
    /// starts runs with it; for one at --server it is recorded in the results (the harness
    /// cannot ask the broker), so say what that broker runs with. The broker reads the same
    /// variable.
    #[arg(long, value_name = "POLICY", env = "FERRY_FSYNC", default_value = "always", value_parser = parse_fsync)]
    pub broker_fsync: String,
    /// NATS server URL (target nats).
    #[arg(long, value_name = "URL", env = "FERRY_NATS_URL", default_value = nats::DEFAULT_URL)]
    pub nats_url: String,
    /// NATS mode (target nats): jetstream (persistent: file-stored streams, durable pull
    /// consumers) or core (non-persistent publish and subscribe).
    #[arg(long, value_enum, default_value_t = NatsModeArg::Jetstream)]
    pub nats_mode: NatsModeArg,
    /// RabbitMQ URL (target amqp).
    #[arg(long, value_name = "URL", env = "FERRY_AMQP_URL", default_value = amqp::DEFAULT_URL)]
    pub amqp_url: String,
    /// STOMP broker URL (target stomp): `stomp://[USER:PASS@]HOST:PORT[/VHOST]`; Ferry's STOMP
    /// listener by default, RabbitMQ's plugin at stomp://guest:guest@127.0.0.1:61614 under
    /// `scripts/peers up`.
    #[arg(long, value_name = "URL", env = "FERRY_STOMP_URL", default_value = stomp::DEFAULT_URL)]
    pub stomp_url: String,
    /// PostgreSQL URL (target postgres).
    #[arg(long, value_name = "URL", env = "FERRY_POSTGRES_URL", default_value = postgres::DEFAULT_URL)]
    pub postgres_url: String,
    /// Most PostgreSQL sessions the clients share (target postgres), like a middleware's
    /// connection pool: up to N clients have a session each, more take turns on them
    /// (statements pipeline); consumers have their own.
    #[arg(long, value_name = "N", default_value_t = postgres::DEFAULT_SESSIONS, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..=10_000), |n| n as usize))]
    pub postgres_sessions: usize,
    /// Base client name for the bench's connections; default: a unique `ferry-bench-<pid>-<random>`.
    #[arg(long, value_name = "CLIENT", env = "FERRY_NAME")]
    pub name: Option<String>,
    /// Also write the results as JSON to this file (schema: crates/bench/schema/result.schema.json).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the per-window series as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// No live progress line on standard error (it is drawn only when standard error is a
    /// terminal anyway).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Keep the queues and topics the run made (`bench-*`, `ftab-*`); by default the run
    /// removes them, with what they hold, at its end.
    #[arg(long)]
    pub keep: bool,
    /// Where `compare` is (e.g. "round 2/3"), for the progress line. Not a flag.
    #[arg(skip)]
    pub progress_round: Option<String>,
}

impl CommonArgs {
    /// The defaults of every flag, for workloads that declare their own flags and fill these
    /// from them (so that `--help` lists only what they take).
    pub fn unset() -> CommonArgs {
        CommonArgs {
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            cooldown: Duration::ZERO,
            window: Duration::from_secs(1),
            target: TargetArg::Ferry,
            server: DEFAULT_SERVER.to_string(),
            broker_fsync: "always".to_string(),
            nats_url: nats::DEFAULT_URL.to_string(),
            nats_mode: NatsModeArg::Jetstream,
            amqp_url: amqp::DEFAULT_URL.to_string(),
            postgres_url: postgres::DEFAULT_URL.to_string(),
            postgres_sessions: postgres::DEFAULT_SESSIONS,
            stomp_url: stomp::DEFAULT_URL.to_string(),
            name: None,
            json: None,
            csv: None,
            quiet: false,
            keep: false,
            progress_round: None,
        }
    }

    /// The trace window (`--window`, default 1 s).
    pub fn trace_window(&self) -> Duration {
        self.window
    }

    /// Where each target is, from the flags.
    pub fn target_options(&self) -> TargetOptions {
        TargetOptions {
            ferry_server: self.server.clone(),
            ferry_fsync: self.broker_fsync.clone(),
            nats_url: self.nats_url.clone(),
            nats_mode: match self.nats_mode {
                NatsModeArg::Jetstream => NatsMode::JetStream,
                NatsModeArg::Core => NatsMode::Core,
            },
            amqp_url: self.amqp_url.clone(),
            postgres_url: self.postgres_url.clone(),
            postgres_sessions: self.postgres_sessions,
            stomp_url: self.stomp_url.clone(),
        }
    }

    /// The base client name: the one given, or a fresh unique one, so that two bench runs
    /// against one broker do not collide with `AlreadyOnline`.
    pub fn client_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let suffix: u32 = rand::random::<u32>() & 0xff_ffff;
            format!("ferry-bench-{}-{suffix:06x}", std::process::id())
        })
    }
}

/// `--nats-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NatsModeArg {
    /// JetStream: persistent streams with file storage.
    Jetstream,
    /// Core NATS: nothing stored.
    Core,
}

/// `--target` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TargetArg {
    /// Ferry through its native client.
    Ferry,
    /// NATS JetStream.
    Nats,
    /// RabbitMQ over AMQP 0.9.1.
    Amqp,
    /// A PostgreSQL queue table.
    Postgres,
    /// Any STOMP 1.2 broker (Ferry's STOMP gateway, RabbitMQ's STOMP plugin) at --stomp-url.
    Stomp,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Target {
        match t {
            TargetArg::Ferry => Target::Ferry,
            TargetArg::Nats => Target::Nats,
            TargetArg::Amqp => Target::Amqp,
            TargetArg::Postgres => Target::Postgres,
            TargetArg::Stomp => Target::Stomp,
        }
    }
}

/// Parses `--window`: a positive duration with a unit. A bare number is refused, naming
/// `--in-flight`, because `--window N` once meant N requests in flight.
pub fn parse_window(s: &str) -> Result<Duration> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        bail!(
            "the trace window needs a unit (e.g. --window {s}s or --window {s}ms); \
             for requests in flight use --in-flight {s}"
        );
    }
    let d = parse_duration(s)?;
    if d < Duration::from_millis(1) {
        bail!("the trace window must be at least 1ms");
    }
    Ok(d)
}

/// Parses `--broker-fsync`: `always`, `never` or `interval:MS` (the broker's own spelling).
pub fn parse_fsync(s: &str) -> Result<String> {
    let s = s.trim();
    let interval_ok = s
        .strip_prefix("interval:")
        .is_some_and(|ms| ms.parse::<u64>().is_ok_and(|ms| ms > 0));
    if s == "always" || s == "never" || interval_ok {
        Ok(s.to_string())
    } else {
        bail!("'{s}' is not an fsync policy: always, interval:MS (e.g. interval:10) or never")
    }
}

/// Parses a duration in humantime's grammar (`10s`, `1.5s`, `500ms`, `2m`, `1m30s`); a bare
/// number other than `0` is refused: it needs its unit.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let text = s.trim();
    if !text.is_empty() && text != "0" && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        bail!("'{text}' needs a unit, e.g. {text}s or {text}ms");
    }
    humantime::parse_duration(text)
        .map_err(|e| anyhow::anyhow!("'{text}' is not a duration ({e}); e.g. 10s, 500ms, 2m"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        let bare = parse_duration("10").unwrap_err().to_string();
        assert!(bare.contains("needs a unit, e.g. 10s"), "{bare}");
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

    #[test]
    fn fsync_policies() {
        for ok in ["always", "never", "interval:10"] {
            assert_eq!(parse_fsync(ok).unwrap(), ok);
        }
        for bad in ["", "sometimes", "interval:", "interval:0", "interval:1s"] {
            assert!(parse_fsync(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn windows() {
        assert_eq!(parse_window("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_window("250ms").unwrap(), Duration::from_millis(250));
        let bare = parse_window("16").unwrap_err().to_string();
        assert!(bare.contains("--in-flight 16"), "{bare}");
        assert!(bare.contains("--window 16s"), "{bare}");
        assert!(parse_window("1.5").is_err());
        assert!(parse_window("0s").is_err());
        assert!(parse_window("0").is_err());
        assert!(parse_window("fast").is_err());
    }
}
