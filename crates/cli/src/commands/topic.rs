//! `ferry topic create | delete | list` and `ferry unsubscribe`.

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::connection::{explain, ConnArgs};
use crate::topic_table;

/// Flags of `ferry topic`.
#[derive(Debug, Args)]
pub struct TopicArgs {
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Debug, Subcommand)]
enum TopicCommand {
    /// Create a topic.
    Create {
        /// Topic name ([A-Za-z0-9._-]; topics and queues have separate names).
        #[arg(value_name = "NAME")]
        topic: String,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Delete a topic and all its subscriptions.
    Delete {
        /// Topic name.
        #[arg(value_name = "NAME")]
        topic: String,
        /// Delete it even if subscriptions hold messages (they are dropped).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// List topics with each subscription: durable, shared, selector, ready and in flight.
    /// Patterns that wildcard subscriptions name ('prices.>') are listed among the topics
    /// while they have subscriptions.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
}

/// Runs `ferry topic ...`.
pub async fn run(args: TopicArgs) -> Result<()> {
    match args.command {
        TopicCommand::Create { topic, conn } => {
            let client = conn.connect().await?;
            let result = client.create_topic(&topic).await.map_err(explain);
            let _ = client.disconnect().await;
            result?;
            super::emit(&format!("created topic '{topic}'\n"))
        }
        TopicCommand::Delete { topic, force, conn } => {
            let client = conn.connect().await?;
            let result = client.delete_topic(&topic, force).await.map_err(explain);
            let _ = client.disconnect().await;
            result?;
            super::emit(&format!("deleted topic '{topic}'\n"))
        }
        TopicCommand::List { json, conn } => {
            let client = conn.connect().await?;
            let result = client.list_topics().await.map_err(explain);
            let _ = client.disconnect().await;
            let mut topics = result?;
            // The broker sorts already; sorting here keeps the output stable whatever it does.
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            if json {
                super::emit(&format!("{}\n", topic_table::topic_list_json(&topics)))
            } else {
                super::emit(&topic_table::topic_table(&topics))
            }
        }
    }
}

/// Flags of `ferry unsubscribe`.
#[derive(Debug, Args)]
pub struct UnsubscribeArgs {
    /// The topic, or the pattern the subscription was made on.
    #[arg(long, short = 't', value_name = "TOPIC")]
    topic: String,
    /// The durable subscription to remove, with its backlog.
    #[arg(long, value_name = "NAME")]
    durable: String,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Removes a durable subscription and the messages it holds.
pub async fn unsubscribe(args: UnsubscribeArgs) -> Result<()> {
    let client = args.conn.connect().await?;
    let result = client
        .unsubscribe(&args.topic, &args.durable)
        .await
        .map_err(explain);
    let _ = client.disconnect().await;
    result?;
    super::emit(&format!(
        "unsubscribed '{}' from topic '{}'\n",
        args.durable, args.topic
    ))
}
