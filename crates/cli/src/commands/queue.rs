//! `ferry queue create | delete | list`.

use anyhow::Result;
use clap::{Args, Subcommand};
use ferry_protocol::QueueOptions;

use crate::connection::{explain, ConnArgs};
use crate::render;

/// Flags of `ferry queue`.
#[derive(Debug, Args)]
pub struct QueueArgs {
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Create a queue.
    Create {
        /// Queue name ([A-Za-z0-9._-]).
        #[arg(value_name = "NAME")]
        queue: String,
        /// A message whose client-ack delivery comes back (nack, lease expiry, disconnect)
        /// after N deliveries leaves the queue: to the dead-letter queue, or dropped without
        /// one. Default: unlimited.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_deliveries: Option<u32>,
        /// Where messages over --max-deliveries go, with their history in properties (an
        /// existing queue).
        #[arg(long, value_name = "NAME", requires = "max_deliveries")]
        dead_letter_queue: Option<String>,
        /// Where messages that expire here (send --ttl) go, with their history in properties
        /// (an existing queue). Default: expired messages are dropped.
        #[arg(long, value_name = "NAME")]
        expiry_queue: Option<String>,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Delete a queue.
    Delete {
        /// Queue name.
        #[arg(value_name = "NAME")]
        queue: String,
        /// Delete it even if it holds messages (they are dropped).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// List queues with their ready and in-flight message counts.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
}

/// Runs `ferry queue ...`.
pub async fn run(args: QueueArgs) -> Result<()> {
    match args.command {
        QueueCommand::Create {
            queue: name,
            max_deliveries,
            dead_letter_queue,
            expiry_queue,
            conn,
        } => {
            let options = QueueOptions {
                max_deliveries: max_deliveries.unwrap_or(0),
                dead_letter_queue,
                expiry_queue,
            };
            let client = conn.connect().await?;
            let result = client
                .create_queue_with(&name, options)
                .await
                .map_err(explain);
            let _ = client.disconnect().await;
            result?;
            super::emit(&format!("created queue '{name}'\n"))?;
        }
        QueueCommand::Delete {
            queue: name,
            force,
            conn,
        } => {
            let client = conn.connect().await?;
            let result = client.delete_queue(&name, force).await.map_err(explain);
            let _ = client.disconnect().await;
            result?;
            super::emit(&format!("deleted queue '{name}'\n"))?;
        }
        QueueCommand::List { json, conn } => {
            let client = conn.connect().await?;
            let result = client.list_queues().await.map_err(explain);
            let _ = client.disconnect().await;
            let mut queues = result?;
            queues.sort_by(|a, b| a.name.cmp(&b.name));
            if json {
                super::emit(&format!("{}\n", render::queue_list_json(&queues)))?;
            } else {
                super::emit(&render::queue_table(&queues))?;
            }
        }
    }
    Ok(())
}
