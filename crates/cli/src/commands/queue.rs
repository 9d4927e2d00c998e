//! `ferry queue create | delete | list` (native protocol) and `describe | purge | browse |
//! move` (the broker's HTTP management API).

use anyhow::Result;
use clap::{Args, Subcommand};
use ferry_protocol::QueueOptions;

use crate::connection::{explain, ConnArgs};
use crate::http_api::{query, segment, HttpArgs};
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
    /// Show a queue's figures, settings and rates, and the queues that use it as their
    /// dead-letter or expiry queue.
    Describe {
        /// Queue name (a subscription's queue is topic:name).
        #[arg(value_name = "NAME")]
        queue: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        http: HttpArgs,
    },
    /// Remove every ready and delayed message of a queue (in-flight ones settle as usual).
    Purge {
        /// Queue name.
        #[arg(value_name = "NAME")]
        queue: String,
        #[command(flatten)]
        http: HttpArgs,
    },
    /// Show a queue's ready messages without consuming them, a page at a time.
    Browse {
        /// Queue name.
        #[arg(value_name = "NAME")]
        queue: String,
        /// Priority order (highest first) or time order.
        #[arg(long, value_name = "ORDER", default_value = "priority", value_parser = ["priority", "time"])]
        order: String,
        /// Messages per page, 1 to 1000.
        #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// Only messages this JMS selector is TRUE for.
        #[arg(long, value_name = "EXPR")]
        selector: Option<String>,
        /// Start after the page that printed this cursor.
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        /// Every page to the end of the queue, not just one.
        #[arg(long)]
        all: bool,
        /// Print one JSON object per message per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        http: HttpArgs,
    },
    /// Move ready messages to another queue (--to), or each back to the queue it was
    /// dead-lettered or expired from (--to-origin: a redrive); they keep their id and history.
    Move {
        /// Queue to take them from.
        #[arg(value_name = "NAME")]
        queue: String,
        /// Target queue.
        #[arg(
            long,
            value_name = "QUEUE",
            required_unless_present = "to_origin",
            conflicts_with = "to_origin"
        )]
        to: Option<String>,
        /// Each message back to its ferry_original_queue.
        #[arg(long)]
        to_origin: bool,
        /// Only these messages (repeatable); default: from the head of the queue.
        #[arg(long = "id", value_name = "ID")]
        ids: Vec<u64>,
        /// Most messages moved without --id.
        #[arg(long, value_name = "N", default_value_t = 1000)]
        limit: u32,
        #[command(flatten)]
        http: HttpArgs,
    },
}

/// A browsed message as one table row.
fn browse_row(m: &serde_json::Value) -> String {
    let body = match &m["body"] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let body: String = body.chars().take(60).collect::<String>().replace('\n', " ");
    format!(
        "{:>10}  {:>4}  {:<24}  {:<12}  {:>10}  {}\n",
        // A JSON value prints without padding: numbers become text first.
        m["id"].to_string(),
        m["priority"].to_string(),
        m["sender"].as_str().unwrap_or(""),
        m["receiver"].as_str().unwrap_or(""),
        m["delivery_count"].to_string(),
        body
    )
}

async fn browse(
    http: &HttpArgs,
    queue: &str,
    params: &str,
    mut cursor: Option<String>,
    all: bool,
    json: bool,
) -> Result<()> {
    if !json {
        super::emit(&format!(
            "{:>10}  {:>4}  {:<24}  {:<12}  {:>10}  BODY\n",
            "ID", "PRIO", "SENDER", "TO", "DELIVERIES"
        ))?;
    }
    loop {
        let mut path = format!("/api/queues/{}/messages?{params}", segment(queue));
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", query(c)));
        }
        let page = http.get(&path).await?;
        let mut text = String::new();
        for m in super::field(&page, "/messages")
            .as_array()
            .into_iter()
            .flatten()
        {
            if json {
                text.push_str(&format!("{m}\n"));
            } else {
                text.push_str(&browse_row(m));
            }
        }
        super::emit(&text)?;
        cursor = super::field(&page, "/next").as_str().map(str::to_owned);
        match &cursor {
            Some(c) if !all => {
                if !json {
                    super::emit(&format!("more: --cursor {c}\n"))?;
                }
                return Ok(());
            }
            Some(_) => {}
            None => return Ok(()),
        }
    }
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
        QueueCommand::Describe { queue, json, http } => {
            let q = http
                .get(&format!("/api/queues/{}", segment(&queue)))
                .await?;
            if json {
                super::emit(&format!("{q}\n"))?;
            } else {
                super::emit(&describe_text(&q))?;
            }
        }
        QueueCommand::Purge { queue, http } => {
            let r = http
                .call(
                    reqwest::Method::POST,
                    &format!("/api/queues/{}/purge", segment(&queue)),
                    None,
                )
                .await?;
            super::emit(&format!(
                "purged {} messages from '{queue}'\n",
                super::field(&r, "/purged")
            ))?;
        }
        QueueCommand::Browse {
            queue,
            order,
            limit,
            selector,
            cursor,
            all,
            json,
            http,
        } => {
            let mut params = format!("order={order}&limit={limit}");
            if let Some(s) = selector {
                params.push_str(&format!("&selector={}", query(&s)));
            }
            browse(&http, &queue, &params, cursor, all, json).await?;
        }
        QueueCommand::Move {
            queue,
            to,
            to_origin,
            ids,
            limit,
            http,
        } => {
            let mut body = serde_json::Map::new();
            body.insert("limit".into(), serde_json::json!(limit));
            match to {
                Some(t) => body.insert("to".into(), serde_json::json!(t)),
                None => body.insert("to_origin".into(), serde_json::json!(to_origin)),
            };
            if !ids.is_empty() {
                body.insert("ids".into(), serde_json::json!(ids));
            }
            let body = serde_json::Value::Object(body);
            let r = http
                .call(
                    reqwest::Method::POST,
                    &format!("/api/queues/{}/move", segment(&queue)),
                    Some(body),
                )
                .await?;
            let moved = super::field(&r, "/moved").as_array().map_or(0, Vec::len);
            let mut text = format!("moved {moved} messages\n");
            for s in super::field(&r, "/skipped")
                .as_array()
                .into_iter()
                .flatten()
            {
                text.push_str(&format!(
                    "skipped {}: {}\n",
                    s["id"],
                    s["reason"].as_str().unwrap_or("")
                ));
            }
            super::emit(&text)?;
        }
    }
    Ok(())
}

/// A described queue as `label: value` lines.
fn describe_text(q: &serde_json::Value) -> String {
    let opt = |v: &serde_json::Value| v.as_str().unwrap_or("(none)").to_owned();
    let num = |v: &serde_json::Value| {
        v.as_f64()
            .map_or("-".to_owned(), |f| format!("{}", (f * 10.0).round() / 10.0))
    };
    let used_by: Vec<String> = q["used_by"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| {
            format!(
                "{} ({})",
                u["queue"].as_str().unwrap_or(""),
                u["as"].as_str().unwrap_or("")
            )
        })
        .collect();
    let rows = [
        ("queue", opt(&q["name"])),
        (
            "ready",
            format!("{} ({} bytes)", q["ready"], num(&q["ready_bytes"])),
        ),
        ("delayed", q["delayed"].to_string()),
        ("in flight", q["in_flight"].to_string()),
        (
            "oldest",
            q["oldest_age_secs"]
                .as_f64()
                .map_or("-".to_owned(), |a| format!("{a:.1} s ago")),
        ),
        (
            "rates",
            format!(
                "{} in/s, {} out/s (last minute)",
                num(&q["rate_in"]),
                num(&q["rate_out"])
            ),
        ),
        (
            "totals",
            format!(
                "{} entered, {} left",
                num(&q["entered_total"]),
                num(&q["left_total"])
            ),
        ),
        (
            "max deliveries",
            match q["max_deliveries"].as_u64() {
                Some(0) | None => "unlimited".to_owned(),
                Some(n) => n.to_string(),
            },
        ),
        ("dead letters", opt(&q["dead_letter_queue"])),
        ("expired", opt(&q["expiry_queue"])),
        (
            "consumers",
            q["consumers"].as_array().map_or(0, Vec::len).to_string(),
        ),
        (
            "used by",
            if used_by.is_empty() {
                "(none)".to_owned()
            } else {
                used_by.join(", ")
            },
        ),
    ];
    rows.iter()
        .map(|(k, v)| format!("{:<16}{v}\n", format!("{k}:")))
        .collect()
}
