//! A Ferry broker inside the harness's process, on a runtime of its own (so that its work is
//! not scheduled among the load generator's tasks), on a free loopback port and a fresh data
//! directory, with the datagram ingest when asked: what `stream` measures when no `--server`
//! is given. Stopped gracefully and its data removed at the end.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, Result};
use ferry_broker::{Broker, BrokerConfig, RunningBroker};
use ferry_store::embedded::FsyncPolicy;
use ferry_udp::{UdpConfig, UdpGateway};

use crate::scratch::ScratchDir;

/// A running in-process broker.
pub struct InProcessBroker {
    runtime: Option<tokio::runtime::Runtime>,
    broker: Option<RunningBroker>,
    udp: Option<UdpGateway>,
    dir: PathBuf,
}

impl InProcessBroker {
    /// Starts a broker with default settings except the fsync policy `fsync` (and the worker
    /// threads `FERRY_WORKERS` names), with the datagram ingest on a free loopback port
    /// publishing to `udp_topic` when given.
    pub async fn start(fsync: &str, udp_topic: Option<&str>) -> Result<InProcessBroker> {
        // Removed on every way out: by `ScratchDir` until `me` owns it, then by `Drop`.
        let scratch = ScratchDir::new("ferry-bench-broker")?;
        let dir = scratch.path().to_path_buf();
        let workers = ferry_broker::ConfigLayer::from_env(std::env::vars())?.workers;
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.thread_name("ferry-broker").enable_all();
        if let Some(n) = workers {
            builder.worker_threads(n.max(1) as usize);
        }
        let runtime = builder.build()?;
        let fsync_policy = fsync
            .parse::<FsyncPolicy>()
            .map_err(|e| anyhow!("--broker-fsync {fsync}: {e}"))?;
        let config = BrokerConfig {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.clone(),
            workers,
            fsync: fsync_policy,
            // Nobody serves them here, and a fixed port would clash with any other broker.
            http_listen: ferry_broker::config::HTTP_OFF.into(),
            stomp_listen: ferry_broker::config::STOMP_OFF.into(),
            ..BrokerConfig::default()
        };
        let mut me = InProcessBroker {
            runtime: None,
            broker: None,
            udp: None,
            dir: scratch.release(),
        };
        match me.start_on(&runtime, config, udp_topic).await {
            Ok(()) => {
                me.runtime = Some(runtime);
                Ok(me)
            }
            Err(e) => {
                // Dropping a runtime blocks, which an async context must not do.
                runtime.shutdown_background();
                Err(e)
            }
        }
    }

    async fn start_on(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        config: BrokerConfig,
        udp_topic: Option<&str>,
    ) -> Result<()> {
        let me = self;
        let broker = runtime
            .spawn(Broker::start(config))
            .await
            .map_err(|e| anyhow!("broker start failed: {e}"))?
            .map_err(|e| anyhow!("cannot start a broker: {e}"))?;
        if let Some(topic) = udp_topic {
            let config = UdpConfig::new("127.0.0.1:0", Some(topic.to_string()));
            let (broker_back, gateway) = runtime
                .spawn(async move {
                    let g = UdpGateway::start(&broker, config).await;
                    (broker, g)
                })
                .await
                .map_err(|e| anyhow!("datagram ingest start failed: {e}"))?;
            me.broker = Some(broker_back);
            me.udp = Some(gateway.map_err(|e| anyhow!("{e}"))?);
        } else {
            me.broker = Some(broker);
        }
        Ok(())
    }

    /// The native protocol address.
    pub fn addr(&self) -> String {
        self.broker
            .as_ref()
            .map(|b| b.local_addr().to_string())
            .unwrap_or_default()
    }

    /// The datagram ingest's address, when it runs.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp.as_ref().map(UdpGateway::local_addr)
    }

    /// The broker's counters.
    pub fn stats(&self) -> Option<std::sync::Arc<ferry_broker::stats::Stats>> {
        self.broker.as_ref().map(RunningBroker::stats)
    }

    /// Stops the ingest and the broker, and removes the data.
    pub async fn stop(mut self) {
        if let Some(rt) = self.runtime.as_ref() {
            let udp = self.udp.take();
            let broker = self.broker.take();
            let _ = rt
                .spawn(async move {
                    if let Some(u) = udp {
                        u.stop().await;
                    }
                    if let Some(b) = broker {
                        let _ = b.shutdown().await;
                    }
                })
                .await;
        }
    }
}

impl Drop for InProcessBroker {
    fn drop(&mut self) {
        // A runtime may not be dropped (which blocks) inside another one's async context.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
