//! The operations the FTaB clients make and how each is recorded: a per-window series per
//! operation (shared, lock-free), a response-time histogram per operation and client task
//! (merged at the end), and the run-wide counters of [`Shared`] (sends as "sent", reads that
//! found a message as "received", send response time as the run's latency trace).
//!
//! A client task adds to the shared series and counters in batches (every [`FLUSH_EVERY`]
//! operations, after [`FLUSH_AFTER`], when the run changes phase, and at the end), not per
//! operation: they are shared by every task on every thread of the load generator, and a
//! dozen contended atomic updates per operation made the generator itself part of what a run
//! of many clients measured. A batch is counted in the window of its last operation, so at
//! most [`FLUSH_AFTER`] of operations can land in the window after their own; the
//! histograms, and whether an operation counts as measured, go by each operation's own time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::report::operations::OperationResult;
use crate::stats::histogram::clamp_micros;
use crate::stats::{new_histogram, percentile_curve, LatencySummary, WindowSeries};
use crate::workloads::run::{Shared, MEASURE};

/// One kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A send (one message, to one or more queues), until acknowledged.
    Send,
    /// A pop that returned a message.
    Read,
    /// A pop that found no message.
    ReadEmpty,
    /// A waiting-queues query that found queues.
    QueryFound,
    /// A waiting-queues query that found none.
    QueryNotFound,
    /// Tola: from sending a request to reading its reply.
    RequestReply,
}

/// Every operation, in report order.
pub const OPS: [Op; 6] = [
    Op::Send,
    Op::Read,
    Op::ReadEmpty,
    Op::QueryFound,
    Op::QueryNotFound,
    Op::RequestReply,
];

impl Op {
    /// The key in reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::Read => "read",
            Op::ReadEmpty => "read_empty",
            Op::QueryFound => "query_found",
            Op::QueryNotFound => "query_not_found",
            Op::RequestReply => "request_reply",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Per-operation series and counters of one run.
#[derive(Debug)]
pub struct OpSeries {
    /// One per operation, in [`OPS`] order.
    per_op: Vec<OpCounts>,
}

/// The series and counters of one operation.
#[derive(Debug)]
struct OpCounts {
    series: WindowSeries,
    measured: AtomicU64,
    errors: AtomicU64,
}

impl OpSeries {
    /// Series shaped like the run's (same origin, window and span).
    pub fn new(make: impl Fn() -> WindowSeries) -> Self {
        OpSeries {
            per_op: OPS
                .iter()
                .map(|_| OpCounts {
                    series: make(),
                    measured: AtomicU64::new(0),
                    errors: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    fn of(&self, op: Op) -> Option<&OpCounts> {
        self.per_op.get(op.index())
    }

    /// Counts a failed `op`.
    pub fn failed(&self, op: Op) {
        if let Some(c) = self.of(op) {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Operations of kind `op` completed in the measured interval.
    #[cfg(test)]
    fn measured(&self, op: Op) -> u64 {
        self.of(op)
            .map_or(0, |c| c.measured.load(Ordering::Relaxed))
    }

    /// Per-operation results (operations never seen are left out) and their percentile curves.
    pub fn results(
        &self,
        hists: &[Histogram<u64>],
        secs: f64,
        measure_start: Instant,
        measure_end: Instant,
    ) -> (BTreeMap<String, OperationResult>, Curves) {
        let mut results = BTreeMap::new();
        let mut curves = BTreeMap::new();
        for ((op, c), hist) in OPS.iter().zip(&self.per_op).zip(hists) {
            let rows = c.series.rows(measure_start, measure_end);
            let errors = c.errors.load(Ordering::Relaxed);
            let total: u64 = rows.iter().map(|r| r.sent).sum();
            if total == 0 && errors == 0 {
                continue;
            }
            let count = c.measured.load(Ordering::Relaxed);
            let summary = LatencySummary::of(hist);
            results.insert(
                op.name().to_string(),
                OperationResult::new(count, secs, errors, summary, &rows),
            );
            curves.insert(op.name().to_string(), percentile_curve(hist));
        }
        (results, curves)
    }
}

/// Percentile curves by operation name.
pub type Curves = BTreeMap<String, Vec<[f64; 2]>>;

/// A task's operations flush to the shared series after this many...
pub const FLUSH_EVERY: u32 = 32;
/// ...or this long after the first unflushed one, whichever comes first.
pub const FLUSH_AFTER: Duration = Duration::from_millis(2);

/// Operations of one kind recorded since the last flush.
#[derive(Debug, Default, Clone, Copy)]
struct Unflushed {
    count: u64,
    latency_sum_us: u64,
    latency_max_us: u64,
}

/// What one client task records with.
pub struct Recorder {
    shared: Arc<Shared>,
    ops: Arc<OpSeries>,
    hists: Vec<Histogram<u64>>,
    unflushed: [Unflushed; OPS.len()],
    /// Operations in `unflushed`, when the first and the last of them completed, and whether
    /// they were in the measured interval (a batch never spans a change of phase).
    batch: u32,
    batch_start: Option<Instant>,
    batch_last: Instant,
    batch_measuring: bool,
}

impl Recorder {
    /// A recorder for one task.
    pub fn new(shared: Arc<Shared>, ops: Arc<OpSeries>) -> Self {
        Recorder {
            shared,
            ops,
            hists: OPS.iter().map(|_| new_histogram()).collect(),
            unflushed: [Unflushed::default(); OPS.len()],
            batch: 0,
            batch_start: None,
            batch_last: Instant::now(),
            batch_measuring: false,
        }
    }

    /// The run.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Records `op`, issued at `started`, as completed now.
    pub fn done(&mut self, op: Op, started: Instant) {
        let now = Instant::now();
        let micros = clamp_micros(now.saturating_duration_since(started));
        let i = op.index();
        let measuring = self.shared.phase() == MEASURE;
        if self.batch > 0 && measuring != self.batch_measuring {
            self.flush();
        }
        if let (true, Some(h)) = (measuring, self.hists.get_mut(i)) {
            h.saturating_record(micros);
        }
        if let Some(u) = self.unflushed.get_mut(i) {
            u.count += 1;
            u.latency_sum_us = u.latency_sum_us.saturating_add(micros);
            u.latency_max_us = u.latency_max_us.max(micros);
        }
        self.batch += 1;
        self.batch_measuring = measuring;
        self.batch_last = now;
        let start = *self.batch_start.get_or_insert(now);
        if self.batch >= FLUSH_EVERY || now.saturating_duration_since(start) >= FLUSH_AFTER {
            self.flush();
        }
    }

    /// Adds the unflushed operations to the shared series and counters, in the window of the
    /// last of them.
    fn flush(&mut self) {
        let (at, measuring) = (self.batch_last, self.batch_measuring);
        for (op, unflushed) in OPS.into_iter().zip(&mut self.unflushed) {
            let u = std::mem::take(unflushed);
            if u.count == 0 {
                continue;
            }
            if let Some(c) = self.ops.of(op) {
                c.series.sent(at, u.count);
                c.series
                    .latencies(at, u.latency_sum_us, u.count, u.latency_max_us);
                if measuring {
                    c.measured.fetch_add(u.count, Ordering::Relaxed);
                }
            }
            match op {
                Op::Send => {
                    let w = &self.shared.windows;
                    w.sent(at, u.count);
                    w.latencies(at, u.latency_sum_us, u.count, u.latency_max_us);
                    self.shared.sent_total.fetch_add(u.count, Ordering::Relaxed);
                    if measuring {
                        self.shared
                            .sent_measured
                            .fetch_add(u.count, Ordering::Relaxed);
                    }
                }
                Op::Read => {
                    self.shared.windows.received_n(at, u.count);
                    self.shared.add_received(u.count);
                    if measuring {
                        self.shared
                            .received_measured
                            .fetch_add(u.count, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        }
        self.batch = 0;
        self.batch_start = None;
    }

    /// Records a failed `op`; returns whether the client should stop (the connection is gone).
    pub fn failed(&mut self, op: Op, error: &crate::drivers::DriverError) -> bool {
        self.ops.failed(op);
        if op == Op::Send {
            self.shared.send_errors.fetch_add(1, Ordering::Relaxed);
        } else {
            self.shared.ack_errors.fetch_add(1, Ordering::Relaxed);
        }
        self.shared
            .note_error(format!("{} failed: {}", op.name(), error.message));
        error.fatal
    }

    /// Flushes what is left and returns the task's histograms, one per operation in [`OPS`]
    /// order.
    pub fn finish(mut self) -> Vec<Histogram<u64>> {
        if self.batch > 0 {
            self.flush();
        }
        self.hists
    }
}

/// Merges task histograms, per operation.
pub fn merge(all: Vec<Vec<Histogram<u64>>>) -> Vec<Histogram<u64>> {
    let mut out: Vec<Histogram<u64>> = OPS.iter().map(|_| new_histogram()).collect();
    for task in all {
        for (o, h) in out.iter_mut().zip(task) {
            let _ = o.add(h);
        }
    }
    out
}

/// A pause after a failed operation, so that a failing target is not hammered.
pub const BACKOFF: Duration = Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::WindowSeries;
    use crate::workloads::run::{WindowLatency, WARMUP};

    fn run(phase: u8) -> (Arc<Shared>, Arc<OpSeries>) {
        let now = Instant::now();
        let series = || {
            WindowSeries::new(
                now,
                Duration::ZERO,
                Duration::from_secs(1),
                Duration::from_secs(10),
            )
        };
        let shared = Arc::new(Shared::new(
            1,
            now,
            phase,
            None,
            series(),
            WindowLatency::EndToEnd,
        ));
        (shared, Arc::new(OpSeries::new(series)))
    }

    fn sent(shared: &Shared) -> (u64, u64) {
        (
            shared.sent_total.load(Ordering::Relaxed),
            shared.sent_measured.load(Ordering::Relaxed),
        )
    }

    #[test]
    fn a_task_adds_its_operations_to_the_run_in_batches_and_all_of_them_at_the_end() {
        let (shared, ops) = run(MEASURE);
        let mut rec = Recorder::new(shared.clone(), ops.clone());
        let started = Instant::now();
        for _ in 0..FLUSH_EVERY - 1 {
            rec.done(Op::Send, started);
        }
        assert_eq!(sent(&shared), (0, 0), "flushed before the batch was full");
        rec.done(Op::Send, started);
        let full = u64::from(FLUSH_EVERY);
        assert_eq!(sent(&shared), (full, full));
        for _ in 0..3 {
            rec.done(Op::Send, started);
            rec.done(Op::Read, started);
        }
        let hists = rec.finish();
        assert_eq!(sent(&shared), (full + 3, full + 3));
        assert_eq!(shared.received_measured.load(Ordering::Relaxed), 3);
        assert_eq!(ops.measured(Op::Send), full + 3);
        assert_eq!(hists[Op::Send.index()].len(), full + 3);
        let rows = shared.windows.rows(shared.started, Instant::now());
        assert_eq!(rows.iter().map(|r| r.sent).sum::<u64>(), full + 3);
    }

    #[test]
    fn operations_before_the_measurement_are_flushed_as_warm_up_when_it_starts() {
        let (shared, ops) = run(WARMUP);
        let mut rec = Recorder::new(shared.clone(), ops.clone());
        let started = Instant::now();
        rec.done(Op::Send, started);
        rec.done(Op::Send, started);
        shared.set_phase(MEASURE);
        rec.done(Op::Send, started);
        assert_eq!(
            sent(&shared),
            (2, 0),
            "the warm-up batch was not flushed on its own"
        );
        let hists = rec.finish();
        assert_eq!(sent(&shared), (3, 1));
        assert_eq!(hists[Op::Send.index()].len(), 1);
    }

    #[test]
    fn a_slow_task_flushes_after_a_while_even_with_a_batch_not_full() {
        let (shared, ops) = run(MEASURE);
        let mut rec = Recorder::new(shared.clone(), ops);
        let started = Instant::now();
        rec.done(Op::Send, started);
        std::thread::sleep(FLUSH_AFTER + Duration::from_millis(1));
        rec.done(Op::Send, started);
        assert_eq!(sent(&shared), (2, 2));
        drop(rec);
    }
}
