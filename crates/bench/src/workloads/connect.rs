//! `connect`: how long a client takes to get a session (TCP connect, the TLS handshake when
//! asked, `Connect` with SCRAM-SHA-256 when a user is given), one at a time and all at once.
//!
//! Two phases against one broker: `--sequential N` connects one after the other (each closed
//! before the next), for the latency of one connect on an idle broker; then `--clients N`
//! clients start connecting at the same instant and stay connected until all are in, for how
//! long a crowd takes to get in. The figures are the connect times' percentiles and, for the
//! crowd, the time until the last one was in. The password comes from `FERRY_PASSWORD`. Its
//! JSON is its own (it names its `command`), not the harness's result schema.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ferry_client::{Client, ClientTls, ConnectOptions};
use hdrhistogram::Histogram;
use serde_json::json;

/// Flags of `ferry-bench connect`.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Ferry broker address.
    #[arg(
        long,
        value_name = "HOST:PORT",
        env = "FERRY_SERVER",
        default_value = "127.0.0.1:6730"
    )]
    pub server: String,
    /// User to authenticate as (SCRAM-SHA-256, password from FERRY_PASSWORD); none: anonymous.
    #[arg(long, value_name = "USER", env = "FERRY_USER")]
    pub user: Option<String>,
    /// Connect over TLS trusting this CA (PEM).
    #[arg(long, value_name = "FILE", env = "FERRY_CA")]
    pub ca: Option<PathBuf>,
    /// Connects one after the other.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub sequential: usize,
    /// Clients connecting at the same instant.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub clients: usize,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl ConnectArgs {
    fn options(&self, name: String) -> Result<ConnectOptions> {
        let mut o = ConnectOptions::new(self.server.clone(), name)
            .connect_timeout(Duration::from_secs(60))
            .ephemeral(true);
        if let Some(user) = &self.user {
            let pw = std::env::var("FERRY_PASSWORD")
                .context("--user needs the password in FERRY_PASSWORD")?;
            o = o.user(user.clone(), pw);
        }
        if let Some(ca) = &self.ca {
            o = o.tls(ClientTls {
                ca: Some(ca.clone()),
                ..ClientTls::default()
            });
        }
        Ok(o)
    }
}

fn summary(h: &Histogram<u64>) -> serde_json::Value {
    let ms = |us: u64| us as f64 / 1000.0;
    json!({
        "count": h.len(),
        "p50_ms": ms(h.value_at_quantile(0.5)),
        "p90_ms": ms(h.value_at_quantile(0.9)),
        "p99_ms": ms(h.value_at_quantile(0.99)),
        "max_ms": ms(h.max()),
    })
}

/// Runs both phases and prints (and writes) the figures.
pub async fn run(args: ConnectArgs) -> Result<()> {
    let base = format!("bench-connect-{}", std::process::id());
    let mut one = Histogram::<u64>::new(3)?;
    for i in 0..args.sequential {
        let opts = args.options(format!("{base}-s{i}"))?;
        let t = Instant::now();
        let c = Client::connect_with(opts)
            .await
            .with_context(|| format!("connect to {}", args.server))?;
        one.record(t.elapsed().as_micros() as u64)?;
        c.disconnect().await.ok();
    }
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(args.clients);
    for i in 0..args.clients {
        let opts = args.options(format!("{base}-c{i}"))?;
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let c = Client::connect_with(opts).await;
            (t.elapsed(), c)
        }));
    }
    let mut crowd = Histogram::<u64>::new(3)?;
    let mut clients = Vec::with_capacity(args.clients);
    let mut failed = Vec::new();
    for t in tasks {
        let (took, c) = t.await?;
        match c {
            Ok(c) => {
                crowd.record(took.as_micros() as u64)?;
                clients.push(c);
            }
            Err(e) => failed.push(e.to_string()),
        }
    }
    let all_in = start.elapsed();
    for c in &clients {
        c.disconnect().await.ok();
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let result = json!({
        "benchmark": "connect",
        "command": crate::report::environment::command_line().join(" "),
        "server": args.server,
        "tls": args.ca.is_some(),
        "user": args.user.is_some(),
        "sequential": summary(&one),
        "at_once": {
            "clients": args.clients,
            "connected": clients.len(),
            "failed": failed.len(),
            "first_failure": failed.first(),
            "all_in_ms": all_in.as_secs_f64() * 1000.0,
            "connect": summary(&crowd),
        },
        "load_average_after": load.trim(),
    });
    println!("{}", serde_json::to_string_pretty(&result)?);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("write {}", path.display()))?;
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} clients could not connect",
            failed.len(),
            args.clients
        );
    }
    Ok(())
}
