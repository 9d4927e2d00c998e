//! The live progress line: while a workload runs, one line on standard error with the phase,
//! the elapsed time and the current send and receive rates (and, in `compare`, the target and
//! round), drawn with `indicatif`.
//!
//! It is drawn only when standard error is a terminal and `--quiet` is not given, so tests, CI
//! and pipes see nothing of it; it is cleared before the final table goes to standard output.
//! Sampling is cheap: an OS thread of its own (not a runtime worker) reads the run's atomic
//! counters ([`Shared::sent_total`], [`Shared::received_total`]) and its phase every
//! [`SAMPLE`], and the rates are the differences over the last second or so.

use std::collections::VecDeque;
use std::io::IsTerminal as _;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::args::CommonArgs;
use crate::workloads::run::{Shared, COOLDOWN, MEASURE, STOP, WARMUP};

/// How often the counters are read and the line redrawn.
pub const SAMPLE: Duration = Duration::from_millis(200);
/// Samples kept for the current rates: the rates are over the last second.
const RATE_SAMPLES: usize = 6;

/// What the line shows besides the counters.
#[derive(Debug, Clone)]
pub struct ProgressPlan {
    /// Leads the line: the workload, the target and, in `compare`, the round.
    pub label: String,
    /// Planned warm-up, measurement and cool-down (zero in message-count mode).
    pub warmup: Duration,
    /// Planned measurement.
    pub duration: Duration,
    /// Planned cool-down.
    pub cooldown: Duration,
    /// Message-count mode: the number of messages to send.
    pub messages: Option<u64>,
}

impl ProgressPlan {
    /// The plan of a duration-mode run of `workload` with `common`'s timing, labelled with the
    /// workload, the target and the comparison round, if any.
    pub fn of(workload: &str, target: &str, common: &CommonArgs) -> ProgressPlan {
        let mut label = format!("{workload} on {target}");
        if let Some(round) = &common.progress_round {
            label.push_str(&format!(", {round}"));
        }
        ProgressPlan {
            label,
            warmup: common.warmup,
            duration: common.duration,
            cooldown: common.cooldown,
            messages: None,
        }
    }
}

/// Whether a progress line should be drawn: standard error is a terminal and `--quiet` is off.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// The running progress line; dropping it stops the sampler and clears the line.
#[derive(Debug)]
pub struct Progress {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing the progress of `shared` when [`wanted`]; otherwise does nothing.
    pub fn start(shared: Arc<Shared>, plan: ProgressPlan, quiet: bool) -> Progress {
        if !wanted(quiet) {
            return Progress::off();
        }
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("ferry-bench-progress".into())
            .spawn(move || draw(&shared, &plan, &rx));
        match spawned {
            Ok(thread) => Progress {
                stop: Some(tx),
                thread: Some(thread),
            },
            // No thread, no line: the run itself does not need it.
            Err(_) => Progress::off(),
        }
    }

    /// A progress that draws nothing.
    pub fn off() -> Progress {
        Progress {
            stop: None,
            thread: None,
        }
    }

    /// Stops the sampler and clears the line (also done on drop).
    pub fn finish(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// The sampler: redraws every [`SAMPLE`] until `stop` is dropped, then clears the line.
fn draw(shared: &Shared, plan: &ProgressPlan, stop: &mpsc::Receiver<()>) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
        bar.set_style(style);
    }
    let mut samples: VecDeque<Sample> = VecDeque::with_capacity(RATE_SAMPLES + 1);
    loop {
        samples.push_back(Sample::read(shared));
        if samples.len() > RATE_SAMPLES {
            samples.pop_front();
        }
        bar.set_message(line(shared, plan, &samples));
        bar.tick();
        match stop.recv_timeout(SAMPLE) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    bar.finish_and_clear();
}

/// One reading of the counters.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    sent: u64,
    received: u64,
}

impl Sample {
    fn read(shared: &Shared) -> Sample {
        Sample {
            at: Instant::now(),
            sent: shared.sent_total.load(Ordering::Relaxed),
            received: shared.received_total.load(Ordering::Relaxed),
        }
    }
}

/// Sends and receipts per second between the oldest and newest sample.
fn rates(samples: &VecDeque<Sample>) -> Option<(f64, f64)> {
    let (first, last) = (samples.front()?, samples.back()?);
    let secs = last.at.saturating_duration_since(first.at).as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    Some((
        last.sent.saturating_sub(first.sent) as f64 / secs,
        last.received.saturating_sub(first.received) as f64 / secs,
    ))
}

/// The text of the line.
fn line(shared: &Shared, plan: &ProgressPlan, samples: &VecDeque<Sample>) -> String {
    let elapsed = Instant::now().saturating_duration_since(shared.started);
    let phase = match shared.phase() {
        WARMUP => "warm-up",
        MEASURE => "measuring",
        COOLDOWN => "cool-down",
        STOP => "finishing",
        _ => "",
    };
    let clock = match plan.messages {
        Some(_) => format!("{:.1} s", elapsed.as_secs_f64()),
        None => format!(
            "{:.1} / {:.1} s",
            elapsed.as_secs_f64(),
            (plan.warmup + plan.duration + plan.cooldown).as_secs_f64()
        ),
    };
    let last = samples.back().copied().unwrap_or(Sample {
        at: Instant::now(),
        sent: 0,
        received: 0,
    });
    let totals = match plan.messages {
        Some(n) => format!("{} of {} sent, {} received", last.sent, n, last.received),
        None => format!("{} sent, {} received", last.sent, last.received),
    };
    let now = match rates(samples) {
        Some((s, r)) => format!("{} sent/s, {} received/s", whole(s), whole(r)),
        None => "- sent/s, - received/s".to_string(),
    };
    format!("{}: {phase} {clock} | {now} | {totals}", plan.label)
}

/// `12345.6` as `12,346`.
fn whole(x: f64) -> String {
    let n = x.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::WindowSeries;
    use crate::workloads::run::WindowLatency;

    fn sample(ms: u64, sent: u64, received: u64, base: Instant) -> Sample {
        Sample {
            at: base + Duration::from_millis(ms),
            sent,
            received,
        }
    }

    #[test]
    fn rates_over_the_kept_samples() {
        let base = Instant::now();
        let mut s = VecDeque::new();
        assert_eq!(rates(&s), None);
        s.push_back(sample(0, 100, 50, base));
        assert_eq!(rates(&s), None);
        s.push_back(sample(500, 600, 300, base));
        assert_eq!(rates(&s), Some((1000.0, 500.0)));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(whole(0.0), "0");
        assert_eq!(whole(999.4), "999");
        assert_eq!(whole(1000.0), "1,000");
        assert_eq!(whole(1234567.0), "1,234,567");
        assert_eq!(whole(-3.0), "0");
    }

    #[test]
    fn line_names_target_phase_and_rates() {
        let now = Instant::now();
        let windows = WindowSeries::new(
            now,
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        let shared = Shared::new(1, now, MEASURE, None, windows, WindowLatency::EndToEnd);
        let plan = ProgressPlan {
            label: "ftab on ferry, round 2/3".into(),
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(20),
            cooldown: Duration::ZERO,
            messages: None,
        };
        let mut s = VecDeque::new();
        s.push_back(sample(0, 0, 0, now));
        s.push_back(sample(1000, 2000, 1500, now));
        let l = line(&shared, &plan, &s);
        assert!(l.starts_with("ftab on ferry, round 2/3: measuring "), "{l}");
        assert!(l.contains("/ 21.0 s"), "{l}");
        assert!(l.contains("2,000 sent/s, 1,500 received/s"), "{l}");
        assert!(l.contains("2000 sent, 1500 received"), "{l}");
    }

    #[test]
    fn quiet_or_no_terminal_draws_nothing() {
        // Under the test harness standard error is captured or a pipe; either way, and with
        // --quiet always, no line is drawn and no thread started.
        assert!(!wanted(true));
        let now = Instant::now();
        let windows = WindowSeries::new(
            now,
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        let shared = Arc::new(Shared::new(
            1,
            now,
            WARMUP,
            None,
            windows,
            WindowLatency::EndToEnd,
        ));
        let p = Progress::start(
            shared,
            ProgressPlan::of("throughput", "ferry", &common()),
            true,
        );
        assert!(p.thread.is_none());
        p.finish();
    }

    fn common() -> CommonArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            common: CommonArgs,
        }
        Cli::parse_from(["x"]).common
    }
}
