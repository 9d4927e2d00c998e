//! The message flags `ferry send`, `ferry publish` and the shell's `send` and `publish` share
//! (addressee, priority, context, properties, time to live, delay, persistence:
//! [`MessageFlags`]), the body of the command-line ones ([`MessageArgs`]), and building an
//! [`OutgoingMessage`] from them.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use ferry_protocol::{OutgoingMessage, DEFAULT_PRIORITY};

use crate::properties::parse_properties;

/// What a message carries besides its body and destination, as flags: one declaration for the
/// command line and the shell.
#[derive(Debug, Clone, Args)]
pub struct MessageFlags {
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
    /// Time to live (30s, 500ms, 2m, 1h; a number needs its unit): once it has passed since
    /// the broker accepted the message, the message is never delivered. Default: forever.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::millis)]
    ttl: Option<u64>,
    /// Delayed delivery (30s, 500ms, 2m, 1h; a number needs its unit): the message is
    /// invisible to receivers until this long after the broker accepted it. Default: at once.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::millis)]
    delay: Option<u64>,
    /// Keep the message in memory only: faster, but lost if the broker stops or crashes
    /// (see docs/semantics.md). Default: persistent.
    #[arg(long)]
    non_persistent: bool,
}

impl MessageFlags {
    /// The message with `body` and without a destination (no queues, no topic). Properties
    /// that do not parse fail here, before connecting.
    pub fn into_message(self, body: Bytes) -> Result<OutgoingMessage> {
        Ok(OutgoingMessage {
            queues: Vec::new(),
            topic: None,
            persistent: !self.non_persistent,
            receiver: self.to,
            priority: self.priority,
            context: self.context,
            properties: parse_properties(&self.properties)?,
            body,
            ttl_ms: self.ttl.unwrap_or(0),
            delay_ms: self.delay.unwrap_or(0),
        })
    }
}

/// The message flags of `ferry send` and `ferry publish`, with the body.
#[derive(Debug, Args)]
pub struct MessageArgs {
    #[command(flatten)]
    flags: MessageFlags,
    /// Read the body from this file ('-' for standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "body")]
    file: Option<PathBuf>,
    /// The body; without it and without --file, the body is read from standard input.
    body: Option<String>,
}

impl MessageArgs {
    /// The message without a destination (no queues, no topic). Everything that can fail
    /// locally (properties, the body's file) fails here, before connecting.
    pub fn into_message(self) -> Result<OutgoingMessage> {
        // Properties first: a bad one must not wait for a body typed on standard input.
        parse_properties(&self.flags.properties)?;
        let body = read_body(self.body, self.file.as_deref())?;
        self.flags.into_message(body)
    }
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
