//! The `ferry-bench` binary: the benchmark harness of the `ferry-bench` crate on the command
//! line. It is a program of its own so that the broker's binary (`ferry`) links none of the
//! peers' client libraries (async-nats, lapin, tokio-postgres) nor the harness.
//!
//! This file names the subcommands; the workloads, drivers, statistics and reports live in the
//! library. [`own_broker`] is the in-process broker `compare` starts for the `ferry` target;
//! `fanout` and `selector --own-broker` run `ferry serve` as a child process, found by
//! [`ferry_binary`].

mod own_broker;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// mimalloc, as in the `ferry` binary: `compare` runs its `ferry` broker in this process, and
/// the broker's figures must not depend on which binary hosts it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Text after every `--help`: the exit codes and the environment.
const AFTER_HELP: &str = "\
Exit status: 0 on success, 1 when a run fails (a target cannot be reached, a driver refuses the
workload, a file cannot be written), 2 when the command line cannot be parsed.
Environment: FERRY_SERVER, FERRY_NAME, FERRY_NATS_URL, FERRY_AMQP_URL, FERRY_POSTGRES_URL
(where each target is), FERRY_WORKERS (the worker threads of a broker the harness starts),
FERRY_BIN (the ferry binary that --own-broker runs); for the ferry target FERRY_CA (TLS
trusting that CA), FERRY_USER and FERRY_PASSWORD (SCRAM), as the ferry CLI reads them. Method and figures: docs/benchmarks.md.";

/// `--target` of the pub/sub workloads, which run on Ferry and NATS only (the RabbitMQ and
/// PostgreSQL flags are left out of their help).
const PUBSUB_TARGETS: &str = "What to measure: ferry, or nats (core NATS with --persistent \
false, JetStream otherwise)";

/// Ferry's benchmark harness: Ferry and its peers (NATS JetStream, RabbitMQ, a PostgreSQL
/// queue) measured by the same workloads.
#[derive(Debug, Parser)]
#[command(name = "ferry-bench", version, after_help = AFTER_HELP)]
struct Cli {
    /// Threads of the load generator's runtime [default: one per core]. On a small machine
    /// shared with the broker, fewer threads leave more of the cores to the broker.
    #[arg(long, value_name = "N", global = true)]
    threads: Option<usize>,
    /// The `ferry` binary that `--own-broker` starts as `ferry serve` [default: `ferry` next
    /// to this program, else on the PATH].
    #[arg(long, value_name = "PATH", env = "FERRY_BIN", global = true)]
    ferry_bin: Option<PathBuf>,
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Debug, Subcommand)]
enum Workload {
    /// Producers and consumers on bench-<n> queues: messages per second and latency.
    #[command(after_help = AFTER_HELP)]
    Throughput(ferry_bench::ThroughputArgs),
    /// Open loop at a fixed rate: latency percentiles corrected for coordinated omission.
    #[command(after_help = AFTER_HELP)]
    Latency(ferry_bench::LatencyArgs),
    /// The FTaB client archetypes (Alice, Bob, Larry, Tola/Maruja, Carl/Rick) in any mix:
    /// per-operation response time and throughput.
    #[command(after_help = AFTER_HELP)]
    Ftab(ferry_bench::FtabArgs),
    /// One publisher on a topic, N subscriptions each consumed by its own consumer: published
    /// and delivered messages per second, end-to-end latency.
    #[command(
        after_help = AFTER_HELP,
        mut_arg("postgres_url", |a| a.hide(true)),
        mut_arg("postgres_sessions", |a| a.hide(true)),
        mut_arg("amqp_url", |a| a.hide(true)),
        mut_arg("nats_mode", |a| a.hide(true)),
        mut_arg("target", |a| a.hide_possible_values(true).help(PUBSUB_TARGETS))
    )]
    Fanout(ferry_bench::FanoutArgs),
    /// N subscriptions with selectors on message properties (or without): published and
    /// delivered messages per second and the broker's CPU time per message.
    #[command(
        after_help = AFTER_HELP,
        mut_arg("postgres_url", |a| a.hide(true)),
        mut_arg("postgres_sessions", |a| a.hide(true)),
        mut_arg("amqp_url", |a| a.hide(true)),
        mut_arg("nats_mode", |a| a.hide(true)),
        mut_arg("target", |a| a.hide_possible_values(true).help(PUBSUB_TARGETS))
    )]
    Selector(ferry_bench::SelectorArgs),
    /// A monitoring-record stream (Kieker's operation-execution records) over Ferry, a plain
    /// TCP stream, RabbitMQ, core NATS and Ferry's datagram ingest: records per second and
    /// per minute, and the loss rate.
    #[command(after_help = AFTER_HELP)]
    Stream(ferry_bench::StreamArgs),
    /// A SPECjms2007-like supply chain (not SPECjms2007 results): seven interactions at the
    /// spec's rates, the run rules' audit, --find-max for the largest BASE, --model.
    #[command(after_help = AFTER_HELP)]
    Specjms(ferry_bench::SpecjmsArgs),
    /// Requests and answers over an emulated slow link (network namespaces, tc netem; needs
    /// root) in four modes: total time, time per message and bytes on the wire per message.
    #[command(after_help = AFTER_HELP)]
    Slowlink(ferry_bench::SlowlinkArgs),
    /// The server end of slowlink, inside its namespace (run by slowlink).
    #[command(hide = true)]
    SlowlinkServe(ferry_bench::workloads::slowlink::ends::ServeEnd),
    /// The client end of slowlink, inside its namespace (run by slowlink).
    #[command(hide = true)]
    SlowlinkClient(ferry_bench::workloads::slowlink::ends::ClientEnd),
    /// Time to get a session (TCP, TLS with --ca, SCRAM with --user), one client at a time
    /// and --clients at once.
    #[command(after_help = AFTER_HELP)]
    Connect(ferry_bench::ConnectArgs),
    /// One workload against several targets in alternating rounds, with ratios to Ferry
    /// (starts a broker of its own for the ferry target unless --server is given).
    #[command(after_help = AFTER_HELP)]
    Compare(ferry_bench::CompareArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run_cli(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs a benchmark on a multi-threaded runtime.
fn run_cli(cli: Cli) -> Result<()> {
    use ferry_bench::workloads::{compare, run};
    let threads = cli.threads;
    let ferry = || Some(ferry_binary(cli.ferry_bin.clone()));
    match cli.workload {
        Workload::Throughput(a) => ferry_bench::block_on(threads, run(a)),
        Workload::Connect(a) => {
            ferry_bench::block_on(threads, ferry_bench::workloads::connect::run(a))
        }
        Workload::Latency(a) => ferry_bench::block_on(threads, run(a)),
        Workload::Ftab(a) => ferry_bench::block_on(threads, run(a)),
        Workload::Fanout(mut a) => {
            a.pubsub.ferry_binary = ferry();
            ferry_bench::block_on(threads, run(a))
        }
        Workload::Selector(mut a) => {
            a.pubsub.ferry_binary = ferry();
            ferry_bench::block_on(threads, run(a))
        }
        Workload::Stream(a) => ferry_bench::block_on(threads, run(a.with_common())),
        Workload::Slowlink(mut a) => {
            a.bench_binary = std::env::current_exe().ok();
            ferry_bench::block_on(threads, run(a.with_common()))
        }
        Workload::SlowlinkServe(end) => ferry_bench::block_on(threads, async move {
            ferry_bench::workloads::slowlink::ends::serve(&end).await
        }),
        Workload::SlowlinkClient(end) => ferry_bench::block_on(threads, async move {
            let outcome = ferry_bench::workloads::slowlink::ends::client(&end).await?;
            println!("{}", serde_json::to_string(&outcome)?);
            Ok(())
        }),
        Workload::Specjms(mut a) => {
            a.ferry_binary = ferry();
            ferry_bench::block_on(threads, run(a.with_common()))
        }
        Workload::Compare(mut a) => {
            a.server_given = server_given();
            let launcher = own_broker::InProcess {
                fsync: a.workload.common().broker_fsync.clone(),
            };
            ferry_bench::block_on(threads, compare::run(a, &launcher))
        }
    }
}

/// The `ferry` binary `--own-broker` runs: the one given (`--ferry-bin`, `FERRY_BIN`), else
/// `ferry` in this program's directory (cargo builds both into `target/<profile>/`, and a
/// release installs them side by side), else plain `ferry`, looked up on the PATH.
fn ferry_binary(given: Option<PathBuf>) -> PathBuf {
    let name = format!("ferry{}", std::env::consts::EXE_SUFFIX);
    given
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            let beside = exe.parent()?.join(&name);
            beside.is_file().then_some(beside)
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Whether the command line or the environment names a broker (`--server`, `FERRY_SERVER`):
/// clap's parsed value cannot tell a given address from the default.
fn server_given() -> bool {
    std::env::var_os("FERRY_SERVER").is_some()
        || std::env::args().any(|a| a == "--server" || a.starts_with("--server="))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_documented_shapes() {
        for line in [
            "ferry-bench throughput --producers 2 --consumers 2 --size 128 --queues 2 --in-flight 8 --batch 4 --duration 2s --persistent true --json /tmp/r.json",
            "ferry-bench throughput --messages 1000",
            "ferry-bench throughput --in-flight 16 --batch 64 --max-backlog 20000 --window 1s --cooldown 1s --csv /tmp/w.csv",
            "ferry-bench throughput --size 128 --in-flight 16 --batch 64 --prefetch 4000 --max-backlog 20000 --duration 10s",
            "ferry-bench throughput --target ferry --server 127.0.0.1:6731 --in-flight 16 --window 500ms --quiet",
            "ferry-bench latency --rate 5000 --duration 5s --warmup 1s --cooldown 1s --window 1s --json /tmp/l.json",
            "ferry-bench compare ftab --targets ferry,postgres --alice 50 --bob 50 --window 2s -q",
            "ferry-bench fanout --subscribers 8 --persistent false --durable --size 128 --batch 32 --in-flight 4 --duration 5s --ack auto",
            "ferry-bench fanout --subscribers 2 --own-broker --json /tmp/f.json",
            "ferry-bench --threads 1 fanout --own-broker --ferry-bin /usr/bin/ferry",
            "ferry-bench selector --subscriptions 100 --selectors false --broker-pid 42 --regions 1 --min-amount -1",
            "ferry-bench throughput --persistent false",
            "ferry-bench throughput --duration 1m30s --warmup 1.5s",
        ] {
            if let Err(e) = Cli::try_parse_from(line.split(' ')) {
                panic!("{line}: {e}");
            }
        }
    }

    #[test]
    fn rejects_bad_shapes() {
        for line in [
            "ferry-bench",
            "ferry-bench throughput --duration 2s --messages 5",
            "ferry-bench throughput --size 8",
            "ferry-bench throughput --window fast",
            "ferry-bench throughput --window 16",
            "ferry-bench throughput --duration 10",
            "ferry-bench latency --window 0s",
            "ferry-bench throughput --target kafka",
        ] {
            assert!(Cli::try_parse_from(line.split(' ')).is_err(), "{line}");
        }
    }

    /// The flags a subcommand's `--help` lists.
    fn listed(workload: &str) -> Vec<String> {
        let cmd = Cli::command();
        let sub = cmd.find_subcommand(workload).expect(workload);
        sub.get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect()
    }

    #[test]
    fn each_workload_lists_only_the_flags_it_takes() {
        for w in ["fanout", "selector"] {
            let flags = listed(w);
            for gone in ["postgres-url", "postgres-sessions", "amqp-url", "nats-mode"] {
                assert!(!flags.iter().any(|f| f == gone), "{w} lists --{gone}");
            }
            assert!(flags.iter().any(|f| f == "nats-url"), "{w}");
        }
        let stream = listed("stream");
        for gone in ["target", "postgres-url", "nats-mode", "cooldown", "name"] {
            assert!(!stream.iter().any(|f| f == gone), "stream lists --{gone}");
        }
        assert!(stream.iter().any(|f| f == "transports"));
        let specjms = listed("specjms");
        for gone in ["postgres-url", "postgres-sessions", "nats-mode", "cooldown"] {
            assert!(!specjms.iter().any(|f| f == gone), "specjms lists --{gone}");
        }
        for own in ["ramp", "calibrate", "model"] {
            assert!(specjms.iter().any(|f| f == own), "specjms lacks --{own}");
            for w in ["throughput", "fanout", "stream", "slowlink"] {
                assert!(!listed(w).iter().any(|f| f == own), "{w} lists --{own}");
            }
        }
        let slowlink = listed("slowlink");
        for gone in ["target", "server", "duration", "warmup"] {
            assert!(
                !slowlink.iter().any(|f| f == gone),
                "slowlink lists --{gone}"
            );
        }
        let throughput = listed("throughput");
        assert!(
            throughput.iter().any(|f| f == "postgres-url"),
            "throughput runs on every target"
        );
        let hidden: Vec<String> = Cli::command()
            .get_subcommands()
            .filter(|c| c.is_hide_set())
            .map(|c| c.get_name().to_string())
            .collect();
        assert_eq!(
            hidden,
            ["slowlink-serve", "slowlink-client"],
            "the ends are not listed"
        );
    }

    #[test]
    fn the_ferry_binary_given_wins() {
        assert_eq!(
            ferry_binary(Some(PathBuf::from("/opt/ferry/bin/ferry"))),
            PathBuf::from("/opt/ferry/bin/ferry")
        );
        // Under `cargo test` this program is target/<profile>/deps/ferry_bench-<hash>; no
        // `ferry` lies there, so the PATH is asked.
        let found = ferry_binary(None);
        assert!(found.ends_with(format!("ferry{}", std::env::consts::EXE_SUFFIX)));
    }
}
