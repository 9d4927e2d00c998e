//! `ferry send`: one message to one or more queues, atomically.

use anyhow::Result;
use clap::Args;

use super::message::MessageArgs;
use crate::connection::{explain, ConnArgs};

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
    #[command(flatten)]
    message: MessageArgs,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Sends the message and prints its id.
pub async fn run(args: SendArgs) -> Result<()> {
    // Everything that can fail locally is checked before connecting.
    let mut message = args.message.into_message()?;
    message.queues = args.queues;
    let client = args.conn.connect().await?;
    let result = client.send(message).await.map_err(explain);
    let _ = client.disconnect().await;
    super::emit(&format!("{}\n", result?))
}
