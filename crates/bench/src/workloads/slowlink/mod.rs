//! The `slowlink` workload (the MTS measurements): a client sends N requests, each a string,
//! a date, a float and an increasing sequence number, to a responder next to the broker that
//! checks their order and answers with the number, over an emulated link (network namespaces,
//! a veth pair, `tc netem`), in each [`ends::Mode`]. The report gives the total time, the time
//! per message and the bytes on the wire per message, split into payload, Ferry's protocol and
//! TCP/IP (from the interface's byte and packet counters).
//!
//! Root is needed (namespaces); without it, or without `ip`/`tc`, or without the kernel's
//! netem for a shaped link, the workload says why and stops before changing anything. The
//! namespaces are removed at the end, on Ctrl-C or SIGTERM (which also kill the two ends), and
//! (if a run was killed) by the next run.
//!
//! Modules: [`spec`] (the link's shape and presets), [`net`] (namespaces, veth, netem,
//! counters), [`emulator`] (the user-space link), [`ends`] (the two ends, run as `ferry-bench`
//! inside the namespaces).

pub mod emulator;
pub mod ends;
pub mod net;
pub mod spec;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::args::CommonArgs;
use crate::drivers::Capabilities;
use crate::report::{BenchReport, ErrorCounts, TargetResult};
use crate::scratch::ScratchDir;
use crate::stats::windows::measured_stats;
use crate::stats::LatencySummary;
use ends::{ClientOutcome, Mode, ANSWER_BYTES, REQUEST_BYTES};
use net::Link;
use spec::LinkSpec;

/// The server end's data directories: `<temp>/ferry-bench-slowlink-<pid>-<random>`.
pub const DATA_PREFIX: &str = "ferry-bench-slowlink";

/// Flags of `ferry-bench slowlink`.
#[derive(Debug, Clone, Args)]
pub struct SlowlinkArgs {
    /// The link: none (the bare veth pair), lan, wlan or gprs (40 kbit/s, 300 ms round trip).
    #[arg(long, default_value = "gprs", value_parser = ["none", "lan", "wlan", "gprs"])]
    pub link: String,
    /// Round trip in ms, instead of the preset's.
    #[arg(long, value_name = "MS")]
    pub rtt_ms: Option<f64>,
    /// Rate each way in kbit/s, instead of the preset's.
    #[arg(long, value_name = "KBIT")]
    pub rate_kbit: Option<f64>,
    /// Jitter each way in ms, instead of the preset's.
    #[arg(long, value_name = "MS")]
    pub jitter_ms: Option<f64>,
    /// Packet loss each way, percent.
    #[arg(long, value_name = "PCT")]
    pub loss_pct: Option<f64>,
    /// What shapes the link: auto (the kernel's netem when it has it, else user-space),
    /// netem, or user-space (TUN devices and this process).
    #[arg(long, value_enum, default_value_t = net::Shaper::Auto)]
    pub shaper: net::Shaper,
    /// The modes to run, in turn: per-call, sync, pipelined, bundled.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "per-call,sync,pipelined,bundled"
    )]
    pub modes: Vec<Mode>,
    /// Requests per mode.
    #[arg(long, default_value_t = 100)]
    pub messages: u64,
    /// Requests per batch (bundled).
    #[arg(long, default_value_t = 100)]
    pub bundle: u32,
    /// Requests (pipelined) or batches (bundled) in flight.
    #[arg(long, default_value_t = 64)]
    pub window: u32,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The `ferry-bench` binary that runs the two ends. Not a flag.
    #[arg(skip)]
    pub bench_binary: Option<PathBuf>,
    /// The shared flags, filled from the ones above. Not flags.
    #[arg(skip = CommonArgs::unset())]
    pub common: CommonArgs,
}

impl SlowlinkArgs {
    /// Fills [`SlowlinkArgs::common`] from the workload's own flags.
    pub fn with_common(mut self) -> Self {
        self.common.json = self.json.clone();
        self.common.quiet = self.quiet;
        self
    }

    /// The link asked for.
    pub fn link_spec(&self) -> LinkSpec {
        let mut l = LinkSpec::preset(&self.link).unwrap_or(LinkSpec {
            name: "none",
            rtt_ms: 0.0,
            jitter_ms: 0.0,
            rate_kbit: 0.0,
            loss_pct: 0.0,
        });
        let custom = self.rtt_ms.is_some()
            || self.rate_kbit.is_some()
            || self.jitter_ms.is_some()
            || self.loss_pct.is_some();
        l.rtt_ms = self.rtt_ms.unwrap_or(l.rtt_ms);
        l.rate_kbit = self.rate_kbit.unwrap_or(l.rate_kbit);
        l.jitter_ms = self.jitter_ms.unwrap_or(l.jitter_ms);
        l.loss_pct = self.loss_pct.unwrap_or(l.loss_pct);
        if custom {
            l.name = "custom";
        }
        l
    }
}

super::workload::impl_workload!(SlowlinkArgs, measure, header);

/// Why the workload cannot run here (see [`net::unavailable`]), for tests that skip.
pub fn unavailable(args: &SlowlinkArgs) -> Option<String> {
    net::unavailable(&args.link_spec(), args.shaper)
}

/// Makes the link, runs every mode, removes the link (also on Ctrl-C).
pub async fn measure(args: &SlowlinkArgs) -> Result<BenchReport> {
    let spec = args.link_spec();
    let bench = args
        .bench_binary
        .clone()
        .ok_or_else(|| anyhow!("slowlink needs the ferry-bench binary to run its two ends"))?;
    net::remove_stale();
    if let Some(why) = net::unavailable(&spec, args.shaper) {
        bail!("slowlink cannot run here: {why}");
    }
    let link = Link::make(&spec, args.shaper).context("making the emulated link")?;
    let (shaper, per_packet) = (link.shaper, link.header_bytes_per_packet);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("watching for SIGTERM")?;
    // On a signal the modes' future is dropped, which kills both ends (`kill_on_drop`).
    let outcome = tokio::select! {
        r = run_modes(args, &spec, &link, &bench) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted; the namespaces were removed")),
        _ = terminate.recv() => Err(anyhow!("terminated; the namespaces were removed")),
    };
    link.remove();
    let rows = outcome?;
    Ok(report(args, &spec, shaper, per_packet, rows))
}

/// One mode's figures.
#[derive(Debug, Clone)]
struct ModeRow {
    mode: Mode,
    outcome: ClientOutcome,
    tx_bytes: u64,
    rx_bytes: u64,
    packets: u64,
}

async fn run_modes(
    args: &SlowlinkArgs,
    spec: &LinkSpec,
    link: &Link,
    bench: &PathBuf,
) -> Result<Vec<ModeRow>> {
    let listen = format!("{}:6730", net::SERVER_ADDR);
    // Removed when this future ends or is dropped (on a signal), after the server end is
    // killed.
    let data = ScratchDir::new(DATA_PREFIX)?;
    let mut server = Command::new("ip")
        .args(["netns", "exec", &link.server_ns])
        .arg(bench)
        .args(["slowlink-serve", "--listen", &listen, "--data-dir"])
        .arg(data.path())
        .env("FERRY_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting the server end")?;
    let stdout = server
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no server output"))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
    if !matches!(ready, Ok(Ok(Some(ref l))) if l == "ready") {
        bail!("the server end did not start: {ready:?}");
    }
    let mut rows = Vec::new();
    for &mode in &args.modes {
        let (tx0, rx0, p0) = link.counters()?;
        let out = Command::new("ip")
            .args(["netns", "exec", &link.client_ns])
            .arg(bench)
            .arg("slowlink-client")
            .args([
                "--server",
                &listen,
                "--messages",
                &args.messages.to_string(),
            ])
            .args([
                "--bundle",
                &args.bundle.to_string(),
                "--window",
                &args.window.to_string(),
            ])
            .arg("--mode")
            .arg(serde_json::to_value(mode)?.as_str().unwrap_or("sync"))
            .stderr(Stdio::inherit())
            // Interrupted (SIGTERM, SIGINT sent to this process alone), `measure` drops this
            // future: the client end is killed with it rather than left running its calls.
            .kill_on_drop(true)
            .output()
            .await
            .context("running the client end")?;
        if !out.status.success() {
            bail!("the client end failed in mode {mode:?} ({})", out.status);
        }
        let outcome: ClientOutcome = serde_json::from_slice(&out.stdout)
            .map_err(|e| anyhow!("the client end's report: {e}"))?;
        // Let the last acknowledgements cross the link before reading the counters.
        tokio::time::sleep(Duration::from_millis((2.0 * spec.rtt_ms) as u64 + 50)).await;
        let (tx1, rx1, p1) = link.counters()?;
        if !args.quiet {
            eprintln!(
                "slowlink {:?}: {} messages in {:.3} s",
                mode, outcome.answers, outcome.total_s
            );
        }
        rows.push(ModeRow {
            mode,
            outcome,
            tx_bytes: tx1 - tx0,
            rx_bytes: rx1 - rx0,
            packets: p1 - p0,
        });
    }
    let _ = server.kill().await;
    drop(data);
    Ok(rows)
}

/// What the link's bandwidth and one round trip allow for the bytes sent: the busier
/// direction's bytes at the link's rate, plus a round trip (0 when the link is unshaped).
fn ideal_s(spec: &LinkSpec, tx: u64, rx: u64) -> Option<f64> {
    (spec.rate_kbit > 0.0)
        .then(|| tx.max(rx) as f64 * 8.0 / (spec.rate_kbit * 1000.0) + spec.rtt_ms / 1000.0)
}

fn report(
    args: &SlowlinkArgs,
    spec: &LinkSpec,
    shaper: &str,
    per_packet: u64,
    rows: Vec<ModeRow>,
) -> BenchReport {
    let n = args.messages.max(1) as f64;
    let modes: Vec<_> = rows
        .iter()
        .map(|r| {
            let wire = (r.tx_bytes + r.rx_bytes) as f64;
            let payload = (REQUEST_BYTES + ANSWER_BYTES) as f64 * n;
            let tcp_ip = (r.packets * per_packet) as f64;
            let ferry = (wire - payload - tcp_ip).max(0.0);
            let ideal = ideal_s(spec, r.tx_bytes, r.rx_bytes);
            json!({
                "mode": r.mode,
                "messages": args.messages,
                "answers": r.outcome.answers,
                "out_of_order": r.outcome.out_of_order,
                "total_s": r.outcome.total_s,
                "calls_s": r.outcome.calls_s,
                "per_message_ms": 1000.0 * r.outcome.total_s / n,
                "wire_bytes_per_message": wire / n,
                "payload_bytes_per_message": payload / n,
                "ferry_bytes_per_message": ferry / n,
                "tcp_ip_bytes_per_message": tcp_ip / n,
                "packets_per_message": r.packets as f64 / n,
                "bytes_sent": r.tx_bytes,
                "bytes_received": r.rx_bytes,
                "ideal_s": ideal,
                "over_ideal": ideal.map(|i| r.outcome.calls_s / i),
            })
        })
        .collect();
    let results = rows
        .iter()
        .map(|r| {
            let per_s = r.outcome.answers as f64 / r.outcome.total_s.max(1e-9);
            let none = LatencySummary::of(&crate::stats::new_histogram());
            TargetResult {
                target: "ferry".to_string(),
                durability: format!("non-persistent requests and answers, mode {:?}", r.mode),
                capabilities: Capabilities::ALL,
                send_secs: r.outcome.total_s,
                receive_secs: r.outcome.total_s,
                sent: args.messages,
                received: r.outcome.answers,
                sent_per_s: per_s,
                received_per_s: per_s,
                sent_mib_per_s: 0.0,
                latency_ms: none.clone(),
                latency_kind: "none".to_string(),
                latencies_ms: BTreeMap::from([("none".to_string(), none)]),
                window_s: r.outcome.total_s,
                window_stats: measured_stats(&[]),
                windows: Vec::new(),
                errors: ErrorCounts::default(),
                operations: BTreeMap::new(),
                percentile_curves_ms: BTreeMap::new(),
                broker_cpu: None,
                stream: None,
            }
        })
        .collect();
    BenchReport {
        workload: "slowlink".to_string(),
        environment: None,
        params: json!({
            "link": { "name": spec.name, "rtt_ms": spec.rtt_ms, "rate_kbit": spec.rate_kbit, "jitter_ms": spec.jitter_ms, "loss_pct": spec.loss_pct },
            "messages": args.messages,
            "bundle": args.bundle,
            "window": args.window,
            "request_bytes": REQUEST_BYTES,
            "answer_bytes": ANSWER_BYTES,
            "shaper": shaper,
            "header_bytes_per_packet": per_packet,
            "slowlink": { "modes": modes },
        }),
        results,
        compare: None,
    }
}

/// The MTS-style table: per mode, total time, time per message and bytes per message.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let l = &p["link"];
    let mut out = format!(
        "ferry-bench slowlink: link {} (round trip {} ms, {} kbit/s each way, shaped by {}), {} requests of {} B, answers of {} B\n\
         {:<10} {:>9} {:>9} {:>12} {:>11} {:>9} {:>9} {:>9} {:>10}\n",
        l["name"].as_str().unwrap_or("?"),
        l["rtt_ms"],
        l["rate_kbit"],
        p["shaper"].as_str().unwrap_or("?"),
        p["messages"],
        p["request_bytes"],
        p["answer_bytes"],
        "mode", "total s", "calls s", "ms/message", "wire B/msg", "payload", "ferry", "TCP/IP", "x ideal"
    );
    let modes = p.get("slowlink").and_then(|s| s.get("modes"));
    for m in modes.and_then(|m| m.as_array()).into_iter().flatten() {
        out.push_str(&format!(
            "{:<10} {:>9.3} {:>9.3} {:>12.3} {:>11.1} {:>9.1} {:>9.1} {:>9.1} {:>10}\n",
            m["mode"].as_str().unwrap_or("?"),
            m["total_s"].as_f64().unwrap_or(0.0),
            m["calls_s"].as_f64().unwrap_or(0.0),
            m["per_message_ms"].as_f64().unwrap_or(0.0),
            m["wire_bytes_per_message"].as_f64().unwrap_or(0.0),
            m["payload_bytes_per_message"].as_f64().unwrap_or(0.0),
            m["ferry_bytes_per_message"].as_f64().unwrap_or(0.0),
            m["tcp_ip_bytes_per_message"].as_f64().unwrap_or(0.0),
            m["over_ideal"]
                .as_f64()
                .map_or("-".to_string(), |x| format!("{x:.2}")),
        ));
    }
    out
}
