//! Where an interaction start's time went between its due time and the moment it had its
//! sender connection: the timer (the driver's timing code woke late: the load generator's
//! process did not get a core in time), the dispatch (the start's task waited for a runtime
//! worker), the connection (every connection the start may use was busy, or one was being
//! opened). A start later than [`PACING_TOLERANCE`] is a pacing miss (SPECjms: "the timing
//! code found itself behind where it thought it should be"); each miss is put down to the
//! phase that took the largest part of its lateness, so a report says whether the generator
//! (timer, dispatch) or the connections it waited for held starts up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// A start later than this after its due time is a pacing miss.
pub const PACING_TOLERANCE: Duration = Duration::from_millis(10);

/// The phases of a start before it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// From the due time until the driver's timer woke.
    Timer = 0,
    /// From then until the start's task ran.
    Dispatch = 1,
    /// From then until it had a sender connection.
    Connection = 2,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 3] = [Phase::Timer, Phase::Dispatch, Phase::Connection];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Timer => "timer",
            Phase::Dispatch => "dispatch",
            Phase::Connection => "connection",
        }
    }
}

/// The instants of one start.
#[derive(Debug, Clone, Copy)]
pub struct StartTiming {
    /// When it was due.
    pub due: Instant,
    /// When the driver's timer woke for it.
    pub woke: Instant,
    /// When its task first ran.
    pub ran: Instant,
    /// When it had its sender connection.
    pub connected: Instant,
}

impl StartTiming {
    /// How long each phase took, in the order of [`Phase::ALL`].
    pub fn phases(&self) -> [Duration; 3] {
        [
            self.woke.saturating_duration_since(self.due),
            self.ran.saturating_duration_since(self.woke),
            self.connected.saturating_duration_since(self.ran),
        ]
    }

    /// Whether it is a pacing miss, and then the phase that took most of its lateness.
    pub fn miss(&self) -> Option<Phase> {
        if self.connected.saturating_duration_since(self.due) <= PACING_TOLERANCE {
            return None;
        }
        let phases = self.phases();
        Phase::ALL
            .into_iter()
            .zip(phases)
            .max_by_key(|(_, d)| *d)
            .map(|(p, _)| p)
    }
}

/// The pacing figures of one interaction's counted starts.
#[derive(Debug, Default)]
pub struct PacingCounters {
    /// Starts counted.
    pub starts: AtomicU64,
    /// Of those, pacing misses.
    pub misses: AtomicU64,
    /// Misses put down to each phase.
    late_by: [AtomicU64; 3],
    /// Time in each phase over every counted start, µs.
    waited_us: [AtomicU64; 3],
}

/// What [`PacingCounters`] hold, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PacingFigures {
    /// Misses whose lateness went mostly to the timer, the dispatch or the connection.
    pub misses_by_phase: std::collections::BTreeMap<&'static str, u64>,
    /// Mean time of a start in each phase, ms.
    pub mean_ms_by_phase: std::collections::BTreeMap<&'static str, f64>,
}

impl PacingCounters {
    /// Counts one start.
    pub fn record(&self, t: &StartTiming) {
        self.starts.fetch_add(1, Ordering::Relaxed);
        for (slot, d) in self.waited_us.iter().zip(t.phases()) {
            slot.fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        }
        if let Some(p) = t.miss() {
            self.misses.fetch_add(1, Ordering::Relaxed);
            if let Some(slot) = self.late_by.get(p as usize) {
                slot.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The figures so far.
    pub fn figures(&self) -> PacingFigures {
        let starts = self.starts.load(Ordering::Relaxed).max(1) as f64;
        let mut f = PacingFigures::default();
        for (p, (late, waited)) in Phase::ALL
            .into_iter()
            .zip(self.late_by.iter().zip(&self.waited_us))
        {
            f.misses_by_phase
                .insert(p.name(), late.load(Ordering::Relaxed));
            f.mean_ms_by_phase.insert(
                p.name(),
                waited.load(Ordering::Relaxed) as f64 / starts / 1000.0,
            );
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(timer_ms: u64, dispatch_ms: u64, connection_ms: u64) -> StartTiming {
        let due = Instant::now();
        let woke = due + Duration::from_millis(timer_ms);
        let ran = woke + Duration::from_millis(dispatch_ms);
        StartTiming {
            due,
            woke,
            ran,
            connected: ran + Duration::from_millis(connection_ms),
        }
    }

    #[test]
    fn a_miss_is_put_down_to_the_phase_that_took_longest() {
        assert_eq!(
            timing(3, 3, 4).miss(),
            None,
            "10 ms is within the tolerance"
        );
        assert_eq!(timing(3, 3, 5).miss(), Some(Phase::Connection));
        assert_eq!(timing(12, 0, 0).miss(), Some(Phase::Timer));
        assert_eq!(timing(2, 7, 3).miss(), Some(Phase::Dispatch));
        let c = PacingCounters::default();
        for t in [
            timing(0, 0, 30),
            timing(15, 1, 0),
            timing(1, 1, 1),
            timing(0, 0, 50),
        ] {
            c.record(&t);
        }
        assert_eq!(c.starts.load(Ordering::Relaxed), 4);
        assert_eq!(c.misses.load(Ordering::Relaxed), 3);
        let f = c.figures();
        assert_eq!(f.misses_by_phase["connection"], 2);
        assert_eq!(f.misses_by_phase["timer"], 1);
        assert_eq!(f.misses_by_phase["dispatch"], 0);
        // (30 + 0 + 1 + 50) / 4 = 20.25 ms waiting for a connection, (0 + 15 + 1 + 0) / 4 = 4
        // ms for the timer.
        assert!((f.mean_ms_by_phase["connection"] - 20.25).abs() < 1e-9);
        assert!((f.mean_ms_by_phase["timer"] - 4.0).abs() < 1e-9);
        assert!((f.mean_ms_by_phase["dispatch"] - 0.5).abs() < 1e-9);
    }
}
