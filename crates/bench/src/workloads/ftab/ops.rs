//! The operations the FTaB clients make and how each is recorded: a per-window series per
//! operation (shared, lock-free), a response-time histogram per operation and client task
//! (merged at the end), and the run-wide counters of [`Shared`] (sends as "sent", reads that
//! found a message as "received", send response time as the run's latency trace).

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
    series: Vec<WindowSeries>,
    measured: Vec<AtomicU64>,
    errors: Vec<AtomicU64>,
}

impl OpSeries {
    /// Series shaped like the run's (same origin, window and span).
    pub fn new(make: impl Fn() -> WindowSeries) -> Self {
        OpSeries {
            series: OPS.iter().map(|_| make()).collect(),
            measured: OPS.iter().map(|_| AtomicU64::new(0)).collect(),
            errors: OPS.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a failed `op`.
    pub fn failed(&self, op: Op) {
        self.errors[op.index()].fetch_add(1, Ordering::Relaxed);
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
        for op in OPS {
            let i = op.index();
            let rows = self.series[i].rows(measure_start, measure_end);
            let errors = self.errors[i].load(Ordering::Relaxed);
            let total: u64 = rows.iter().map(|r| r.sent).sum();
            if total == 0 && errors == 0 {
                continue;
            }
            let count = self.measured[i].load(Ordering::Relaxed);
            let summary = LatencySummary::of(&hists[i]);
            results.insert(
                op.name().to_string(),
                OperationResult::new(count, secs, errors, summary, &rows),
            );
            curves.insert(op.name().to_string(), percentile_curve(&hists[i]));
        }
        (results, curves)
    }
}

/// Percentile curves by operation name.
pub type Curves = BTreeMap<String, Vec<[f64; 2]>>;

/// What one client task records with.
pub struct Recorder {
    shared: Arc<Shared>,
    ops: Arc<OpSeries>,
    hists: Vec<Histogram<u64>>,
}

impl Recorder {
    /// A recorder for one task.
    pub fn new(shared: Arc<Shared>, ops: Arc<OpSeries>) -> Self {
        Recorder {
            shared,
            ops,
            hists: OPS.iter().map(|_| new_histogram()).collect(),
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
        self.ops.series[i].sent(now, 1);
        self.ops.series[i].latency(now, micros, 1);
        let measuring = self.shared.phase() == MEASURE;
        if measuring {
            self.ops.measured[i].fetch_add(1, Ordering::Relaxed);
            self.hists[i].saturating_record(micros);
        }
        match op {
            Op::Send => {
                self.shared.windows.sent(now, 1);
                self.shared.windows.latency(now, micros, 1);
                self.shared.sent_total.fetch_add(1, Ordering::Relaxed);
                if measuring {
                    self.shared.sent_measured.fetch_add(1, Ordering::Relaxed);
                }
            }
            Op::Read => {
                self.shared.windows.received(now);
                self.shared.add_received(1);
                if measuring {
                    self.shared
                        .received_measured
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {}
        }
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

    /// The task's histograms, one per operation in [`OPS`] order.
    pub fn finish(self) -> Vec<Histogram<u64>> {
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
