//! `ferry serve`: runs the broker until SIGTERM or SIGINT.
//!
//! Settings come from defaults, then `--config FILE`, then `FERRY_*` environment variables, then
//! these flags. `--check-config` prints the resolved configuration and exits.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ferry_broker::{shutdown, Broker, BrokerConfig, ConfigLayer};
use ferry_udp::{BoundUdp, UdpConfig, UdpGateway};
use tracing_subscriber::EnvFilter;

/// Flags of `ferry serve`: one per broker setting (declared in
/// `ferry_broker::config::settings`), then the ones that are not settings.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The settings given on the command line.
    #[command(flatten)]
    pub settings: ConfigLayer,
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

fn resolve(args: &ServeArgs) -> anyhow::Result<BrokerConfig> {
    let file = match &args.config {
        Some(path) => Some(ConfigLayer::from_file(path)?),
        None => None,
    };
    let env = ConfigLayer::from_env(std::env::vars())?;
    Ok(BrokerConfig::resolve(file.as_ref(), &env, &args.settings)?)
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
        // Every listener is bound before any answers: the broker binds its own (native, HTTP,
        // STOMP) before serving, and the datagram ingest's socket is bound here, first, so
        // that an address it cannot have stops the start before a client could connect.
        let udp = config
            .udp_listen
            .clone()
            .map(|listen| {
                let mut udp = UdpConfig::new(listen, config.udp_topic.clone());
                udp.persistent = config.udp_persistent;
                udp.user = config.udp_user.clone();
                udp.receive_buffer =
                    usize::try_from(config.udp_receive_buffer).unwrap_or(usize::MAX);
                BoundUdp::bind(udp)
            })
            .transpose()?;
        let mut stomp_settings = ferry_stomp::Settings::from_config(&config);
        let http_limits = ferry_http::HttpLimits::from(&config.http);
        let broker = Broker::start(config).await?;
        stomp_settings.tls = broker.tls().cloned();
        // STOMP over TCP on its own listener, and over WebSocket at /stomp on the HTTP one.
        let stomp = broker
            .stomp_addr()
            .map(|_| ferry_stomp::Gateway::new(broker.sessions(), stomp_settings));
        let stomp_tcp = match (&stomp, broker.take_stomp_listener()) {
            (Some(gw), Some(listener)) => Some(gw.serve_tcp(listener)),
            _ => None,
        };
        let udp = match udp {
            Some(udp) => match UdpGateway::start_bound(&broker, udp).await {
                Ok(gateway) => Some(gateway),
                Err(e) => {
                    broker.shutdown().await?;
                    return Err(e.into());
                }
            },
            None => None,
        };
        let http = broker.take_http_listener().map(|listener| {
            let extra = stomp
                .clone()
                .map(ferry_stomp::websocket::router)
                .unwrap_or_default();
            ferry_http::serve_with(listener, broker.management(), http_limits, extra)
        });
        let reload = broker
            .tls()
            .cloned()
            .map(|tls| tokio::spawn(shutdown::reload_tls_on_hangup(tls)));
        shutdown::signal().await;
        if let Some(r) = reload {
            r.abort();
        }
        if let Some(gateway) = udp {
            gateway.stop().await;
        }
        broker.shutdown().await?;
        if let Some(h) = http {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), h).await;
        }
        if let Some(h) = stomp_tcp {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), h).await;
        }
        Ok(())
    })
}
