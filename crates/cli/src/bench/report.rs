//! The results of a throughput run: a struct that serialises to the `--json` file, and the
//! text printed to the terminal.

use std::fmt::Write as _;

use serde::Serialize;

use super::stats::LatencySummary;

/// The workload's shape, as run.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputConfig {
    /// Producer connections.
    pub producers: u32,
    /// Consumer connections.
    pub consumers: u32,
    /// Body size in bytes.
    pub size: u32,
    /// Queues.
    pub queues: u32,
    /// Requests in flight per producer.
    pub window: u32,
    /// Messages per send request.
    pub batch: u32,
    /// Unacked deliveries per subscription.
    pub prefetch: u32,
    /// Warm-up in seconds (0 in message-count mode).
    pub warmup_secs: f64,
    /// `duration` or `messages`.
    pub mode: &'static str,
    /// Messages to send, in message-count mode.
    pub messages: Option<u64>,
}

/// Everything a throughput run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputReport {
    /// The workload.
    pub config: ThroughputConfig,
    /// Seconds over which sends were counted.
    pub send_secs: f64,
    /// Seconds over which receipts were counted.
    pub receive_secs: f64,
    /// Sends acknowledged in that time.
    pub sent: u64,
    /// Messages received in that time.
    pub received: u64,
    /// `sent / send_secs`.
    pub sent_per_sec: f64,
    /// `received / receive_secs`.
    pub received_per_sec: f64,
    /// Body bytes sent per second, in MiB.
    pub sent_mib_per_sec: f64,
    /// From issuing a send to the broker's acknowledgement, µs.
    pub send_to_ack_us: LatencySummary,
    /// From the producer's stamp to the consumer's receipt, µs.
    pub end_to_end_us: LatencySummary,
    /// Sends refused or failed.
    pub send_errors: u64,
    /// Acks failed.
    pub ack_errors: u64,
    /// Messages of earlier runs consumed and not counted.
    pub foreign_messages: u64,
    /// The first error seen, if any.
    pub first_error: Option<String>,
}

/// `n / secs`, 0 when no time passed.
pub fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

fn latency_line(label: &str, s: &LatencySummary) -> String {
    if s.count == 0 {
        return format!("{label:<22} (no samples)\n");
    }
    format!(
        "{label:<22} p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ms  ({} samples)\n",
        ms(s.p50),
        ms(s.p90),
        ms(s.p99),
        ms(s.p999),
        ms(s.max),
        s.count
    )
}

impl ThroughputReport {
    /// The report as printed on the terminal.
    pub fn text(&self) -> String {
        let c = &self.config;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "ferry bench throughput: {} producer(s), {} consumer(s), {} queue(s), {} B bodies, \
             window {}, batch {}, prefetch {}",
            c.producers, c.consumers, c.queues, c.size, c.window, c.batch, c.prefetch
        );
        match c.messages {
            Some(n) => {
                let _ = writeln!(out, "{n} messages, no warm-up");
            }
            None => {
                let _ = writeln!(
                    out,
                    "measured {:.2} s after {:.2} s warm-up",
                    self.send_secs, c.warmup_secs
                );
            }
        }
        let _ = writeln!(
            out,
            "sent:                  {:>10} msgs  {:>12.1} msg/s  {:>8.2} MiB/s",
            self.sent, self.sent_per_sec, self.sent_mib_per_sec
        );
        let _ = writeln!(
            out,
            "received:              {:>10} msgs  {:>12.1} msg/s",
            self.received, self.received_per_sec
        );
        out.push_str(&latency_line("send-to-ack latency:", &self.send_to_ack_us));
        out.push_str(&latency_line("end-to-end latency:", &self.end_to_end_us));
        if self.send_errors + self.ack_errors > 0 {
            let _ = writeln!(
                out,
                "errors: {} send, {} ack; first: {}",
                self.send_errors,
                self.ack_errors,
                self.first_error.as_deref().unwrap_or("?")
            );
        }
        if self.foreign_messages > 0 {
            let _ = writeln!(
                out,
                "({} messages left over from earlier runs were consumed and not counted)",
                self.foreign_messages
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(count: u64) -> LatencySummary {
        LatencySummary {
            count,
            mean: 1500.0,
            p50: 1000,
            p90: 2000,
            p99: 3000,
            p999: 4000,
            max: 5500,
        }
    }

    #[test]
    fn text_and_json() {
        let r = ThroughputReport {
            config: ThroughputConfig {
                producers: 2,
                consumers: 1,
                size: 256,
                queues: 1,
                window: 64,
                batch: 1,
                prefetch: 1000,
                warmup_secs: 1.0,
                mode: "duration",
                messages: None,
            },
            send_secs: 2.0,
            receive_secs: 2.0,
            sent: 2000,
            received: 1990,
            sent_per_sec: 1000.0,
            received_per_sec: 995.0,
            sent_mib_per_sec: 0.24,
            send_to_ack_us: summary(2000),
            end_to_end_us: summary(0),
            send_errors: 0,
            ack_errors: 0,
            foreign_messages: 0,
            first_error: None,
        };
        let t = r.text();
        assert!(t.contains("1000.0 msg/s"), "{t}");
        assert!(t.contains("995.0 msg/s"), "{t}");
        assert!(
            t.contains("p50 1.000  p90 2.000  p99 3.000  p99.9 4.000  max 5.500  ms"),
            "{t}"
        );
        assert!(t.contains("end-to-end latency:    (no samples)"), "{t}");
        assert!(!t.contains("errors"), "{t}");
        let j: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(j["sent_per_sec"], 1000.0);
        assert_eq!(j["send_to_ack_us"]["p999"], 4000);
        assert_eq!(j["config"]["mode"], "duration");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(10, 2.0), 5.0);
        assert_eq!(rate(10, 0.0), 0.0);
    }
}
