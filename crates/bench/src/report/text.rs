//! The report on the terminal: the workload's own header lines, then per target the rates,
//! the latency distributions, the statistics of the per-window rates, and errors.

use std::fmt::Write as _;

use super::{BenchReport, TargetResult};
use crate::stats::{LatencySummary, SampleSummary};

/// Labels of the latency distributions workloads record, in the order they are printed;
/// others follow in name order.
const LABELS: &[(&str, &str)] = &[
    ("send_to_ack", "send-to-ack latency:"),
    ("send_to_ack_corrected", "send-to-ack (CO-corr.):"),
    ("end_to_end", "end-to-end latency:"),
    ("end_to_end_corrected", "end-to-end (CO-corr.):"),
];

/// The report as printed; `header` holds the workload's description lines.
pub fn render(report: &BenchReport, header: &str) -> String {
    let mut out = String::from(header);
    let several = report.results.len() > 1;
    for r in &report.results {
        if several {
            let _ = writeln!(out, "target {}: {}", r.target, r.durability);
        }
        target(&mut out, r);
    }
    out
}

/// The per-operation table (ftab): throughput and response time, with the statistics of the
/// measured windows.
fn operations(out: &mut String, r: &TargetResult) {
    let _ = writeln!(
        out,
        "{:<16} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}   per window (n={}, {} s): op/s mean ± sd [95% CI] [99.9% CI]; mean RT ms [95% CI]",
        "operation", "count", "op/s", "mean ms", "p50", "p99", "p99.9", "max",
        r.operations.values().next().map_or(0, |o| o.window_stats.per_s.n),
        r.window_s
    );
    for (name, o) in super::operations::ordered(&r.operations) {
        let l = &o.response_ms;
        let w = &o.window_stats;
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>10.1} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}   {:.1} ± {:.1} {} {}; {:.3} {}",
            name,
            o.count,
            o.per_s,
            l.mean,
            l.p50,
            l.p99,
            l.p999,
            l.max,
            w.per_s.mean,
            w.per_s.sd,
            interval(w.per_s.ci95, 1),
            interval(w.per_s.ci999, 1),
            w.response_mean_ms.mean,
            interval(w.response_mean_ms.ci95, 3),
        );
    }
}

fn interval(ci: Option<[f64; 2]>, digits: usize) -> String {
    ci.map_or_else(
        || "[-]".to_string(),
        |[lo, hi]| format!("[{lo:.digits$}, {hi:.digits$}]"),
    )
}

fn target(out: &mut String, r: &TargetResult) {
    let _ = writeln!(
        out,
        "sent:                  {:>10} msgs  {:>12.1} msg/s  {:>8.2} MiB/s",
        r.sent, r.sent_per_s, r.sent_mib_per_s
    );
    let _ = writeln!(
        out,
        "received:              {:>10} msgs  {:>12.1} msg/s",
        r.received, r.received_per_s
    );
    if !r.operations.is_empty() {
        // ftab: the operation table below holds the response-time distributions.
        operations(out, r);
    } else {
        latencies(out, r);
    }
    let w = r.window_s;
    for (what, s) in [
        ("sent/s", &r.window_stats.sent_per_s),
        ("received/s", &r.window_stats.received_per_s),
    ] {
        if s.n > 0 && s.mean > 0.0 {
            let _ = writeln!(out, "{}", window_line(what, w, s));
        }
    }
    if let Some(c) = &r.broker_cpu {
        let _ = writeln!(
            out,
            "broker CPU (pid {}): {:.2} s ({:.2} cores), {:.2} µs per sent, {:.2} µs per received; \
             bench process {:.2} cores",
            c.pid, c.cpu_s, c.cores, c.us_per_sent, c.us_per_received, c.bench_cores
        );
    }
    let e = &r.errors;
    if e.any() {
        let _ = writeln!(
            out,
            "errors: {} send, {} ack, {} receive; first: {}",
            e.send,
            e.ack,
            e.receive,
            e.first.as_deref().unwrap_or("?")
        );
    }
    if e.foreign > 0 {
        let _ = writeln!(
            out,
            "({} messages left over from earlier runs were consumed and not counted)",
            e.foreign
        );
    }
}

/// The latency distributions, labelled.
fn latencies(out: &mut String, r: &TargetResult) {
    let mut printed = Vec::new();
    for (key, label) in LABELS {
        if let Some(s) = r.latencies_ms.get(*key) {
            out.push_str(&latency_line(label, s));
            printed.push(*key);
        }
    }
    for (key, s) in &r.latencies_ms {
        if !printed.contains(&key.as_str()) {
            out.push_str(&latency_line(&format!("{}:", key.replace('_', " ")), s));
        }
    }
}

fn latency_line(label: &str, s: &LatencySummary) -> String {
    if s.count == 0 {
        return format!("{label:<22} (no samples)\n");
    }
    format!(
        "{label:<22} p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  p99.99 {:.3}  max {:.3}  ms  \
         ({} samples)\n",
        s.p50, s.p90, s.p99, s.p999, s.p9999, s.max, s.count
    )
}

fn window_line(what: &str, window_s: f64, s: &SampleSummary) -> String {
    let mut line = format!(
        "{what} per {window_s} s window: mean {:.1}  sd {:.1}",
        s.mean, s.sd
    );
    if let (Some([a, b]), Some([c, d])) = (s.ci95, s.ci999) {
        let _ = write!(line, "  95% CI [{a:.1}, {b:.1}]  99.9% CI [{c:.1}, {d:.1}]");
    }
    let _ = write!(line, "  ({} windows)", s.n);
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let mut report = super::super::sample::report();
        let t = render(&report, "header\n");
        assert!(t.starts_with("header\n"), "{t}");
        assert!(t.contains("1000.0 msg/s"), "{t}");
        assert!(t.contains("995.0 msg/s"), "{t}");
        assert!(
            t.contains("p50 1.000  p90 2.000  p99 3.000  p99.9 4.000  p99.99 5.000  max 5.500  ms"),
            "{t}"
        );
        assert!(t.contains("end-to-end latency:    (no samples)"), "{t}");
        assert!(
            t.contains("sent/s per 1 s window: mean 1000.0  sd 0.0  (1 windows)"),
            "{t}"
        );
        assert!(!t.contains("errors"), "{t}");
        report.results[0].errors.send = 3;
        report.results[0].errors.first = Some("disk full".into());
        let t = render(&report, "");
        assert!(
            t.contains("errors: 3 send, 0 ack, 0 receive; first: disk full"),
            "{t}"
        );
    }
}
