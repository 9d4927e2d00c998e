//! `ferry-bench compare WORKLOAD --targets ferry,nats,...`: one workload against several
//! targets in one invocation. Every round runs each target once, in an order rotated per round
//! (round 1: a, b, c; round 2: b, c, a; ...), so that drift of a shared machine hits every
//! target alike; each figure is reported as the median over rounds with its ratio to Ferry
//! ([`crate::report::compare`]).
//!
//! For the `ferry` target a broker of the comparison's own is started ([`broker`]) unless
//! `--server` names one. Peers are found through the same per-target options as the single
//! workloads ([`crate::workloads::setup::driver`]), so a target gains compare support as soon
//! as it has a driver.
//!
//! Modules: [`args`], [`broker`].

pub mod args;
pub mod broker;

use std::collections::BTreeMap;

use anyhow::{bail, Result};

pub use args::{CompareArgs, CompareWorkload};
pub use broker::{BrokerLauncher, NoLauncher, OwnBroker};

use crate::args::TargetArg;
use crate::drivers::Target;
use crate::report::environment::Environment;
use crate::report::{self, compare, BenchReport, TargetResult};
use crate::workloads::{ftab, setup, Workload as _};

/// Runs the comparison, prints the table and writes the files asked for (the workload's
/// `--json`, `--csv` and `--report`).
pub async fn run(args: CompareArgs, launcher: &dyn BrokerLauncher) -> Result<()> {
    let environment = Environment::capture(args.workload.common());
    let mut report = measure(&args, launcher).await?;
    report.environment = Some(environment);
    let targets: Vec<String> = report.results.iter().map(|r| r.target.clone()).collect();
    let mut text = header(&report);
    if let Some(summary) = &report.compare {
        text.push_str(&compare::render(summary, &targets));
    }
    report::emit(&text)?;
    let common = args.workload.common();
    report::write_all(
        &report,
        common.json.as_deref(),
        common.csv.as_deref(),
        args.workload.html(),
    )?;
    report::check_failures(&report)
}

/// The targets in the order given, without repeats.
fn targets(args: &CompareArgs) -> Vec<TargetArg> {
    let mut out: Vec<TargetArg> = Vec::new();
    for t in &args.targets {
        if !out.contains(t) {
            out.push(*t);
        }
    }
    out
}

/// The order of round `round` (from 0): the targets rotated left by `round`.
pub fn round_order<T: Clone>(targets: &[T], round: usize) -> Vec<T> {
    let mut order = targets.to_vec();
    if !order.is_empty() {
        let n = round % order.len();
        order.rotate_left(n);
    }
    order
}

/// Runs the comparison and returns its report: per target the result of its median round
/// (by the headline rate), and the summary of every figure.
pub async fn measure(args: &CompareArgs, launcher: &dyn BrokerLauncher) -> Result<BenchReport> {
    let targets = targets(args);
    if targets.is_empty() {
        bail!("no targets: give --targets ferry,nats,amqp,postgres");
    }
    let mut workload = args.workload.clone();
    {
        let c = workload.common_mut();
        c.json = None;
        c.csv = None;
    }
    if let CompareWorkload::Fanout(a) = &workload {
        if a.pubsub.own_broker || a.pubsub.broker_pid.is_some() {
            bail!(
                "compare fanout measures the broker it starts (or --server): drop --own-broker and --broker-pid"
            );
        }
        if let Some(t) = targets
            .iter()
            .find(|t| !matches!(t, TargetArg::Ferry | TargetArg::Nats))
        {
            bail!(
                "compare fanout runs on the ferry and nats targets only: the {} driver has no topics",
                Target::from(*t).name()
            );
        }
    }
    // Every target must have a driver (and, for ftab, run the mix) before anything runs.
    for &t in &targets {
        let mut common = workload.common().clone();
        common.target = t;
        let driver = setup::driver(&common)?;
        if let CompareWorkload::Ftab(a) = &workload {
            if let Some(why) = ftab::archetype::refusal(a, driver.name(), &driver.capabilities()) {
                bail!("{why}");
            }
        }
    }
    let own = if targets.contains(&TargetArg::Ferry) && !args.server_given {
        let b = launcher.start().await?;
        eprintln!(
            "ferry-bench: started a broker for the comparison: {}",
            b.describe()
        );
        workload.common_mut().server = b.addr();
        Some(b)
    } else {
        None
    };
    let outcome = rounds(args.rounds, &targets, &mut workload).await;
    workload.common_mut().progress_round = None;
    if let Some(b) = own {
        b.stop().await;
    }
    let (params, per_round, order) = outcome?;

    let names: Vec<String> = targets
        .iter()
        .map(|&t| Target::from(t).name().to_string())
        .collect();
    let summary = compare::summarise(&names, &per_round, order);
    let results: Vec<TargetResult> = names
        .iter()
        .filter_map(|t| median_round(&per_round, t))
        .collect();
    let mut params = params;
    if let Some(p) = params.as_object_mut() {
        p.insert("targets".into(), serde_json::json!(names));
        p.insert("rounds".into(), args.rounds.into());
        p.insert("own_broker".into(), (!args.server_given).into());
    }
    Ok(BenchReport {
        environment: None,
        workload: format!("compare/{}", workload.name()),
        params,
        results,
        compare: Some(summary),
    })
}

type Rounds = (
    serde_json::Value,
    Vec<BTreeMap<String, TargetResult>>,
    Vec<Vec<String>>,
);

/// Runs every round; returns the workload's parameters, the results per round and target,
/// and the order of each round.
async fn rounds(n: u32, targets: &[TargetArg], workload: &mut CompareWorkload) -> Result<Rounds> {
    let mut params = serde_json::Value::Null;
    let mut per_round = Vec::new();
    let mut orders = Vec::new();
    for round in 0..n as usize {
        let order = round_order(targets, round);
        let mut results = BTreeMap::new();
        for &t in &order {
            let name = Target::from(t).name();
            if !workload.common().quiet {
                eprintln!(
                    "ferry-bench: round {}/{n}: {} on {name}",
                    round + 1,
                    workload.name()
                );
            }
            let common = workload.common_mut();
            common.target = t;
            common.progress_round = Some(format!("round {}/{n}", round + 1));
            let report = match &*workload {
                CompareWorkload::Throughput(a) => a.measure().await?,
                CompareWorkload::Latency(a) => a.measure().await?,
                CompareWorkload::Ftab(a) => a.measure().await?,
                CompareWorkload::Fanout(a) => a.measure().await?,
            };
            params = report.params;
            for r in report.results {
                results.insert(r.target.clone(), r);
            }
        }
        orders.push(
            order
                .iter()
                .map(|&t| Target::from(t).name().to_string())
                .collect(),
        );
        per_round.push(results);
    }
    Ok((params, per_round, orders))
}

/// The headline rate of a result: received per second where anything was received, else sent.
fn headline(r: &TargetResult) -> f64 {
    if r.received_per_s > 0.0 {
        r.received_per_s
    } else {
        r.sent_per_s
    }
}

/// The result of `target`'s median round by the headline rate.
fn median_round(
    per_round: &[BTreeMap<String, TargetResult>],
    target: &str,
) -> Option<TargetResult> {
    let mut rs: Vec<&TargetResult> = per_round.iter().filter_map(|r| r.get(target)).collect();
    rs.sort_by(|a, b| headline(a).total_cmp(&headline(b)));
    rs.get(rs.len().saturating_sub(1) / 2).map(|r| (*r).clone())
}

/// The description lines above the table.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let mut out = format!(
        "ferry-bench {}: targets {}, {} round(s) in rotated order; figures are medians over \
         rounds, ratios against ferry\n",
        report.workload,
        p["targets"]
            .as_array()
            .map(|a| a
                .iter()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
        p["rounds"],
    );
    for r in &report.results {
        out.push_str(&format!("  {}: {}\n", r.target, r.durability));
    }
    if let Some(n) = p["ferry_connections"].as_u64() {
        out.push_str(&format!(
            "  ferry: the ftab clients not found by name share {n} connection(s)\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_rotate() {
        let t = ["a", "b", "c"];
        assert_eq!(round_order(&t, 0), ["a", "b", "c"]);
        assert_eq!(round_order(&t, 1), ["b", "c", "a"]);
        assert_eq!(round_order(&t, 3), ["a", "b", "c"]);
        assert!(round_order::<u8>(&[], 2).is_empty());
    }
}
