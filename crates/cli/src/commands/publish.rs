//! `ferry publish`: one message to every subscription of a topic.

use anyhow::Result;
use clap::Args;

use super::message::MessageArgs;
use crate::connection::{explain, ConnArgs};

/// Flags of `ferry publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The topic: the message goes to each of its subscriptions whose selector accepts it
    /// (to none when no subscription does).
    #[arg(long, short = 't', value_name = "TOPIC")]
    topic: String,
    #[command(flatten)]
    message: MessageArgs,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Publishes the message and prints its id.
pub async fn run(args: PublishArgs) -> Result<()> {
    // Everything that can fail locally is checked before connecting.
    let mut message = args.message.into_message()?;
    message.topic = Some(args.topic.into());
    let client = args.conn.connect().await?;
    let result = client.publish(message).await.map_err(explain);
    let _ = client.disconnect().await;
    super::emit(&format!("{}\n", result?))
}
