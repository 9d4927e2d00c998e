//! `ferry status`: the node, version, uptime, connections, rates and store use, from the
//! broker's HTTP API.

use anyhow::Result;
use clap::Args;
use serde_json::Value;

use crate::http_api::HttpArgs;

/// Flags of `ferry status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print the overview as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    http: HttpArgs,
}

fn num(v: &Value) -> String {
    match v.as_f64() {
        None => "-".to_owned(),
        Some(f) if f.fract() == 0.0 => format!("{}", f as i64),
        Some(f) => format!("{f:.1}"),
    }
}

fn bytes(v: &Value) -> String {
    match v.as_u64() {
        None => "-".to_owned(),
        Some(n) if n < 1 << 20 => format!("{:.1} KiB", n as f64 / 1024.0),
        Some(n) if n < 1 << 30 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        Some(n) => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
    }
}

/// The overview as lines of `label: value`.
pub fn render(o: &Value) -> String {
    let s = &o["store"];
    let rows = [
        (
            "node",
            format!(
                "{} ({} engine)",
                o["node"].as_str().unwrap_or("-"),
                o["engine"].as_str().unwrap_or("-")
            ),
        ),
        ("version", o["version"].as_str().unwrap_or("-").to_owned()),
        (
            "uptime",
            format!(
                "{} s",
                num(&o["uptime_secs"]).split('.').next().unwrap_or("0")
            ),
        ),
        ("sessions", num(&o["sessions"])),
        (
            "clients",
            format!(
                "{} online, {} registered",
                num(super::field(o, "/clients/online")),
                num(super::field(o, "/clients/registered"))
            ),
        ),
        (
            "queues",
            format!(
                "{} ({} subscriptions)",
                num(&o["queues"]),
                num(&o["subscriptions"])
            ),
        ),
        (
            "messages",
            format!(
                "{} ready, {} delayed, {} in flight",
                num(super::field(o, "/messages/ready")),
                num(super::field(o, "/messages/delayed")),
                num(super::field(o, "/messages/in_flight"))
            ),
        ),
        (
            "rates",
            format!(
                "{} received/s, {} delivered/s, {} acked/s (last minute)",
                num(super::field(o, "/rates/received")),
                num(super::field(o, "/rates/delivered")),
                num(super::field(o, "/rates/acked"))
            ),
        ),
        (
            "store",
            format!(
                "log {} in {} segments, {} live; disk {} free of {}{}",
                bytes(&s["log_bytes"]),
                num(&s["segments"]),
                s["live_ratio"]
                    .as_f64()
                    .map_or("-".to_owned(), |r| format!("{:.0}%", r * 100.0)),
                bytes(&s["disk_free_bytes"]),
                bytes(&s["disk_total_bytes"]),
                if s["refusing_writes"] == true {
                    "; REFUSING WRITES"
                } else {
                    ""
                },
            ),
        ),
        (
            "memory",
            format!(
                "index {}, body cache {} ({} hits, {} read from the log)",
                bytes(&s["index_bytes"]),
                bytes(&s["body_cache_bytes"]),
                num(&s["body_cache_hits"]),
                num(&s["body_cache_misses"])
            ),
        ),
        (
            "dead letters",
            format!(
                "{} dead-lettered, {} expired, {} dropped (target gone)",
                num(&s["dead_lettered"]),
                num(&s["expired"]),
                num(&s["dropped_target_missing"])
            ),
        ),
    ];
    rows.iter()
        .map(|(k, v)| format!("{:<14}{v}\n", format!("{k}:")))
        .collect()
}

/// Runs `ferry status`.
pub async fn run(args: StatusArgs) -> Result<()> {
    let o = args.http.get("/api/overview").await?;
    if args.json {
        let mut o = o;
        if let Some(m) = o.as_object_mut() {
            m.remove("series");
        }
        super::emit(&format!("{o}\n"))
    } else {
        super::emit(&render(&o))
    }
}
