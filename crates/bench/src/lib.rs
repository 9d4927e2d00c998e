//! `ferry-bench`: Ferry's benchmark harness, a library and the `ferry-bench` binary
//! (`src/bin/ferry-bench`), apart from the broker's `ferry` binary.
//!
//! A workload (what load to generate and what to measure) runs against a target through a
//! [`drivers::Driver`], so the same workload can later measure NATS, RabbitMQ or PostgreSQL.
//!
//! Modules:
//! - [`args`]: flags every workload shares (`--duration`, `--warmup`, `--cooldown`, `--window`,
//!   `--target`, `--json`, `--csv`) and duration parsing (humantime's grammar);
//! - [`drivers`]: the `Driver` trait, target selection, the `ferry` driver;
//! - [`inproc`]: a Ferry broker in the harness's process (with the datagram ingest);
//! - [`payload`]: the bench message body (send timestamp and run id up front);
//! - [`stats`]: latency histograms, sample statistics with t-distribution confidence
//!   intervals, coordinated-omission correction, per-window series;
//! - [`workloads`]: `throughput`, `latency`, `ftab`, `fanout`, `selector`, `stream`, `specjms`,
//!   `slowlink` and `compare`, and the live progress line on standard error while one runs;
//! - [`report`]: the results as a terminal table, JSON (`schema/result.schema.json`), CSV and
//!   an HTML page of plots;
//! - [`round_robin`]: taking turns over a list.

pub mod args;
pub mod drivers;
pub mod inproc;
pub mod payload;
pub mod report;
pub mod round_robin;
pub mod scratch;
pub mod stats;
pub mod workloads;

pub use workloads::compare::CompareArgs;
pub use workloads::connect::ConnectArgs;
pub use workloads::fanout::FanoutArgs;
pub use workloads::ftab::FtabArgs;
pub use workloads::latency::LatencyArgs;
pub use workloads::selector::SelectorArgs;
pub use workloads::slowlink::SlowlinkArgs;
pub use workloads::specjms::SpecjmsArgs;
pub use workloads::stream::StreamArgs;
pub use workloads::throughput::ThroughputArgs;

/// Runs `fut` (a workload) on a multi-threaded runtime, so producers and consumers really run
/// in parallel as separate clients would; `threads` workers (`None`: one per core).
pub fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(
    threads: Option<usize>,
    fut: F,
) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(n) = threads {
        anyhow::ensure!(n > 0, "--threads must be at least 1");
        builder.worker_threads(n);
    }
    let runtime = builder.build()?;
    runtime.block_on(fut)
}

#[cfg(test)]
mod tests {
    #[test]
    fn block_on_runs_on_the_threads_asked_for() {
        for n in [1, 3] {
            super::block_on(Some(n), async move {
                let workers = tokio::runtime::Handle::current().metrics().num_workers();
                anyhow::ensure!(workers == n, "{workers} workers, asked for {n}");
                Ok(())
            })
            .unwrap();
        }
        let e = super::block_on(Some(0), async { Ok(()) }).unwrap_err();
        assert!(e.to_string().contains("--threads"), "{e}");
    }
}
