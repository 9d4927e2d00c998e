//! `ferry serve`: runs the broker until SIGTERM or SIGINT.
//!
//! Settings come from defaults, then `--config FILE`, then `FERRY_*` environment variables, then
//! these flags. `--check-config` prints the resolved configuration and exits.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ferry_broker::{shutdown, Broker, BrokerConfig, ConfigLayer};
use tracing_subscriber::EnvFilter;

/// Flags of `ferry serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Data directory: the embedded store, its lock and runtime.toml [default: ferry-data]
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Storage engine: embedded, or a postgres://user@host/db URL [default: embedded]
    #[arg(long, value_name = "ENGINE")]
    pub store: Option<String>,
    /// This node's name among the nodes sharing a database; unique among live nodes
    /// [default: generated, <hostname>-<pid>-<random>]
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Milliseconds without a heartbeat after which a node counts as dead [default: 10000]
    #[arg(long, value_name = "MS")]
    pub node_timeout_ms: Option<u32>,
    /// Native protocol address [default: 127.0.0.1:6730]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// When the store fsyncs: always | interval:MS | never [default: always]
    #[arg(long, value_name = "POLICY")]
    pub fsync: Option<String>,
    /// Most concurrent connections [default: 1024]
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u32>,
    /// Largest message body in bytes [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<u32>,
    /// Client-ack lease in milliseconds [default: 60000]
    #[arg(long, value_name = "MS")]
    pub lease_ms: Option<u32>,
    /// Threads serving connections [default: one per core]
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Size at which the embedded store starts a new log segment, 64 KiB to 16 GiB
    /// [default: 67108864]
    #[arg(long, value_name = "BYTES")]
    pub segment_bytes: Option<u64>,
    /// Compacted segment files the embedded store keeps to reuse; 0 deletes them [default: 8]
    #[arg(long, value_name = "N")]
    pub spare_segments: Option<u32>,
    /// Seconds a client name holding nothing stays registered after its last session; 0 keeps
    /// names forever [default: 86400]
    #[arg(long, value_name = "SECS")]
    pub client_expiry_secs: Option<u64>,
    /// HTTP address of the management API, metrics, health checks and web console, or off
    /// [default: 127.0.0.1:6731]
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<String>,
    /// Allow --http-listen on an address that is not loopback (the API has no authentication
    /// yet)
    #[arg(long)]
    pub http_allow_remote: bool,
    /// Bytes queued for one client before its requests are no longer read [default: 8388608]
    #[arg(long, value_name = "BYTES")]
    pub max_outbound_bytes: Option<u64>,
    /// Bytes one connection's pending requests may hold before its requests are no longer read
    /// [default: 16777216]
    #[arg(long, value_name = "BYTES")]
    pub max_pending_bytes: Option<u64>,
    /// Milliseconds a client may leave its replies unread before it is disconnected
    /// [default: 30000]
    #[arg(long, value_name = "MS")]
    pub write_timeout_ms: Option<u32>,
    /// Milliseconds a frame may take to arrive once it has started [default: 30000]
    #[arg(long, value_name = "MS")]
    pub read_timeout_ms: Option<u32>,
    /// Milliseconds a new connection has to connect [default: 10000]
    #[arg(long, value_name = "MS")]
    pub handshake_timeout_ms: Option<u32>,
    /// Longest keep-alive interval granted, in milliseconds; a session silent for 1.5 of them
    /// is closed [default: 60000]
    #[arg(long, value_name = "MS")]
    pub keepalive_ms: Option<u32>,
    /// Most connections from one IP address; 0 for no limit [default: 0]
    #[arg(long, value_name = "N")]
    pub max_connections_per_address: Option<u32>,
    /// New client names one IP address may register per second; 0 for no limit [default: 100]
    #[arg(long, value_name = "N")]
    pub max_new_clients_per_sec: Option<u32>,
    /// Memory budget in bytes; above 80% publishers are slowed, at 100% refused
    /// [default: half the machine's memory]
    #[arg(long, value_name = "BYTES")]
    pub max_memory: Option<u64>,
    /// TOML configuration file
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Validate the configuration, print it and exit
    #[arg(long)]
    pub check_config: bool,
    /// Log format: text or json (log level from FERRY_LOG, default info)
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: String,
}

impl ServeArgs {
    fn layer(&self) -> ConfigLayer {
        ConfigLayer {
            listen: self.listen.clone(),
            data_dir: self.data_dir.clone(),
            fsync: self.fsync.clone(),
            store: self.store.clone(),
            max_connections: self.max_connections,
            max_body_bytes: self.max_body_bytes,
            lease_ms: self.lease_ms,
            node: self.node.clone(),
            node_timeout_ms: self.node_timeout_ms,
            workers: self.workers,
            segment_bytes: self.segment_bytes,
            spare_segments: self.spare_segments,
            client_expiry_secs: self.client_expiry_secs,
            http_listen: self.http_listen.clone(),
            http_allow_remote: self.http_allow_remote.then_some(true),
            max_outbound_bytes: self.max_outbound_bytes,
            max_pending_bytes: self.max_pending_bytes,
            write_timeout_ms: self.write_timeout_ms,
            read_timeout_ms: self.read_timeout_ms,
            handshake_timeout_ms: self.handshake_timeout_ms,
            keepalive_ms: self.keepalive_ms,
            max_connections_per_address: self.max_connections_per_address,
            max_new_clients_per_sec: self.max_new_clients_per_sec,
            max_memory: self.max_memory,
            ..ConfigLayer::default()
        }
    }
}

fn resolve(args: &ServeArgs) -> anyhow::Result<BrokerConfig> {
    let file = match &args.config {
        Some(path) => Some(ConfigLayer::from_file(path)?),
        None => None,
    };
    let env = ConfigLayer::from_env(std::env::vars())?;
    Ok(BrokerConfig::resolve(file.as_ref(), &env, &args.layer())?)
}

fn init_logs(format: &str) -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_env("FERRY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        "text" => builder.init(),
        "json" => builder.json().init(),
        other => anyhow::bail!("unknown log format '{other}': use text or json"),
    }
    Ok(())
}

/// Runs the broker until SIGTERM or SIGINT.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = resolve(&args)?;
    if args.check_config {
        print!("{}", config.to_toml());
        println!("# configuration is valid");
        return Ok(());
    }
    init_logs(&args.log_format)?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all().thread_name("ferry");
    if let Some(n) = config.workers {
        builder.worker_threads(n as usize);
    }
    let runtime = builder.build().context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let broker = Broker::start(config).await?;
        let http = broker.take_http_listener().map(|listener| {
            ferry_http::serve(
                listener,
                broker.management(),
                ferry_http::HttpLimits::default(),
            )
        });
        shutdown::signal().await;
        broker.shutdown().await?;
        if let Some(h) = http {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), h).await;
        }
        Ok(())
    })
}
