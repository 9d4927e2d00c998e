//! Flags of `ferry-bench ftab`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use rand::Rng;

use crate::args::CommonArgs;

/// Flags of `ferry-bench ftab`: the client mix and the message shape.
#[derive(Debug, Clone, Args)]
pub struct FtabArgs {
    /// Alice clients: send to --targets-per-send random queues, no receiver.
    #[arg(long, default_value_t = 0)]
    pub alice: u32,
    /// Bob clients: pop the highest-priority message from a random queue.
    #[arg(long, default_value_t = 0)]
    pub bob: u32,
    /// Larry clients: bounce messages addressed to each other between random queues, finding
    /// them with the "which queues hold messages for me" query.
    #[arg(long, default_value_t = 0)]
    pub larry: u32,
    /// Tola clients: each sends a request to its Maruja and waits for the reply (give as many
    /// Marujas).
    #[arg(long, default_value_t = 0)]
    pub tola: u32,
    /// Maruja clients: each answers its Tola's requests.
    #[arg(long, default_value_t = 0)]
    pub maruja: u32,
    /// Carl clients: send requests to one queue without waiting for answers.
    #[arg(long, default_value_t = 0)]
    pub carl: u32,
    /// Rick clients: pop Carl's requests and drop them.
    #[arg(long, default_value_t = 0)]
    pub rick: u32,
    /// Body size in bytes (English-like text after a 16-byte header).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(16..))]
    pub size: u32,
    /// Queues Alice, Bob and Larry choose from, named ftab-0, ftab-1, ...
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub queues: u32,
    /// Target queues per Alice send (one atomic multi-queue send).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub targets_per_send: u32,
    /// Priority of every message (1-10), or `random` for a uniform choice per message.
    #[arg(long, default_value = "5", value_parser = parse_priority)]
    pub priority: Priority,
    /// Ferry target only: the Alice, Bob, Carl and Rick clients share N connections (taken in
    /// turn) instead of having one each, as an application's threads share a client; Larry,
    /// Tola and Maruja keep their own, being found by their names. Default: one per client.
    /// The postgres target's counterpart is --postgres-sessions.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub ferry_connections: Option<u32>,
    /// Also write an HTML page with plots of the run to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Message priority of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Every message at this priority.
    Fixed(u8),
    /// Uniform over 1-10 per message.
    Random,
}

impl Priority {
    /// The priority of the next message.
    pub fn pick(self) -> u8 {
        match self {
            Priority::Fixed(p) => p,
            Priority::Random => rand::thread_rng().gen_range(1..=10),
        }
    }

    /// As given on the command line.
    pub fn label(self) -> String {
        match self {
            Priority::Fixed(p) => p.to_string(),
            Priority::Random => "random".to_string(),
        }
    }
}

/// Parses `--priority`: 1-10 or `random`.
pub fn parse_priority(s: &str) -> Result<Priority> {
    if s.eq_ignore_ascii_case("random") {
        return Ok(Priority::Random);
    }
    match s.parse::<u8>() {
        Ok(p) if (1..=10).contains(&p) => Ok(Priority::Fixed(p)),
        _ => bail!("priority must be 1-10 or 'random', not '{s}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities() {
        assert_eq!(parse_priority("5").unwrap(), Priority::Fixed(5));
        assert_eq!(parse_priority("Random").unwrap(), Priority::Random);
        assert!(parse_priority("0").is_err());
        assert!(parse_priority("11").is_err());
        assert!((1..=10).contains(&Priority::Random.pick()));
    }
}
