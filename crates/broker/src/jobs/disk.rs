//! Watching the disk that holds the store: a warning when its free space runs low (sends
//! start failing with `StoreUnavailable` when it runs out), repeated every few minutes while
//! it stays low, and a line when it is back to normal.

use std::time::{Duration, Instant};

/// How often the upkeep looks.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// How often the warning repeats while the disk stays low.
pub const REPEAT: Duration = Duration::from_secs(300);

/// Free bytes below which a disk of `total` bytes is nearly full: a tenth of it, but at least
/// 256 MiB and at most 10 GiB (a tenth of a large disk is still plenty).
pub fn low_threshold(total: u64) -> u64 {
    (total / 10).clamp(256 << 20, 10 << 30)
}

/// What to log after a look at the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskEvent {
    /// Free space is low.
    Low {
        /// Bytes free.
        free: u64,
        /// Bytes of the disk.
        total: u64,
    },
    /// Free space is back above the threshold.
    Recovered {
        /// Bytes free.
        free: u64,
    },
}

/// The watcher's memory between looks.
#[derive(Debug, Default)]
pub struct DiskWatch {
    /// When the last warning was logged, while the disk is low.
    warned: Option<Instant>,
}

impl DiskWatch {
    /// Takes one reading (`None`: the engine does not know, e.g. PostgreSQL) at `now`.
    pub fn observe(&mut self, space: Option<(u64, u64)>, now: Instant) -> Option<DiskEvent> {
        let (free, total) = space?;
        if free < low_threshold(total) {
            let due = self
                .warned
                .is_none_or(|at| now.saturating_duration_since(at) >= REPEAT);
            if due {
                self.warned = Some(now);
                return Some(DiskEvent::Low { free, total });
            }
            None
        } else if self.warned.take().is_some() {
            Some(DiskEvent::Recovered { free })
        } else {
            None
        }
    }
}

/// Logs `event`.
pub fn log(event: DiskEvent) {
    match event {
        DiskEvent::Low { free, total } => tracing::warn!(
            free_mib = free >> 20,
            total_mib = total >> 20,
            "disk nearly full where the store writes: sends fail with StoreUnavailable once it is full; free space or move the data directory"
        ),
        DiskEvent::Recovered { free } => {
            tracing::info!(free_mib = free >> 20, "disk space where the store writes is back to normal")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn thresholds_are_a_tenth_within_bounds() {
        assert_eq!(low_threshold(20 * GIB), 2 * GIB);
        assert_eq!(low_threshold(GIB), 256 << 20);
        assert_eq!(low_threshold(1000 * GIB), 10 * GIB);
    }

    #[test]
    fn warns_once_then_every_few_minutes_and_says_when_it_recovered() {
        let mut w = DiskWatch::default();
        let t0 = Instant::now();
        let total = 20 * GIB;
        assert_eq!(w.observe(None, t0), None, "an engine without a disk");
        assert_eq!(w.observe(Some((10 * GIB, total)), t0), None);
        assert_eq!(
            w.observe(Some((GIB, total)), t0),
            Some(DiskEvent::Low { free: GIB, total })
        );
        assert_eq!(w.observe(Some((GIB, total)), t0 + CHECK_INTERVAL), None);
        assert_eq!(
            w.observe(Some((GIB / 2, total)), t0 + REPEAT),
            Some(DiskEvent::Low {
                free: GIB / 2,
                total
            })
        );
        assert_eq!(
            w.observe(Some((5 * GIB, total)), t0 + REPEAT + CHECK_INTERVAL),
            Some(DiskEvent::Recovered { free: 5 * GIB })
        );
        assert_eq!(w.observe(Some((5 * GIB, total)), t0 + REPEAT * 2), None);
    }
}
