//! `ferry send`: one message to one or more queues, atomically.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use ferry_protocol::{OutgoingMessage, DEFAULT_PRIORITY};

use crate::connection::{explain, ConnArgs};
use crate::properties::parse_properties;

/// Flags of `ferry send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Queue to send to; repeat it (or separate names with commas) to place the message on
    /// several queues at once: all or none.
    #[arg(
        long = "queue",
        short = 'q',
        value_name = "QUEUE",
        required = true,
        value_delimiter = ','
    )]
    queues: Vec<String>,
    /// Only this client may receive the message.
    #[arg(long, value_name = "CLIENT")]
    to: Option<String>,
    /// 1 (lowest) to 10 (highest).
    #[arg(long, default_value_t = DEFAULT_PRIORITY, value_parser = clap::value_parser!(u8).range(1..=10))]
    priority: u8,
    /// Free for the application, e.g. to pair a reply with its request; 0 = none.
    #[arg(long, default_value_t = 0)]
    context: u64,
    /// A property NAME=VALUE; VALUE is typed as integer, float, true/false or else string.
    /// NAME:str=VALUE forces a string (also :int, :float, :bool). Repeatable.
    #[arg(long = "property", short = 'p', value_name = "NAME=VALUE")]
    properties: Vec<String>,
    /// Time to live (30s, 500ms, 2m, 1h): once it has passed since the broker accepted the
    /// message, the message is never delivered. Default: forever.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    ttl: Option<u64>,
    /// Delayed delivery (30s, 500ms, 2m, 1h): the message is invisible to receivers until
    /// this long after the broker accepted it. Default: at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    delay: Option<u64>,
    /// Read the body from this file ('-' for standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "body")]
    file: Option<PathBuf>,
    /// The body; without it and without --file, the body is read from standard input.
    body: Option<String>,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Sends the message and prints its id.
pub async fn run(args: SendArgs) -> Result<()> {
    // Everything that can fail locally is checked before connecting.
    let properties = parse_properties(&args.properties)?;
    let body = read_body(args.body, args.file.as_deref())?;
    let message = OutgoingMessage {
        queues: args.queues,
        topic: None,
        persistent: true,
        receiver: args.to,
        priority: args.priority,
        context: args.context,
        properties,
        body,
        ttl_ms: args.ttl.unwrap_or(0),
        delay_ms: args.delay.unwrap_or(0),
    };
    let client = args.conn.connect().await?;
    let result = client.send(message).await.map_err(explain);
    let _ = client.disconnect().await;
    super::emit(&format!("{}\n", result?))
}

/// A duration flag in whole milliseconds; a duration that is not 0 must be at least 1 ms.
fn parse_ms(s: &str) -> Result<u64> {
    let d = ferry_bench::args::parse_duration(s)?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 && !d.is_zero() {
        anyhow::bail!("'{s}' is shorter than 1ms");
    }
    Ok(ms)
}

/// The body from the argument, the file, or standard input, in that order of precedence.
fn read_body(body: Option<String>, file: Option<&std::path::Path>) -> Result<Bytes> {
    match (body, file) {
        (Some(text), _) => Ok(Bytes::from(text)),
        (None, Some(path)) if path.as_os_str() != "-" => std::fs::read(path)
            .map(Bytes::from)
            .with_context(|| format!("cannot read {}", path.display())),
        (None, _) => {
            let mut stdin = std::io::stdin().lock();
            if stdin.is_terminal() {
                eprintln!("ferry: reading the body from standard input (end it with Ctrl-D)");
            }
            let mut buf = Vec::new();
            stdin
                .read_to_end(&mut buf)
                .context("cannot read the body from standard input")?;
            Ok(Bytes::from(buf))
        }
    }
}
