//! `--report FILE.html`: one self-contained page (inline SVG and CSS, no scripts or fonts to
//! fetch) with, per target, the throughput and response-time traces per window (per operation
//! for `ftab`), with warm-up and cool-down shaded, and the latency distributions as percentile
//! curves; for `compare` runs, bar charts of every target's figures first.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, Result};

use super::compare::CompareSummary;
use super::operations::ordered;
use super::svg::{bar_chart, escape, line_chart, BarChart, LineChart, Series, XAxis};
use super::{BenchReport, TargetResult};

const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1180px}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:12px}\
.note{color:#555;font-size:13px}code{word-break:break-all}\
table.params td{text-align:left}table.params td:first-child{white-space:nowrap}";

/// Writes the page for `report` to `path`.
pub fn write(report: &BenchReport, path: &Path) -> Result<()> {
    std::fs::write(path, render(report))
        .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))
}

/// The page.
pub fn render(report: &BenchReport) -> String {
    let mut out = String::new();
    let title = format!("ferry-bench {}", report.workload);
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1>",
        escape(&title),
        escape(&title)
    );
    params_table(&mut out, &report.params);
    if let Some(summary) = &report.compare {
        compare_section(&mut out, report, summary);
    }
    // Without a cool-down, the windows after the measurement are the drain: not drawn, so
    // that no cool-down band appears and the last, partial window does not drop to 0.
    let cooldown = report
        .params
        .get("cooldown_s")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    for r in &report.results {
        target_section(&mut out, r, cooldown > 0.0);
    }
    out.push_str("</body></html>\n");
    out
}

fn compare_section(out: &mut String, report: &BenchReport, s: &CompareSummary) {
    let targets: Vec<String> = report.results.iter().map(|r| r.target.clone()).collect();
    let _ = write!(
        out,
        "<h2>Targets compared</h2><p class=\"note\">Median over {} round(s); the order of targets rotates per round.</p><div class=\"charts\">",
        s.rounds
    );
    for (unit, higher, title) in [
        ("msg/s", true, "Throughput (higher is better)"),
        ("op/s", true, "Operations per second (higher is better)"),
        ("ms", false, "Response time (lower is better)"),
    ] {
        let groups: Vec<(String, Vec<Option<f64>>)> = s
            .figures
            .iter()
            .filter(|f| f.unit == unit && f.higher_is_better == higher)
            .filter(|f| !f.name.ends_with("_p99_ms") || unit != "ms" || s.figures.len() < 12)
            .map(|f| {
                let label = f
                    .name
                    .trim_end_matches("_per_s")
                    .trim_end_matches("_ms")
                    .replace('_', " ");
                let values = targets
                    .iter()
                    .map(|t| f.targets.get(t).map(|v| v.median))
                    .collect();
                (label, values)
            })
            .filter(|(_, v): &(String, Vec<Option<f64>>)| v.iter().flatten().any(|x| *x > 0.0))
            .take(8)
            .collect();
        if groups.is_empty() {
            continue;
        }
        out.push_str(&bar_chart(&BarChart {
            title: title.to_string(),
            y_label: unit.to_string(),
            bars: targets.clone(),
            groups,
        }));
    }
    out.push_str("</div><table><tr><th>figure</th>");
    for t in &targets {
        let _ = write!(out, "<th>{}</th><th>x ferry</th>", escape(t));
    }
    out.push_str("</tr>");
    for f in &s.figures {
        let _ = write!(
            out,
            "<tr><td>{} ({})</td>",
            escape(&f.name),
            escape(&f.unit)
        );
        for t in &targets {
            match f.targets.get(t) {
                Some(v) => {
                    let ratio = v
                        .ratio_to_ferry
                        .map_or("-".to_string(), |r| format!("{r:.2}x"));
                    let _ = write!(
                        out,
                        "<td>{}</td><td>{ratio}</td>",
                        super::compare::number(v.median)
                    );
                }
                None => out.push_str("<td>-</td><td>-</td>"),
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// A stable colour per quantity: operations in report order, then latency kinds.
fn colour(name: &str) -> usize {
    const LATENCIES: &[&str] = &[
        "send_to_ack",
        "end_to_end",
        "send_to_ack_corrected",
        "end_to_end_corrected",
    ];
    super::operations::ORDER
        .iter()
        .position(|o| *o == name)
        .or_else(|| LATENCIES.iter().position(|o| *o == name))
        .unwrap_or(7)
}

/// Warm-up and cool-down spans of a series of `(start_s, end_s, phase)` windows.
fn phases(windows: &[(f64, f64, &str)]) -> Vec<(f64, f64, String)> {
    let mut out = Vec::new();
    for (phase, caption) in [("warmup", "warm-up"), ("cooldown", "cool-down")] {
        let spans: Vec<&(f64, f64, &str)> = windows.iter().filter(|w| w.2 == phase).collect();
        if let (Some(first), Some(last)) = (spans.first(), spans.last()) {
            out.push((first.0, last.1, caption.to_string()));
        }
    }
    out
}

/// The parameters as a table: nested objects flattened to dotted names, lists of plain
/// values joined, anything else (lists of objects) as compact JSON.
fn params_table(out: &mut String, params: &serde_json::Value) {
    fn rows(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    rows(&name, v, out);
                }
            }
            serde_json::Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
                let items: Vec<String> = a.iter().map(plain).collect();
                out.push((prefix.to_string(), items.join(", ")));
            }
            serde_json::Value::Array(_) => out.push((prefix.to_string(), v.to_string())),
            other => out.push((prefix.to_string(), plain(other))),
        }
    }
    fn plain(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "-".to_string(),
            other => other.to_string(),
        }
    }
    let mut list = Vec::new();
    rows("", params, &mut list);
    out.push_str(
        "<h2>Parameters</h2><table class=\"params\"><tr><th>parameter</th><th>value</th></tr>",
    );
    for (k, v) in list {
        let _ = write!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td></tr>",
            escape(&k),
            escape(&v)
        );
    }
    out.push_str("</table>");
}

fn target_section(out: &mut String, r: &TargetResult, cooldown: bool) {
    let windows: Vec<_> = r
        .windows
        .iter()
        .filter(|w| cooldown || w.phase != "cooldown")
        .cloned()
        .collect();
    let r = &TargetResult {
        windows,
        ..r.clone()
    };
    let _ = write!(
        out,
        "<h2>{}</h2><p class=\"note\">{}</p><div class=\"charts\">",
        escape(&r.target),
        escape(&r.durability)
    );
    let w = r.window_s;
    let x_label = format!("time since the start of the measurement (s), {w} s windows");
    let (rates, times, spans) = if r.operations.is_empty() {
        let mid = |s: f64, e: f64| (s + e) / 2.0;
        let sent = Series {
            label: "sent/s".into(),
            colour: 0,
            points: r
                .windows
                .iter()
                .map(|x| (mid(x.start_s, x.end_s), Some(x.sent_per_s)))
                .collect(),
        };
        let received = Series {
            label: "received/s".into(),
            colour: 1,
            points: r
                .windows
                .iter()
                .map(|x| (mid(x.start_s, x.end_s), Some(x.received_per_s)))
                .collect(),
        };
        let mean = Series {
            label: format!("{} mean", r.latency_kind.replace('_', " ")),
            colour: 0,
            points: r
                .windows
                .iter()
                .map(|x| (mid(x.start_s, x.end_s), x.latency_mean_ms))
                .collect(),
        };
        let max = Series {
            label: format!("{} max", r.latency_kind.replace('_', " ")),
            colour: 1,
            points: r
                .windows
                .iter()
                .map(|x| (mid(x.start_s, x.end_s), x.latency_max_ms))
                .collect(),
        };
        let spans: Vec<(f64, f64, &str)> = r
            .windows
            .iter()
            .map(|x| (x.start_s, x.end_s, x.phase))
            .collect();
        (vec![sent, received], vec![mean, max], phases(&spans))
    } else {
        let mut rates = Vec::new();
        let mut times = Vec::new();
        let mut spans = Vec::new();
        for (name, o) in ordered(&r.operations) {
            let pts = |f: &dyn Fn(&super::operations::OperationWindow) -> Option<f64>| {
                o.windows
                    .iter()
                    .map(|x| ((x.start_s + x.end_s) / 2.0, f(x)))
                    .collect()
            };
            let c = colour(name);
            rates.push(Series {
                label: name.replace('_', " "),
                points: pts(&|x| Some(x.per_s)),
                colour: c,
            });
            times.push(Series {
                label: name.replace('_', " "),
                points: pts(&|x| x.response_mean_ms),
                colour: c,
            });
            if spans.is_empty() {
                spans = phases(
                    &o.windows
                        .iter()
                        .map(|x| (x.start_s, x.end_s, x.phase))
                        .collect::<Vec<_>>(),
                );
            }
        }
        (rates, times, spans)
    };
    let per = if r.operations.is_empty() {
        "msg/s"
    } else {
        "operations/s"
    };
    out.push_str(&line_chart(&LineChart {
        title: format!("Throughput per window ({})", r.target),
        x_label: x_label.clone(),
        y_label: per.to_string(),
        x_axis: XAxis::Linear,
        series: rates,
        shaded: spans.clone(),
    }));
    out.push_str(&line_chart(&LineChart {
        title: format!("Response time per window ({})", r.target),
        x_label,
        y_label: if r.operations.is_empty() {
            "latency (ms)"
        } else {
            "mean response time (ms)"
        }
        .to_string(),
        x_axis: XAxis::Linear,
        series: times,
        shaded: spans,
    }));
    let curves: Vec<Series> = ordered(&r.percentile_curves_ms)
        .into_iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(name, c)| Series {
            label: name.replace('_', " "),
            points: c.iter().map(|p| (p[0], Some(p[1]))).collect(),
            colour: colour(name),
        })
        .collect();
    if !curves.is_empty() {
        out.push_str(&line_chart(&LineChart {
            title: format!("Latency distribution ({}, measured phase)", r.target),
            x_label: "percentile".into(),
            y_label: "latency (ms)".into(),
            x_axis: XAxis::Nines,
            series: curves,
            shaded: Vec::new(),
        }));
    }
    out.push_str("</div>");
    summary_table(out, r);
}

fn summary_table(out: &mut String, r: &TargetResult) {
    out.push_str("<table><tr><th>distribution</th><th>count</th><th>mean ms</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>");
    for (name, l) in ordered(&r.latencies_ms) {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            escape(name), l.count, l.mean, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    out.push_str("</table>");
    let _ = write!(
        out,
        "<p class=\"note\">sent {:.1} msg/s, received {:.1} msg/s over {:.2} s measured.</p>",
        r.sent_per_s, r.received_per_s, r.send_secs
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_has_its_charts() {
        let page = render(&super::super::sample::report());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_eq!(page.matches("<svg").count(), 2, "no curves in the sample");
        assert!(page.contains("Throughput per window"));
        assert!(!page.contains("<script"));
        assert!(
            page.contains("<tr><td>producers</td><td><code>2</code></td></tr>"),
            "parameters as a table"
        );
    }

    #[test]
    fn without_a_cool_down_the_drain_windows_are_not_drawn() {
        let mut report = super::super::sample::report();
        let mut drain = report.results[0].windows[0].clone();
        drain.phase = "cooldown";
        drain.start_s = 1.0;
        drain.end_s = 2.0;
        drain.sent_per_s = 0.0;
        report.results[0].windows.push(drain);
        let page = render(&report);
        assert!(!page.contains("cool-down"), "no cool-down band");
        report.params["cooldown_s"] = serde_json::json!(1.0);
        assert!(render(&report).contains("cool-down"));
    }

    #[test]
    fn the_second_series_is_dashed_over_the_first() {
        let page = render(&super::super::sample::report());
        assert!(
            page.contains(r#"stroke-width="5" stroke-opacity="0.45"/>"#),
            "sent: a wide band"
        );
        assert!(
            page.contains(r#"stroke-dasharray="7 4""#),
            "received: dashed"
        );
    }
}
