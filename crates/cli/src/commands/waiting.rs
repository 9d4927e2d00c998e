//! `ferry waiting`: the queues holding messages addressed to this client.

use anyhow::Result;
use clap::Args;

use crate::connection::{explain, ConnArgs};

/// Flags of `ferry waiting`.
#[derive(Debug, Args)]
pub struct WaitingArgs {
    #[command(flatten)]
    conn: ConnArgs,
}

/// Prints one queue name per line. Only useful with `--name`: a generated name has no mail.
pub async fn run(args: WaitingArgs) -> Result<()> {
    let client = args.conn.connect().await?;
    let result = client.waiting_queues().await.map_err(explain);
    let _ = client.disconnect().await;
    let text: String = result?.iter().map(|name| format!("{name}\n")).collect();
    super::emit(&text)
}
