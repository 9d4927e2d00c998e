//! The auditor: whether a run passes the run rules, rule by rule, with the reason of each
//! failure. A rate or count is within its tolerance when it is off by at most 5% of what was
//! expected or by one interaction start (and its messages), whichever is more: counts of a
//! few starts cannot be 5% exact.

use serde::Serialize;

/// Largest relative error of input rates and message counts.
pub const RATE_TOLERANCE: f64 = 0.05;
/// Largest share of late interaction starts.
pub const MAX_PACING_MISSES: f64 = 0.20;
/// Largest 90th percentile delivery time per destination.
pub const MAX_P90_MS: f64 = 5000.0;

/// One interaction's figures from the measurement.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InteractionFigures {
    /// Its name.
    pub interaction: String,
    /// Started per second, as configured.
    pub configured_per_s: f64,
    /// Started per second, as measured.
    pub measured_per_s: f64,
    /// Starts in the measurement.
    pub starts: u64,
    /// Of those, starts later than the pacing tolerance.
    pub pacing_misses: u64,
    /// Messages of it received in the measurement, by the model.
    pub model_messages: f64,
    /// Messages of it received in the measurement.
    pub messages: u64,
    /// Mean delivery time of its messages, ms.
    pub delivery_mean_ms: f64,
}

/// What the auditor judges.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditInput {
    /// Per interaction that is on.
    pub interactions: Vec<InteractionFigures>,
    /// The 90th percentile delivery time of each destination, ms.
    pub destinations_p90_ms: Vec<(String, f64)>,
    /// Receipts owed over the whole run (a publish owes one per subscriber).
    pub receipts_owed: u64,
    /// Receipts after the drain.
    pub receipts: u64,
}

/// One rule's verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RuleVerdict {
    /// The rule.
    pub rule: &'static str,
    /// Whether the run keeps it.
    pub passed: bool,
    /// Why not (every offence), or what was checked.
    pub reason: String,
}

/// The verdict on a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Audit {
    /// Every rule kept.
    pub passed: bool,
    /// Each rule's verdict.
    pub rules: Vec<RuleVerdict>,
}

impl Audit {
    /// The failed rules' reasons, one per line.
    pub fn failures(&self) -> String {
        self.rules
            .iter()
            .filter(|r| !r.passed)
            .map(|r| format!("{}: {}", r.rule, r.reason))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Whether `measured` is within tolerance of `expected` (5%, or one event).
pub fn within(measured: f64, expected: f64, events: f64) -> bool {
    let allowed = (RATE_TOLERANCE * expected).max(expected / events.max(1.0));
    (measured - expected).abs() <= allowed + 1e-9
}

fn verdict(rule: &'static str, offences: Vec<String>, checked: String) -> RuleVerdict {
    RuleVerdict {
        rule,
        passed: offences.is_empty(),
        reason: if offences.is_empty() {
            checked
        } else {
            offences.join("; ")
        },
    }
}

/// Judges a run.
pub fn audit(input: &AuditInput) -> Audit {
    let mut rate = Vec::new();
    let mut count = Vec::new();
    let mut pacing = Vec::new();
    for i in &input.interactions {
        let secs = if i.measured_per_s > 0.0 {
            i.starts as f64 / i.measured_per_s
        } else {
            0.0
        };
        let expected_starts = i.configured_per_s * secs;
        if !within(i.measured_per_s, i.configured_per_s, expected_starts) {
            rate.push(format!(
                "{}: {:.3}/s against {:.3}/s configured ({:+.1}%)",
                i.interaction,
                i.measured_per_s,
                i.configured_per_s,
                100.0 * (i.measured_per_s / i.configured_per_s - 1.0)
            ));
        }
        // A count may be off by one interaction's messages (a start more or less in the
        // window), or 5%.
        if !within(i.messages as f64, i.model_messages, expected_starts) {
            count.push(format!(
                "{}: {} messages against {:.0} in the model ({:+.1}%)",
                i.interaction,
                i.messages,
                i.model_messages,
                100.0 * (i.messages as f64 / i.model_messages.max(1e-9) - 1.0)
            ));
        }
        let share = i.pacing_misses as f64 / (i.starts.max(1)) as f64;
        if share > MAX_PACING_MISSES {
            pacing.push(format!(
                "{}: {} of {} starts late ({:.0}%)",
                i.interaction,
                i.pacing_misses,
                i.starts,
                100.0 * share
            ));
        }
    }
    let late: Vec<String> = input
        .destinations_p90_ms
        .iter()
        .filter(|(_, p90)| *p90 > MAX_P90_MS)
        .map(|(d, p90)| format!("{d}: p90 {p90:.0} ms"))
        .collect();
    let drained = if input.receipts >= input.receipts_owed {
        Vec::new()
    } else {
        vec![format!(
            "{} of {} receipts after the drain ({} missing)",
            input.receipts,
            input.receipts_owed,
            input.receipts_owed - input.receipts
        )]
    };
    let n = input.interactions.len();
    let rules = vec![
        verdict(
            "input rate",
            rate,
            format!("{n} interactions within 5% of their configured rates"),
        ),
        verdict(
            "message counts",
            count,
            format!("{n} interactions within 5% of the model's message counts"),
        ),
        verdict(
            "pacing",
            pacing,
            format!(
                "at most {:.0}% late starts per interaction",
                100.0 * MAX_PACING_MISSES
            ),
        ),
        verdict(
            "delivery time",
            late,
            format!(
                "90th percentile at most {MAX_P90_MS:.0} ms on all {} destinations",
                input.destinations_p90_ms.len()
            ),
        ),
        verdict(
            "drain",
            drained,
            format!("all {} receipts owed arrived", input.receipts_owed),
        ),
    ];
    Audit {
        passed: rules.iter().all(|r| r.passed),
        rules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> AuditInput {
        AuditInput {
            interactions: vec![
                InteractionFigures {
                    interaction: "order-shipment".into(),
                    configured_per_s: 100.0,
                    measured_per_s: 99.0,
                    starts: 990,
                    pacing_misses: 10,
                    model_messages: 6000.0,
                    messages: 5900,
                    delivery_mean_ms: 3.0,
                },
                InteractionFigures {
                    interaction: "price-update".into(),
                    configured_per_s: 6.0,
                    measured_per_s: 6.0,
                    starts: 60,
                    pacing_misses: 0,
                    model_messages: 600.0,
                    messages: 600,
                    delivery_mean_ms: 2.0,
                },
            ],
            destinations_p90_ms: vec![("bench-spec.SM0.orderConf".into(), 12.0)],
            receipts_owed: 10_000,
            receipts: 10_000,
        }
    }

    fn failed(a: &Audit) -> Vec<&'static str> {
        a.rules
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.rule)
            .collect()
    }

    #[test]
    fn a_good_run_passes_every_rule() {
        let a = audit(&good());
        assert!(a.passed, "{}", a.failures());
        assert_eq!(a.rules.len(), 5);
    }

    #[test]
    fn an_input_rate_off_by_more_than_5_percent_fails() {
        let mut input = good();
        input.interactions[0].measured_per_s = 94.0;
        input.interactions[0].starts = 940;
        let a = audit(&input);
        assert_eq!(failed(&a), ["input rate"]);
        assert!(
            a.failures()
                .contains("order-shipment: 94.000/s against 100.000/s configured (-6.0%)"),
            "{}",
            a.failures()
        );
        input.interactions[0].measured_per_s = 106.0;
        assert_eq!(failed(&audit(&input)), ["input rate"]);
    }

    #[test]
    fn message_counts_off_the_model_fail() {
        let mut input = good();
        input.interactions[1].messages = 560;
        let a = audit(&input);
        assert_eq!(failed(&a), ["message counts"]);
        assert!(a
            .failures()
            .contains("price-update: 560 messages against 600 in the model (-6.7%)"));
    }

    #[test]
    fn more_than_20_percent_late_starts_fail() {
        let mut input = good();
        input.interactions[0].measured_per_s = 100.0;
        input.interactions[0].starts = 1000;
        input.interactions[0].pacing_misses = 200;
        assert!(audit(&input).passed, "20% is allowed");
        input.interactions[0].pacing_misses = 201;
        let a = audit(&input);
        assert_eq!(failed(&a), ["pacing"]);
        assert!(
            a.failures().contains("201 of 1000 starts late (20%)"),
            "{}",
            a.failures()
        );
    }

    #[test]
    fn a_slow_destination_fails() {
        let mut input = good();
        input
            .destinations_p90_ms
            .push(("bench-spec.central".into(), 5001.0));
        let a = audit(&input);
        assert_eq!(failed(&a), ["delivery time"]);
        assert!(a.failures().contains("bench-spec.central: p90 5001 ms"));
    }

    #[test]
    fn messages_missing_after_the_drain_fail() {
        let mut input = good();
        input.receipts = 9_999;
        let a = audit(&input);
        assert_eq!(failed(&a), ["drain"]);
        assert!(a
            .failures()
            .contains("9999 of 10000 receipts after the drain (1 missing)"));
    }

    #[test]
    fn a_short_run_may_miss_one_start_and_its_messages() {
        let mut input = good();
        let pr = &mut input.interactions[1];
        // 10 starts due, 9 made: 90 of 100 messages.
        pr.configured_per_s = 1.0;
        pr.measured_per_s = 0.9;
        pr.starts = 9;
        pr.model_messages = 100.0;
        pr.messages = 90;
        assert!(audit(&input).passed, "{}", audit(&input).failures());
        input.interactions[1].messages = 89;
        assert_eq!(failed(&audit(&input)), ["message counts"]);
    }

    #[test]
    fn small_counts_may_be_one_event_off() {
        assert!(within(9.0, 10.0, 10.0), "one event of ten");
        assert!(!within(8.0, 10.0, 10.0), "two of ten");
        assert!(within(95.0, 100.0, 100.0));
        assert!(!within(94.9, 100.0, 100.0));
    }
}
