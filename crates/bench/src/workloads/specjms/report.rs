//! The run's report: the figures of the largest passing run, every run's audit, and the
//! capacity model's predictions beside the measurements (in the JSON's `params.specjms`, and
//! as the lines printed above the figures).

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use serde_json::{json, Map, Value};

use super::capacity::{Calibration, Model, Prediction, ResourceKind};
use super::spec::{Interaction, MessageType};
use super::topology::Topology;
use super::{topology, SpecjmsArgs, Trial};
use crate::report::BenchReport;

/// The largest BASE the model's search considers.
const BASE_CEILING: u32 = 100_000;

/// Whether a message of type `t` waits for the log's fsync before it can be delivered: it is
/// persistent, or sent in a transaction (whose commit is written to the log).
pub fn committed(t: MessageType, transactions: bool) -> bool {
    let s = t.spec();
    s.persistent || transactions && s.transactional
}

/// The runs the model is fitted on, and which they are: the `--calibrate` runs; else the runs
/// that passed, when at least two did; else every run.
fn calibration_runs(trials: &[Trial]) -> (Vec<Calibration>, &'static str) {
    let of = |keep: &dyn Fn(&Trial) -> bool| -> Vec<Calibration> {
        trials
            .iter()
            .filter(|t| keep(t))
            .filter_map(|t| t.calibration)
            .collect()
    };
    let explicit = of(&|t| t.calibration_run);
    if !explicit.is_empty() {
        return (explicit, "the --calibrate runs");
    }
    let passed = of(&|t| t.audit.passed);
    if passed.len() >= 2 {
        (passed, "the runs that passed")
    } else {
        (of(&|_| true), "every run")
    }
}

/// The mean delivery time the model predicts for interaction `label` ("<n> <name>"): its
/// message types weighted by the topology's mix.
fn predicted_delivery_ms(label: &str, p: &Prediction, topo: &Topology, tx: bool) -> Option<f64> {
    let i = Interaction::ALL
        .into_iter()
        .find(|i| label == format!("{} {}", i.number(), i.name()))?;
    let mix = topo.model();
    let (mut sum, mut weight) = (0.0, 0.0);
    for t in MessageType::ALL
        .into_iter()
        .filter(|t| t.spec().interaction == i)
    {
        let w = mix.get(&t).copied().unwrap_or(0.0);
        sum += w * p.delivery_ms(committed(t, tx));
        weight += w;
    }
    (weight > 0.0).then(|| sum / weight)
}

/// Busy time per second of each resource, keyed by its JSON name.
fn by_resource(values: impl Iterator<Item = (ResourceKind, f64)>) -> Value {
    let map: Map<String, Value> = values.map(|(k, v)| (resource_key(k), json!(v))).collect();
    Value::Object(map)
}

fn resource_key(k: ResourceKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The report: the largest passing run's figures (or the last run's), every trial's verdict,
/// the model's predictions beside the measurements.
pub(super) fn report(args: &SpecjmsArgs, trials: Vec<Trial>) -> Result<BenchReport> {
    let best_trial = trials
        .iter()
        .filter(|t| t.audit.passed)
        .max_by_key(|t| t.base)
        .or_else(|| trials.last())
        .ok_or_else(|| anyhow!("no trial ran"))?;
    let largest_passing = trials
        .iter()
        .filter(|t| t.audit.passed)
        .map(|t| t.base)
        .max();
    let (runs, source) = calibration_runs(&trials);
    let model = if args.model { Model::fit(&runs) } else { None };
    let rate_of = |b: u32| topology(args, b).map_or(f64::INFINITY, |t| t.messages_per_s());
    let trial_rows: Vec<_> = trials
        .iter()
        .map(|t| {
            let topo = topology(args, t.base).ok();
            let predicted = model
                .as_ref()
                .zip(topo.as_ref())
                .map(|(m, topo)| m.predict(topo.messages_per_s()));
            let measured_u = t.calibration.zip(model.as_ref()).map(|(c, m)| {
                by_resource(m.resources.iter().filter_map(|r| {
                    c.busy(r.kind).map(|b| (r.kind, b / r.limit.max(1e-12)))
                }))
            });
            json!({
                "base": t.base,
                "calibration_run": t.calibration_run,
                "passed": t.audit.passed,
                "rules": t.audit.rules,
                "received_per_s": t.result.received_per_s,
                "broker_cpu_utilization": t.broker_cpu_utilization,
                "measured_utilization": measured_u,
                "predicted_utilization": predicted.as_ref().map(|p| by_resource(p.utilization.iter().copied())),
                "calibration": t.calibration,
                "interactions": t.input.interactions.iter().zip(&t.pacing).map(|(i, pacing)| {
                    let predicted_ms = predicted.as_ref().zip(topo.as_ref()).and_then(|(p, topo)| {
                        predicted_delivery_ms(&i.interaction, p, topo, args.transactions)
                    });
                    json!({
                        "interaction": i.interaction,
                        "configured_per_s": i.configured_per_s,
                        "measured_per_s": i.measured_per_s,
                        "starts": i.starts,
                        "pacing_misses": i.pacing_misses,
                        "pacing_misses_by_phase": pacing.misses_by_phase,
                        "start_mean_ms_by_phase": pacing.mean_ms_by_phase,
                        "model_messages": i.model_messages,
                        "messages": i.messages,
                        "delivery_mean_ms": i.delivery_mean_ms,
                        "predicted_delivery_mean_ms": predicted_ms,
                    })
                }).collect::<Vec<_>>(),
                "destinations": t.input.destinations_p90_ms.len(),
                "worst_p90_ms": t.input.destinations_p90_ms.iter().map(|(_, p)| *p).fold(0.0, f64::max),
                "receipts_owed": t.input.receipts_owed,
                "receipts": t.input.receipts,
                "start_connections": t.start_connections,
            })
        })
        .collect();
    let model_json = model.as_ref().map(|m| {
        let max_base = m.max_base(rate_of, BASE_CEILING);
        let searched_max = trials
            .iter()
            .filter(|t| !t.calibration_run && t.audit.passed)
            .map(|t| t.base)
            .max()
            .filter(|_| args.find_max);
        json!({
            "calibrated_on_bases": m.calibrated_on,
            "calibrated_on": source,
            "resources": m.resources.iter().map(|r| json!({
                "resource": resource_key(r.kind),
                "fixed": r.demand.fixed,
                "per_message_us": r.demand.per_message * 1e6,
                "limit": r.limit,
                "max_messages_per_s": r.max_rate(),
            })).collect::<Vec<_>>(),
            "bottleneck": m.bottleneck().map(|r| resource_key(r.kind)),
            "fsync_ms": m.fsync_s * 1e3,
            "other_processes_cores": m.others_cores,
            "disk_bytes_per_message": m.disk_bytes.map(|l| l.per_message),
            "fsyncs_per_message": m.flushes.map(|l| l.per_message),
            "fsyncs_per_commit": m.fsyncs_per_commit,
            "predicted_max_base": max_base,
            "predicted_max_base_exact": m.max_base_exact(rate_of, BASE_CEILING),
            "predicted_max_messages_per_s": m.max_messages_per_s(),
            "measured_max_base": searched_max,
            "max_base_error": searched_max.map(|b| f64::from(max_base) / f64::from(b) - 1.0),
        })
    });
    let mut result = best_trial.result.clone();
    result.operations = BTreeMap::new();
    let topo = topology(args, best_trial.base)?;
    Ok(BenchReport {
        workload: "specjms".to_string(),
        environment: None,
        params: json!({
            "name": "specjms2007-like (not SPECjms2007 results)",
            "topology": topo.name,
            "base": args.base,
            "layout": format!("{:?}", args.layout).to_lowercase(),
            "cfo": format!("{:?}", args.cfo).to_lowercase(),
            "transactions": args.transactions,
            "interactions": args.interactions,
            "find_max": args.find_max,
            "calibrate": args.calibrate,
            "pool": args.pool,
            "start_connections": args.start_connections,
            "duration_s": args.duration.as_secs_f64(),
            "ramp_s": args.ramp.as_secs_f64(),
            "warmup_s": args.warmup.as_secs_f64(),
            "drain_s": args.drain.as_secs_f64(),
            "window_s": args.window.as_secs_f64(),
            "locations": { "sm": topo.sm, "dc": topo.dc, "sp": topo.sp, "hq": topo.hq, "families": topo.families },
            "messages_per_s_model": topo.messages_per_s(),
            "specjms": {
                "largest_passing_base": largest_passing,
                "reported_base": best_trial.base,
                "trials": trial_rows,
                "model": model_json,
            },
        }),
        results: vec![result],
        compare: None,
    })
}

/// `{"broker_cpu": 0.2, ...}` as "broker_cpu 20.0%, ...".
fn percents(v: &Value) -> String {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, u)| {
            format!(
                "{} {:.1}%",
                k.replace('_', " "),
                100.0 * u.as_f64().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lines above the figures: the audit of each run and the model.
pub fn header(report: &BenchReport) -> String {
    let p = &report.params;
    let s = &p["specjms"];
    let mut out = format!(
        "ferry-bench specjms ({}): specjms2007-like, {} topology, layout {}, calls for offers {}, \
         transactions {}; {} s measured after a {} s ramp and {} s warm-up\n",
        report.results.first().map_or("?", |r| r.target.as_str()),
        p["topology"].as_str().unwrap_or("?"),
        p["layout"].as_str().unwrap_or("?"),
        p["cfo"].as_str().unwrap_or("?"),
        p["transactions"],
        p["duration_s"],
        p["ramp_s"],
        p["warmup_s"],
    );
    for t in s["trials"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "BASE {}{}: {} ({:.0} messages/s received; {} of {} receipts after the drain; worst p90 {:.1} ms)\n",
            t["base"],
            if t["calibration_run"] == true { " (calibration)" } else { "" },
            if t["passed"] == true { "PASSED" } else { "FAILED" },
            t["received_per_s"].as_f64().unwrap_or(0.0),
            t["receipts"],
            t["receipts_owed"],
            t["worst_p90_ms"].as_f64().unwrap_or(0.0),
        ));
        for r in t["rules"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {:<15} {}  {}\n",
                r["rule"].as_str().unwrap_or("?"),
                if r["passed"] == true { "pass" } else { "FAIL" },
                r["reason"].as_str().unwrap_or("")
            ));
        }
        let modelled = !t["predicted_utilization"].is_null();
        out.push_str("  interaction               starts/s  configured  messages   model  misses  delivery ms");
        out.push_str(if modelled { "  predicted ms\n" } else { "\n" });
        for i in t["interactions"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {:<24} {:>9.2} {:>11.2} {:>9} {:>7.0} {:>7} {:>12.2}",
                i["interaction"].as_str().unwrap_or("?"),
                i["measured_per_s"].as_f64().unwrap_or(0.0),
                i["configured_per_s"].as_f64().unwrap_or(0.0),
                i["messages"],
                i["model_messages"].as_f64().unwrap_or(0.0),
                i["pacing_misses"],
                i["delivery_mean_ms"].as_f64().unwrap_or(0.0),
            ));
            match i["predicted_delivery_mean_ms"].as_f64() {
                Some(v) => out.push_str(&format!(" {v:>13.2}\n")),
                None => out.push('\n'),
            }
        }
        let mut late = BTreeMap::<String, u64>::new();
        for i in t["interactions"].as_array().into_iter().flatten() {
            for (phase, n) in i["pacing_misses_by_phase"]
                .as_object()
                .into_iter()
                .flatten()
            {
                *late.entry(phase.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
        if late.values().any(|n| *n > 0) {
            let by: Vec<String> = late.iter().map(|(p, n)| format!("{p} {n}")).collect();
            out.push_str(&format!(
                "  late starts by where their time went: {}\n",
                by.join(", ")
            ));
        }
        if modelled {
            out.push_str(&format!(
                "  utilization: measured {}; model {}\n",
                percents(&t["measured_utilization"]),
                percents(&t["predicted_utilization"]),
            ));
        } else if let Some(u) = t["broker_cpu_utilization"].as_f64() {
            out.push_str(&format!("  broker CPU utilization: {:.1}%\n", 100.0 * u));
        }
    }
    if let Some(b) = s["largest_passing_base"].as_u64() {
        out.push_str(&format!("largest BASE that passed: {b}\n"));
    }
    if let Some(m) = s["model"].as_object() {
        let bases: Vec<String> = m["calibrated_on_bases"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| format!("{}", b.as_f64().unwrap_or(0.0)))
            .collect();
        out.push_str(&format!(
            "model, fitted on BASE {} ({}): busy time per second = fixed + demand x messages/s\n",
            bases.join(", "),
            m["calibrated_on"].as_str().unwrap_or("?"),
        ));
        for r in m["resources"].as_array().into_iter().flatten() {
            // JSON has no infinity: a resource that never saturates has null.
            let saturates = r["max_messages_per_s"]
                .as_f64()
                .map_or("never saturates".to_string(), |x| {
                    format!("saturates at {x:.0} messages/s")
                });
            out.push_str(&format!(
                "  {:<10} {:.3} + {:.1} µs a message; limit {:.2}; {saturates}\n",
                r["resource"].as_str().unwrap_or("?").replace('_', " "),
                r["fixed"].as_f64().unwrap_or(0.0),
                r["per_message_us"].as_f64().unwrap_or(0.0),
                r["limit"].as_f64().unwrap_or(0.0),
            ));
        }
        out.push_str(&format!(
            "  fsync {:.2} ms, {:.2} of them a commit; {:.3} fsyncs and {:.0} bytes written a \
             message; other processes used {:.2} cores meanwhile\n",
            m["fsync_ms"].as_f64().unwrap_or(0.0),
            m["fsyncs_per_commit"].as_f64().unwrap_or(0.0),
            m["fsyncs_per_message"].as_f64().unwrap_or(0.0),
            m["disk_bytes_per_message"].as_f64().unwrap_or(0.0),
            m["other_processes_cores"].as_f64().unwrap_or(0.0),
        ));
        out.push_str(&format!(
            "  bottleneck {}; predicted largest BASE {} ({:.1}; {:.0} messages/s)",
            m["bottleneck"].as_str().unwrap_or("none").replace('_', " "),
            m["predicted_max_base"],
            m["predicted_max_base_exact"].as_f64().unwrap_or(0.0),
            m["predicted_max_messages_per_s"].as_f64().unwrap_or(0.0),
        ));
        match (
            m["measured_max_base"].as_u64(),
            m["max_base_error"].as_f64(),
        ) {
            (Some(b), Some(e)) => {
                out.push_str(&format!("; measured {b}: {:+.1}%\n", 100.0 * e));
            }
            _ => out.push('\n'),
        }
    }
    out
}
