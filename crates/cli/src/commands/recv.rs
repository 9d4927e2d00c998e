//! `ferry recv`: take (or peek at) messages from a queue or from a sender and print them.
//!
//! Taken messages are received with client ack and acked only after they have been printed and
//! standard output flushed: if printing fails, or the process dies first, the broker gives the
//! message back to the queue when the connection ends, so nothing is lost.

use anyhow::Result;
use clap::{Args, ValueEnum};
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, Order, ReceiveMode, Source};

use crate::connection::{explain, ConnArgs};
use crate::render;

/// The order a receive picks messages in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Highest priority first, oldest first within a priority.
    Priority,
    /// Oldest first.
    Time,
}

impl From<OrderArg> for Order {
    fn from(o: OrderArg) -> Order {
        match o {
            OrderArg::Priority => Order::Priority,
            OrderArg::Time => Order::Time,
        }
    }
}

/// How a receive picks and waits, as flags: one declaration for `ferry recv` and the shell's
/// `recv` and `from`.
#[derive(Debug, Clone, Args)]
pub struct ReceiveFlags {
    /// Which message comes first.
    #[arg(long, value_enum, default_value_t = OrderArg::Priority)]
    pub order: OrderArg,
    /// Show the next message without removing it. A peek always sees the head of the queue,
    /// so with --count it shows that one message once.
    #[arg(long)]
    pub peek: bool,
    /// How long to wait for a message when none is ready (e.g. 5s, 500ms); 0 = only what is
    /// there now.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = crate::duration::wait_ms)]
    pub wait: u32,
    /// Only messages this JMS message selector is TRUE for, e.g. "region = 'eu' AND
    /// priority >= 8" (see docs/selectors.md); the others stay in the queue.
    #[arg(long, value_name = "EXPR")]
    pub selector: Option<String>,
}

impl ReceiveFlags {
    /// The receive request for `source`, settled as `ack` says.
    pub fn request(self, source: Source, ack: AckMode) -> Receive {
        Receive {
            source,
            order: self.order.into(),
            mode: if self.peek {
                ReceiveMode::Peek
            } else {
                ReceiveMode::Take
            },
            ack,
            wait_ms: self.wait,
            selector: self.selector.unwrap_or_default(),
        }
    }
}

/// Flags of `ferry recv`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["queue", "from"])))]
pub struct RecvArgs {
    /// Take from this queue.
    #[arg(long, short = 'q', value_name = "QUEUE")]
    queue: Option<String>,
    /// Take messages sent by this client, from any queue.
    #[arg(long, value_name = "SENDER")]
    from: Option<String>,
    #[command(flatten)]
    receive: ReceiveFlags,
    /// Take up to N messages; stops early when none arrives within --wait.
    #[arg(long, value_name = "N", default_value_t = 1)]
    count: u64,
    /// Print one JSON object per message per line.
    #[arg(long)]
    json: bool,
    /// Exit with status 3 when no message came (scripts can tell "no message" from success;
    /// without it, no message is success and prints nothing).
    #[arg(long)]
    require: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

/// The error of `recv --require` that found nothing: `main` exits with [`NoMessage::STATUS`].
#[derive(Debug)]
pub struct NoMessage;

impl NoMessage {
    /// The exit status for "no message".
    pub const STATUS: u8 = 3;
}

impl std::fmt::Display for NoMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no message")
    }
}

impl std::error::Error for NoMessage {}

/// Receives and prints up to `--count` messages. Prints nothing when there are none.
pub async fn run(args: RecvArgs) -> Result<()> {
    let source = match (args.queue, args.from) {
        (Some(q), _) => Source::Queue(q),
        (None, Some(s)) => Source::Sender(s),
        // clap's required group guarantees one of them.
        (None, None) => anyhow::bail!("give --queue or --from"),
    };
    let request = args.receive.request(source, AckMode::Client);
    let client = args.conn.connect().await?;
    let result = receive_loop(&client, request, args.count, args.json).await;
    // On error the unacked delivery (if any) returns to its queue with the session.
    let _ = client.disconnect().await;
    match result? {
        0 if args.require => Err(NoMessage.into()),
        _ => Ok(()),
    }
}

async fn receive_loop(
    client: &ferry_client::Client,
    request: Receive,
    count: u64,
    json: bool,
) -> Result<u64> {
    let peek = request.mode == ReceiveMode::Peek;
    let mut last_peeked = None;
    let mut printed = 0u64;
    while printed < count {
        let Some(delivery) = client.receive(request.clone()).await.map_err(explain)? else {
            break;
        };
        let message = &delivery.message;
        if peek {
            // Peeks leave the message in place, so the next peek returns it again.
            if last_peeked == Some(message.id) {
                break;
            }
            last_peeked = Some(message.id);
        }
        let text = if json {
            format!("{}\n", render::message_json(message))
        } else if printed == 0 {
            render::message_block(message, None)
        } else {
            format!("\n{}", render::message_block(message, None))
        };
        super::emit(&text)?;
        if delivery.delivery_id != 0 {
            client.ack(&[delivery.delivery_id]).await.map_err(explain)?;
        }
        printed += 1;
    }
    Ok(printed)
}
