//! Flags of `ferry-bench stream`: only those it takes (no `--target`: `--transports` names
//! what is measured).

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::args::{parse_duration, parse_fsync, parse_window, CommonArgs, OutputArgs};
use crate::drivers::target::DEFAULT_SERVER;
use crate::drivers::{amqp, nats};

/// What carries the records from the writer to the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// Ferry's native protocol, non-persistent publishes (batched) to a topic.
    Ferry,
    /// Ferry's native protocol, persistent publishes (batched; fsynced per the broker's
    /// policy), client-ack subscription.
    FerryPersistent,
    /// A plain TCP stream from writer to reader, no broker: the floor.
    Tcp,
    /// RabbitMQ: transient messages on a durable queue, publisher confirms.
    Amqp,
    /// RabbitMQ: persistent messages on a durable queue, publisher confirms (fsynced).
    AmqpPersistent,
    /// Core NATS: publish and subscribe, nothing stored.
    Nats,
    /// Ferry's datagram ingest: records packed into UDP datagrams, published non-persistent.
    Udp,
}

impl Transport {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Ferry => "ferry",
            Transport::FerryPersistent => "ferry-persistent",
            Transport::Tcp => "tcp",
            Transport::Amqp => "amqp",
            Transport::AmqpPersistent => "amqp-persistent",
            Transport::Nats => "nats",
            Transport::Udp => "udp",
        }
    }

    /// Whether the transport needs a Ferry broker.
    pub fn needs_ferry(self) -> bool {
        matches!(
            self,
            Transport::Ferry | Transport::FerryPersistent | Transport::Udp
        )
    }
}

/// Flags of `ferry-bench stream`.
#[derive(Debug, Clone, Args)]
pub struct StreamArgs {
    /// The transports to measure, in turn (comma-separated): ferry, ferry-persistent, tcp,
    /// amqp, amqp-persistent, nats, udp.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ferry,tcp")]
    pub transports: Vec<Transport>,
    /// Rounds: every transport once per round, the order rotated each round; the report
    /// keeps each transport's median round (by records per second).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Records per second the writer offers (open loop); 0: as fast as it can.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Records per send (publish batch, write, datagram at most).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch: u32,
    /// Records in one message body (broker transports; 1: a message per record, as Kieker's
    /// broker writer sent them). More packs records as the datagram ingest does, and the
    /// broker handles one message for several records.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub records_per_message: u32,
    /// Batches in flight on the writer's connection (broker transports).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub in_flight: u32,
    /// Deliveries pushed ahead of the reader (broker transports).
    #[arg(long, default_value_t = 20_000)]
    pub prefetch: u32,
    /// Largest datagram of the udp transport, bytes: 1472 fills one Ethernet frame.
    #[arg(long, default_value_t = 1472, value_parser = clap::value_parser!(u64).range(160..=65_507))]
    pub datagram_bytes: u64,
    /// How long to measure (e.g. 10s), after the warm-up, per transport and round.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// Load before measuring, not counted.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub warmup: Duration,
    /// Per-interval trace window, with a unit.
    #[arg(long, value_name = "DURATION", value_parser = parse_window, default_value = "1s")]
    pub window: Duration,
    /// A running Ferry broker (`HOST:PORT`) for the ferry transports; default: one started
    /// in this process for the run (with the datagram ingest).
    #[arg(long, value_name = "HOST:PORT", env = "FERRY_SERVER")]
    pub server: Option<String>,
    /// The datagram ingest of the broker at --server (`HOST:PORT`), for the udp transport.
    #[arg(long, value_name = "HOST:PORT")]
    pub udp_addr: Option<String>,
    /// The topic the ingest at --udp-addr publishes to.
    #[arg(long, value_name = "TOPIC", default_value = "bench-stream-udp")]
    pub udp_topic: String,
    /// The Ferry broker's fsync policy (always, interval:MS, never): the broker the harness
    /// starts runs with it; for one at --server it is recorded.
    #[arg(long, value_name = "POLICY", env = "FERRY_FSYNC", default_value = "always", value_parser = parse_fsync)]
    pub broker_fsync: String,
    /// NATS server URL (transport nats).
    #[arg(long, value_name = "URL", env = "FERRY_NATS_URL", default_value = nats::DEFAULT_URL)]
    pub nats_url: String,
    /// RabbitMQ URL (transports amqp, amqp-persistent).
    #[arg(long, value_name = "URL", env = "FERRY_AMQP_URL", default_value = amqp::DEFAULT_URL)]
    pub amqp_url: String,
    /// `--json`, `--csv`, `--quiet`.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Keep the topic or queue the run made (`bench-stream`); by default it is removed.
    #[arg(long)]
    pub keep: bool,
    /// The shared flags, filled from the ones above (for the environment record and the
    /// output files). Not flags.
    #[arg(skip = CommonArgs::unset())]
    pub common: CommonArgs,
}

impl StreamArgs {
    /// Fills [`StreamArgs::common`] from the stream's own flags.
    pub fn with_common(mut self) -> Self {
        let c = &mut self.common;
        c.duration = self.duration;
        c.warmup = self.warmup;
        c.window = self.window;
        c.server = self
            .server
            .clone()
            .unwrap_or_else(|| DEFAULT_SERVER.to_string());
        c.broker_fsync = self.broker_fsync.clone();
        c.nats_url = self.nats_url.clone();
        c.amqp_url = self.amqp_url.clone();
        self.output.fill(c);
        c.keep = self.keep;
        self
    }
}
