//! `ferry waiting`: the queues holding messages addressed to this client.

use anyhow::Result;
use clap::Args;

use crate::connection::{explain, ConnArgs};

/// Flags of `ferry waiting`.
#[derive(Debug, Args)]
pub struct WaitingArgs {
    /// Print a JSON array of queue names.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Prints one queue name per line (or a JSON array). Only useful with `--name`: a generated name has no mail.
pub async fn run(args: WaitingArgs) -> Result<()> {
    let client = args.conn.connect().await?;
    let result = client.waiting_queues().await.map_err(explain);
    let _ = client.disconnect().await;
    let queues = result?;
    if args.json {
        return super::emit(&format!("{}\n", serde_json::json!(queues)));
    }
    let text: String = queues.iter().map(|name| format!("{name}\n")).collect();
    super::emit(&text)
}
