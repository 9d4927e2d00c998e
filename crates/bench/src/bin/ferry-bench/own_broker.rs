//! The broker `ferry-bench compare` starts for the `ferry` target: `ferry_broker::Broker` with
//! default settings (embedded store) but the fsync policy `--broker-fsync` names (default
//! `always`, the broker's own) and the worker threads `FERRY_WORKERS` names, on a loopback port of its own and a fresh
//! data directory under the system's temporary directory, on a runtime of its own (two worker
//! threads) so that its work is not scheduled among the load generator's tasks; stopped
//! gracefully and its data removed at the end.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use ferry_bench::scratch::ScratchDir;
use ferry_bench::workloads::compare::broker::{BoxFuture, BrokerLauncher, OwnBroker};
use ferry_broker::{Broker, BrokerConfig, RunningBroker};
use ferry_store::embedded::FsyncPolicy;

/// Starts brokers in this process, with the fsync policy `fsync`.
pub struct InProcess {
    /// `always`, `interval:MS` or `never`.
    pub fsync: String,
}

impl BrokerLauncher for InProcess {
    fn start(&self) -> BoxFuture<'_, Result<Box<dyn OwnBroker>>> {
        Box::pin(async {
            // Removed on every way out: by `ScratchDir` until `Running` owns it, then by `Drop`.
            let scratch = ScratchDir::new("ferry-bench-compare")?;
            let dir = scratch.path().to_path_buf();
            // Default settings, except the number of workers, which FERRY_WORKERS sets as it
            // does for `ferry serve`.
            let workers = ferry_broker::ConfigLayer::from_env(std::env::vars())?.workers;
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.thread_name("ferry-broker").enable_all();
            if let Some(n) = workers {
                builder.worker_threads(n.max(1) as usize);
            }
            let runtime = builder.build()?;
            let fsync = self
                .fsync
                .parse::<FsyncPolicy>()
                .map_err(|e| anyhow!("--broker-fsync {}: {e}", self.fsync))?;
            let config = BrokerConfig {
                listen: "127.0.0.1:0".into(),
                data_dir: dir.clone(),
                workers,
                fsync,
                http_listen: ferry_broker::config::HTTP_OFF.into(),
                stomp_listen: ferry_broker::config::STOMP_OFF.into(),
                ..BrokerConfig::default()
            };
            let broker = runtime
                .spawn(Broker::start(config))
                .await
                .map_err(|e| anyhow!("broker start failed: {e}"))?
                .map_err(|e| anyhow!("cannot start a broker: {e}"))?;
            Ok(Box::new(Running {
                runtime: Some(runtime),
                broker: Some(broker),
                dir: scratch.release(),
                fsync: self.fsync.clone(),
            }) as Box<dyn OwnBroker>)
        })
    }
}

struct Running {
    runtime: Option<tokio::runtime::Runtime>,
    broker: Option<RunningBroker>,
    dir: PathBuf,
    fsync: String,
}

impl OwnBroker for Running {
    fn addr(&self) -> String {
        self.broker
            .as_ref()
            .map(|b| b.local_addr().to_string())
            .unwrap_or_default()
    }

    fn describe(&self) -> String {
        format!(
            "in-process, default settings (fsync {}), listening on {}, data in {}",
            self.fsync,
            self.addr(),
            self.dir.display()
        )
    }

    fn stop(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if let (Some(rt), Some(b)) = (self.runtime.as_ref(), self.broker.take()) {
                let _ = rt.spawn(b.shutdown()).await;
            }
            // Dropping `self` shuts the runtime down in the background and removes the data.
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A runtime may not be dropped (which blocks) inside another one's async context.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
