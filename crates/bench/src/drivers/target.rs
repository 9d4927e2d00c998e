//! Choosing a driver by `--target`, with the options each target needs.

use std::sync::Arc;

use anyhow::Result;

use super::amqp::{self, AmqpDriver};
use super::ferry::FerryDriver;
use super::nats::{self, NatsDriver, NatsMode};
use super::postgres::{self, PostgresDriver};
use super::stomp::{self, StompDriver};
use super::Driver;

/// The default Ferry broker address: the native protocol port on loopback.
pub const DEFAULT_SERVER: &str = "127.0.0.1:6730";

/// The targets the harness knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Ferry, through `ferry-client`.
    Ferry,
    /// NATS: JetStream, or core NATS for non-persistent runs.
    Nats,
    /// RabbitMQ over AMQP 0.9.1.
    Amqp,
    /// A PostgreSQL queue table.
    Postgres,
    /// Any STOMP 1.2 broker.
    Stomp,
}

impl Target {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Target::Ferry => "ferry",
            Target::Nats => "nats",
            Target::Amqp => "amqp",
            Target::Postgres => "postgres",
            Target::Stomp => "stomp",
        }
    }
}

/// Where to find each target, and how to drive it. The defaults are the addresses
/// `scripts/peers up` uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetOptions {
    /// Ferry broker address, `HOST:PORT`.
    pub ferry_server: String,
    /// The Ferry broker's fsync policy, as `--broker-fsync` states it.
    pub ferry_fsync: String,
    /// NATS server URL.
    pub nats_url: String,
    /// JetStream (persistent) or core NATS.
    pub nats_mode: NatsMode,
    /// RabbitMQ URL (`amqp://USER:PASS@HOST:PORT/VHOST`).
    pub amqp_url: String,
    /// PostgreSQL connection URL.
    pub postgres_url: String,
    /// Most PostgreSQL sessions the bench clients share (consumers have their own).
    pub postgres_sessions: usize,
    /// STOMP broker URL (target stomp).
    pub stomp_url: String,
}

impl Default for TargetOptions {
    fn default() -> Self {
        TargetOptions {
            ferry_server: DEFAULT_SERVER.to_string(),
            ferry_fsync: "always".to_string(),
            nats_url: nats::DEFAULT_URL.to_string(),
            nats_mode: NatsMode::JetStream,
            amqp_url: amqp::DEFAULT_URL.to_string(),
            postgres_url: postgres::DEFAULT_URL.to_string(),
            postgres_sessions: postgres::DEFAULT_SESSIONS,
            stomp_url: stomp::DEFAULT_URL.to_string(),
        }
    }
}

/// The driver for `target`.
pub fn open(target: Target, options: &TargetOptions) -> Result<Arc<dyn Driver>> {
    Ok(match target {
        Target::Ferry => Arc::new(FerryDriver::new(
            options.ferry_server.clone(),
            options.ferry_fsync.clone(),
        )),
        Target::Nats => Arc::new(NatsDriver::new(options.nats_url.clone(), options.nats_mode)),
        Target::Amqp => Arc::new(AmqpDriver::new(options.amqp_url.clone())),
        Target::Postgres => Arc::new(PostgresDriver::new(
            options.postgres_url.clone(),
            options.postgres_sessions,
        )),
        Target::Stomp => Arc::new(StompDriver::new(options.stomp_url.clone())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_has_a_driver() {
        let options = TargetOptions::default();
        for t in [
            Target::Ferry,
            Target::Nats,
            Target::Amqp,
            Target::Postgres,
            Target::Stomp,
        ] {
            assert_eq!(open(t, &options).unwrap().name(), t.name());
        }
    }
}
