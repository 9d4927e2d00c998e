//! Choosing a driver by `--target`, with the options each target needs.

use std::sync::Arc;

use anyhow::{bail, Result};

use super::ferry::FerryDriver;
use super::Driver;

/// The targets the harness knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Ferry, through `ferry-client`.
    Ferry,
    /// NATS JetStream (driver not written yet).
    Nats,
    /// RabbitMQ (driver not written yet).
    Amqp,
    /// A PostgreSQL queue table (driver not written yet).
    Postgres,
}

impl Target {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Target::Ferry => "ferry",
            Target::Nats => "nats",
            Target::Amqp => "amqp",
            Target::Postgres => "postgres",
        }
    }
}

/// Where to find each target. Peers will add their URL here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetOptions {
    /// Ferry broker address, `HOST:PORT`.
    pub ferry_server: String,
}

/// The driver for `target`, or a clear error for a target without a driver yet.
pub fn open(target: Target, options: &TargetOptions) -> Result<Arc<dyn Driver>> {
    match target {
        Target::Ferry => Ok(Arc::new(FerryDriver::new(options.ferry_server.clone()))),
        other => bail!(
            "target '{}' is not available yet: only 'ferry' has a driver so far",
            other.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_not_available_yet() {
        let options = TargetOptions {
            ferry_server: "127.0.0.1:1".into(),
        };
        assert_eq!(open(Target::Ferry, &options).unwrap().name(), "ferry");
        for t in [Target::Nats, Target::Amqp, Target::Postgres] {
            let e = open(t, &options).err().unwrap().to_string();
            assert!(e.contains("not available yet"), "{e}");
            assert!(e.contains(t.name()), "{e}");
        }
    }
}
