//! The summary of `ferry-bench compare`: each figure per target as the median over rounds,
//! every round's value, and the ratio to Ferry; and its terminal table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::TargetResult;

/// Figures of a compare run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareSummary {
    /// Rounds run.
    pub rounds: u32,
    /// The order targets ran in, per round.
    pub order: Vec<Vec<String>>,
    /// One entry per figure, in table order.
    pub figures: Vec<Figure>,
}

/// One figure across targets.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figure {
    /// What it is (`received_per_s`, `latency_p99_ms`, `send_per_s`, ...).
    pub name: String,
    /// Unit (`msg/s`, `ms`, `op/s`).
    pub unit: String,
    /// Whether more is better (rates) or less (latencies).
    pub higher_is_better: bool,
    /// Per target.
    pub targets: BTreeMap<String, FigureValue>,
}

/// One figure of one target.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FigureValue {
    /// Median over rounds.
    pub median: f64,
    /// Every round's value, in round order.
    pub rounds: Vec<f64>,
    /// `median / Ferry's median`; `None` without a Ferry figure (or when it is 0).
    pub ratio_to_ferry: Option<f64>,
}

/// The figures of one result, in table order: `(name, unit, higher is better, value)`.
pub fn figures_of(r: &TargetResult) -> Vec<(String, &'static str, bool, f64)> {
    let mut out = vec![
        ("sent_per_s".to_string(), "msg/s", true, r.sent_per_s),
        (
            "received_per_s".to_string(),
            "msg/s",
            true,
            r.received_per_s,
        ),
    ];
    if r.operations.is_empty() {
        let kind = &r.latency_kind;
        for (p, v) in [
            ("p50", r.latency_ms.p50),
            ("p99", r.latency_ms.p99),
            ("p999", r.latency_ms.p999),
        ] {
            out.push((format!("{kind}_{p}_ms"), "ms", false, v));
        }
    }
    for (op, o) in super::operations::ordered(&r.operations) {
        out.push((format!("{op}_per_s"), "op/s", true, o.per_s));
        out.push((format!("{op}_mean_ms"), "ms", false, o.response_ms.mean));
        out.push((format!("{op}_p99_ms"), "ms", false, o.response_ms.p99));
    }
    out
}

/// Median of `values` (mean of the middle two for an even count; 0 when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        return v.get(mid).copied().unwrap_or(0.0);
    }
    match (mid.checked_sub(1).and_then(|i| v.get(i)), v.get(mid)) {
        (Some(lower), Some(upper)) => (lower + upper) / 2.0,
        _ => 0.0,
    }
}

/// The summary of `rounds[round][target]` results (targets in the given order).
pub fn summarise(
    targets: &[String],
    rounds: &[BTreeMap<String, TargetResult>],
    order: Vec<Vec<String>>,
) -> CompareSummary {
    let mut figures: Vec<Figure> = Vec::new();
    for t in targets {
        let per_round: Vec<Vec<(String, &'static str, bool, f64)>> = rounds
            .iter()
            .filter_map(|r| r.get(t))
            .map(figures_of)
            .collect();
        for round in &per_round {
            for (name, unit, higher, _) in round {
                if !figures.iter().any(|f| &f.name == name) {
                    figures.push(Figure {
                        name: name.clone(),
                        unit: unit.to_string(),
                        higher_is_better: *higher,
                        targets: BTreeMap::new(),
                    });
                }
            }
        }
        for f in &mut figures {
            let values: Vec<f64> = per_round
                .iter()
                .filter_map(|round| round.iter().find(|x| x.0 == f.name).map(|x| x.3))
                .collect();
            if !values.is_empty() {
                f.targets.insert(
                    t.clone(),
                    FigureValue {
                        median: median(&values),
                        rounds: values,
                        ratio_to_ferry: None,
                    },
                );
            }
        }
    }
    for f in &mut figures {
        let ferry = f.targets.get("ferry").map(|v| v.median);
        for v in f.targets.values_mut() {
            v.ratio_to_ferry = ferry.filter(|&x| x != 0.0).map(|x| v.median / x);
        }
    }
    CompareSummary {
        rounds: u32::try_from(rounds.len()).unwrap_or(u32::MAX),
        order,
        figures,
    }
}

/// The comparison table: one line per figure, per target its median and ratio to Ferry.
pub fn render(summary: &CompareSummary, targets: &[String]) -> String {
    let mut out = String::new();
    let _ = write!(out, "{:<30}", "figure (median)");
    for t in targets {
        let _ = write!(out, " {:>14} {:>8}", t, "x ferry");
    }
    out.push('\n');
    for f in &summary.figures {
        let _ = write!(out, "{:<30}", format!("{} ({})", f.name, f.unit));
        for t in targets {
            match f.targets.get(t) {
                Some(v) => {
                    let ratio = v
                        .ratio_to_ferry
                        .map_or_else(|| "-".to_string(), |r| format!("{r:.2}x"));
                    let _ = write!(out, " {:>14} {:>8}", number(v.median), ratio);
                }
                None => {
                    let _ = write!(out, " {:>14} {:>8}", "-", "-");
                }
            }
        }
        out.push('\n');
    }
    out
}

/// A figure with sensible precision.
pub fn number(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn ratios_to_ferry() {
        let mut a = super::super::sample::report().results.remove(0);
        let mut b = a.clone();
        b.target = "nats".into();
        b.sent_per_s = 500.0;
        let rounds: Vec<BTreeMap<String, TargetResult>> = [1000.0, 1200.0, 800.0]
            .iter()
            .map(|&s| {
                a.sent_per_s = s;
                BTreeMap::from([
                    ("ferry".to_string(), a.clone()),
                    ("nats".to_string(), b.clone()),
                ])
            })
            .collect();
        let targets = vec!["ferry".to_string(), "nats".to_string()];
        let s = summarise(&targets, &rounds, vec![]);
        let sent = s.figures.iter().find(|f| f.name == "sent_per_s").unwrap();
        assert_eq!(sent.targets["ferry"].median, 1000.0);
        assert_eq!(sent.targets["ferry"].rounds, vec![1000.0, 1200.0, 800.0]);
        assert_eq!(sent.targets["nats"].ratio_to_ferry, Some(0.5));
        let table = render(&s, &targets);
        assert!(table.contains("sent_per_s (msg/s)"), "{table}");
        assert!(table.contains("0.50x"), "{table}");
    }
}
