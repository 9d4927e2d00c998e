//! What the tasks of one run share: the phase (warm-up, measure, cool-down, stop), counters,
//! the per-window series, and the first error seen. Latency histograms are kept per task and
//! merged at the end, so recording takes no lock.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::stats::WindowSeries;

/// How often a producer held back by its backlog limit looks whether the run has stopped.
const STOP_CHECK: Duration = Duration::from_millis(10);

/// Before measuring: traffic flows but is not counted.
pub const WARMUP: u8 = 0;
/// Counted and timed.
pub const MEASURE: u8 = 1;
/// After measuring: traffic still flows, not counted.
pub const COOLDOWN: u8 = 2;
/// Producers stop; consumers drain.
pub const STOP: u8 = 3;

/// Which latency the per-window series traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowLatency {
    /// From issuing a send to its acknowledgement (runs without consumers).
    SendToAck,
    /// From the send stamp in the body to the receipt.
    EndToEnd,
}

/// Counters and phase shared by every task of one run.
#[derive(Debug)]
pub struct Shared {
    /// Identifies this run's messages.
    pub run_id: u64,
    /// When the run started.
    pub started: Instant,
    phase: AtomicU8,
    /// Per-window counts and latencies.
    pub windows: WindowSeries,
    /// Which latency the windows trace.
    pub window_latency: WindowLatency,
    /// Sends acknowledged during the measurement.
    pub sent_measured: AtomicU64,
    /// This run's messages received during the measurement.
    pub received_measured: AtomicU64,
    /// Sends acknowledged in any phase.
    pub sent_total: AtomicU64,
    /// This run's messages received in any phase (add with [`Shared::add_received`]).
    pub received_total: AtomicU64,
    /// Notified when `received_total` grows, for producers held back by a backlog limit.
    received: Notify,
    /// Sends the target refused or that failed.
    pub send_errors: AtomicU64,
    /// Acks that failed.
    pub ack_errors: AtomicU64,
    /// Receives (and consumer tasks) that failed.
    pub receive_errors: AtomicU64,
    /// Deliveries from earlier runs (consumed and acked, not counted).
    pub foreign: AtomicU64,
    /// µs after `started` of the last send acknowledgement (message-count mode).
    pub last_sent_at: AtomicU64,
    /// µs after `started` of the last receipt (message-count mode).
    pub last_received_at: AtomicU64,
    /// Messages left to send in message-count mode (`u64::MAX` otherwise).
    pub to_send: AtomicU64,
    /// Open loop (latency workload): the body stamps (wall-clock µs of the intended send time)
    /// that count as measured, for senders and consumers alike, so that both count the same
    /// messages. `None`: what completes during the measured phase counts.
    pub measured_stamps: Option<Range<u64>>,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    /// A fresh run started at `started` in `phase`, with `to_send` messages to send (`None`:
    /// until stopped).
    pub fn new(
        run_id: u64,
        started: Instant,
        phase: u8,
        to_send: Option<u64>,
        windows: WindowSeries,
        window_latency: WindowLatency,
    ) -> Self {
        Shared {
            run_id,
            started,
            phase: AtomicU8::new(phase),
            windows,
            window_latency,
            sent_measured: AtomicU64::new(0),
            received_measured: AtomicU64::new(0),
            sent_total: AtomicU64::new(0),
            received_total: AtomicU64::new(0),
            received: Notify::new(),
            send_errors: AtomicU64::new(0),
            ack_errors: AtomicU64::new(0),
            receive_errors: AtomicU64::new(0),
            foreign: AtomicU64::new(0),
            last_sent_at: AtomicU64::new(0),
            last_received_at: AtomicU64::new(0),
            to_send: AtomicU64::new(to_send.unwrap_or(u64::MAX)),
            measured_stamps: None,
            first_error: Mutex::new(None),
        }
    }

    /// The same run, counting messages by their body stamp: those stamped in `stamps` are
    /// measured, whenever they complete (see [`Shared::measured_stamps`]).
    pub fn counting_stamps(mut self, stamps: Range<u64>) -> Self {
        self.measured_stamps = Some(stamps);
        self
    }

    /// Whether a message stamped `stamp` that completes now counts as measured.
    pub fn counts(&self, stamp: u64) -> bool {
        match &self.measured_stamps {
            Some(r) => r.contains(&stamp),
            None => self.phase() == MEASURE,
        }
    }

    /// Counts `n` more of this run's messages received, and wakes the producers waiting in
    /// [`Shared::wait_while`].
    pub fn add_received(&self, n: u64) {
        self.received_total.fetch_add(n, Ordering::Relaxed);
        self.received.notify_waiters();
    }

    /// Waits while `ahead` (messages sent, or deliveries expected) is more than `max` past
    /// the messages received, as [`Shared::wait_while`].
    pub async fn wait_for_backlog(&self, ahead: &AtomicU64, max: u64) {
        self.wait_while(|| {
            ahead.load(Ordering::Relaxed) > self.received_total.load(Ordering::Relaxed) + max
        })
        .await;
    }

    /// Waits while `over()` holds (a producer ahead of its consumers by more than its backlog
    /// limit) and the run goes on. Woken by every receipt rather than polling on a timer, so
    /// the pause ends as soon as the consumers caught up: a timer's granularity left both
    /// the load generator and the target idle for the rest of each tick.
    pub async fn wait_while(&self, over: impl Fn() -> bool) {
        loop {
            let notified = self.received.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !over() || self.stopping() {
                return;
            }
            // Phase changes do not notify: look again now and then.
            let _ = tokio::time::timeout(STOP_CHECK, notified).await;
        }
    }

    /// The current phase.
    pub fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    /// Moves to `phase`.
    pub fn set_phase(&self, phase: u8) {
        self.phase.store(phase, Ordering::Release);
    }

    /// Whether the producers should stop.
    pub fn stopping(&self) -> bool {
        self.phase() == STOP
    }

    /// Claims up to `n` messages to send; 0 when there are none left or the run is stopping.
    pub fn claim(&self, n: u64) -> u64 {
        if self.stopping() {
            return 0;
        }
        let mut claimed = 0;
        // fetch_update retries on contention; the closure only computes.
        let _ = self
            .to_send
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                claimed = left.min(n);
                (claimed > 0).then(|| left - claimed)
            });
        claimed
    }

    /// µs since the run started.
    pub fn elapsed_micros(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Remembers the first error seen, for the report.
    pub fn note_error(&self, what: String) {
        // A poisoned lock only means another task panicked while noting; keep its value.
        let mut first = self
            .first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert(what);
    }

    /// The error counters as the report shows them.
    pub fn error_counts(&self) -> crate::report::ErrorCounts {
        crate::report::ErrorCounts {
            send: self.send_errors.load(Ordering::Relaxed),
            ack: self.ack_errors.load(Ordering::Relaxed),
            receive: self.receive_errors.load(Ordering::Relaxed),
            foreign: self.foreign.load(Ordering::Relaxed),
            first: self.first_error(),
        }
    }

    /// The first error seen, if any.
    pub fn first_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until the consumers have received every message whose send was acknowledged, or
    /// until `limit` passes (without progress, when `reset_on_progress`).
    pub async fn wait_for_consumers(&self, limit: Duration, reset_on_progress: bool) {
        let mut deadline = Instant::now() + limit;
        let mut last = self.received_total.load(Ordering::Relaxed);
        loop {
            let received = self.received_total.load(Ordering::Relaxed);
            if received >= self.sent_total.load(Ordering::Relaxed) {
                return;
            }
            if reset_on_progress && received > last {
                last = received;
                deadline = Instant::now() + limit;
            }
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(phase: u8, to_send: Option<u64>) -> Shared {
        let now = Instant::now();
        let windows = WindowSeries::new(
            now,
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        Shared::new(1, now, phase, to_send, windows, WindowLatency::EndToEnd)
    }

    #[test]
    fn claims_stop_at_zero_and_on_stop() {
        let s = shared(MEASURE, Some(5));
        assert_eq!(s.claim(3), 3);
        assert_eq!(s.claim(3), 2);
        assert_eq!(s.claim(3), 0);
        let s = shared(MEASURE, None);
        assert_eq!(s.claim(10), 10);
        s.set_phase(COOLDOWN);
        assert_eq!(s.claim(10), 10);
        s.set_phase(STOP);
        assert_eq!(s.claim(10), 0);
    }

    #[test]
    fn counting_by_phase_or_by_stamp() {
        let s = shared(WARMUP, None);
        assert!(!s.counts(5));
        s.set_phase(MEASURE);
        assert!(s.counts(5));
        // By stamp, the phase does not matter: a message due in the measurement and received
        // after it counts, one due in the warm-up and received during it does not.
        let s = shared(MEASURE, None).counting_stamps(100..200);
        assert!(!s.counts(99));
        assert!(s.counts(100));
        assert!(s.counts(199));
        assert!(!s.counts(200));
        s.set_phase(COOLDOWN);
        assert!(s.counts(150));
    }

    /// Paused time: the runtime jumps to the next timer only when every task waits, so a
    /// producer woken by the receipt itself resumes before any of its polling timeout passed.
    #[tokio::test(start_paused = true)]
    async fn a_producer_held_back_by_its_backlog_resumes_on_the_receipt_that_shrinks_it() {
        let s = std::sync::Arc::new(shared(MEASURE, None));
        s.sent_total.store(100, Ordering::Relaxed);
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait_for_backlog(&s.sent_total, 10).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "ran ahead of its backlog limit");
        let start = tokio::time::Instant::now();
        s.add_received(50);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "resumed while still 50 ahead");
        s.add_received(45);
        waiter.await.unwrap();
        assert!(
            start.elapsed() < STOP_CHECK,
            "resumed by polling, not by the receipt"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_producer_held_back_by_its_backlog_stops_with_the_run() {
        let s = std::sync::Arc::new(shared(MEASURE, None));
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait_while(|| true).await }
        });
        tokio::task::yield_now().await;
        s.set_phase(STOP);
        waiter.await.unwrap();
    }

    #[test]
    fn first_error_sticks() {
        let s = shared(WARMUP, None);
        assert_eq!(s.first_error(), None);
        s.note_error("a".into());
        s.note_error("b".into());
        assert_eq!(s.first_error().as_deref(), Some("a"));
    }
}
