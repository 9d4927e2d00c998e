//! `ferry clients [--online]` (every registered client, online or not) and
//! `ferry client forget | disconnect NAME`, over the broker's HTTP API.

use std::fmt::Write as _;

use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::http_api::{segment, HttpArgs};
use crate::timestamp;

/// Flags of `ferry clients`.
#[derive(Debug, Args)]
pub struct ClientsArgs {
    /// Only the clients with a live session.
    #[arg(long)]
    online: bool,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    http: HttpArgs,
}

/// Flags of `ferry client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Debug, Subcommand)]
enum ClientCommand {
    /// Forget an offline client's registration (refused while it is online, while stored
    /// messages name it or while it owns a durable subscription).
    Forget {
        /// Client name.
        #[arg(value_name = "NAME")]
        name: String,
        #[command(flatten)]
        http: HttpArgs,
    },
    /// Close the client's session on the node serving the API (its unsettled deliveries go
    /// back to their queues).
    Disconnect {
        /// Client name.
        #[arg(value_name = "NAME")]
        name: String,
        #[command(flatten)]
        http: HttpArgs,
    },
}

/// The clients as a table.
fn table(clients: &[&Value]) -> String {
    let w = clients
        .iter()
        .filter_map(|c| c["name"].as_str())
        .map(str::len)
        .chain(std::iter::once(4))
        .max()
        .unwrap_or(4);
    let mut out = format!(
        "{:<w$}  {:<7}  {:<8}  {:<12}  {:<21}  {:<24}  {:>9}\n",
        "NAME", "STATE", "PROTOCOL", "NODE", "ADDRESS", "CONNECTED", "IN FLIGHT"
    );
    for c in clients {
        let connected = c["connected_at"]
            .as_u64()
            .map(timestamp::iso8601_utc)
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<w$}  {:<7}  {:<8}  {:<12}  {:<21}  {:<24}  {:>9}",
            c["name"].as_str().unwrap_or(""),
            if c["online"] == true {
                "online"
            } else {
                "offline"
            },
            c["protocol"].as_str().unwrap_or(""),
            c["node"].as_str().unwrap_or(""),
            c["address"].as_str().unwrap_or(""),
            connected,
            c["in_flight"]
                .as_u64()
                .map(|n| n.to_string())
                .unwrap_or_default(),
        );
    }
    out
}

/// Runs `ferry clients`.
pub async fn list(args: ClientsArgs) -> Result<()> {
    let v = args.http.get("/api/clients").await?;
    let all = super::field(&v, "/clients")
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown: Vec<&Value> = all
        .iter()
        .filter(|c| !args.online || c["online"] == true)
        .collect();
    if args.json {
        super::emit(&format!(
            "{}\n",
            Value::Array(shown.into_iter().cloned().collect())
        ))
    } else {
        let mut out = table(&shown);
        let _ = writeln!(
            out,
            "{} in system, {} online",
            super::field(&v, "/in_system"),
            super::field(&v, "/online")
        );
        super::emit(&out)
    }
}

/// Runs `ferry client ...`.
pub async fn run(args: ClientArgs) -> Result<()> {
    match args.command {
        ClientCommand::Forget { name, http } => {
            http.call(
                reqwest::Method::DELETE,
                &format!("/api/clients/{}", segment(&name)),
                None,
            )
            .await?;
            super::emit(&format!("forgot client '{name}'\n"))
        }
        ClientCommand::Disconnect { name, http } => {
            http.call(
                reqwest::Method::POST,
                &format!("/api/clients/{}/disconnect", segment(&name)),
                None,
            )
            .await?;
            super::emit(&format!("disconnected client '{name}'\n"))
        }
    }
}
