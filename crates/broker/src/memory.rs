//! The broker-wide memory budget (`max_memory`).
//!
//! What is counted: the message data the store keeps in the broker's memory
//! ([`ferry_store::Queues::memory_bytes`]: the embedded engine's index of the messages it holds
//! and its cache of recent message bodies; the bodies themselves are in its log),
//! every connection's outbound bytes not yet written and every connection's pending requests
//! (see [`crate::outbound::Probe`]). As a safety net for what is not counted (buffers,
//! indexes, fragmentation), the process's resident size is read too: at the budget it counts
//! as full, once the counted bytes are at least half the budget (below that, what the process
//! holds beyond them is its own working memory and what the allocator keeps for reuse, which
//! refusing sends would not give back). A job adds them up every [`TICK`] and sets the
//! [`Pressure`] that the connections read with one atomic load:
//!
//! - below [`HIGH_WATERMARK_PERCENT`] of the budget: normal;
//! - above it: publishers are slowed: a connection holds a send back (and everything behind
//!   it, so the connection's order is kept) for up to [`SLOWDOWN`], to let consumers drain;
//! - at the budget (counted bytes, or the resident size): a send still held back after that
//!   is refused with `ResourceExhausted`, which is retryable; nothing of it took effect.
//!
//! Consumers keep working at any pressure: receives, acks and the like free memory.
//!
//! Before anyone is slowed, the store lets go of what it can read back
//! ([`ferry_store::Queues::relieve_memory`]: the embedded engine empties its body cache and keeps
//! it empty while memory is short; deliveries then read bodies from the log).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::outbound::Probe;

/// Percentage of `max_memory` above which publishers are slowed.
pub const HIGH_WATERMARK_PERCENT: u64 = 80;
/// How long a send is held back above the high watermark before it goes on (below the
/// budget) or is refused (at the budget).
pub const SLOWDOWN: Duration = Duration::from_millis(100);
/// How often the counted bytes are added up.
pub const TICK: Duration = Duration::from_millis(20);
/// The budget when the machine's memory cannot be read: 4 GiB.
const FALLBACK_MAX_MEMORY: u64 = 4 << 30;

/// How close the broker is to its memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    /// Below the high watermark.
    Normal = 0,
    /// Above the high watermark: publishers are slowed.
    High = 1,
    /// At the budget: publishers are refused.
    Full = 2,
}

/// The budget and what counts against it.
pub struct MemoryBudget {
    max: u64,
    high: u64,
    pressure: AtomicU8,
    /// The counted bytes at the last tick.
    counted: AtomicU64,
    /// The resident size at the last tick (0: unknown).
    resident: AtomicU64,
    connections: Mutex<Vec<Probe>>,
}

impl MemoryBudget {
    /// A budget of `max` bytes.
    pub fn new(max: u64) -> MemoryBudget {
        MemoryBudget {
            max,
            high: max / 100 * HIGH_WATERMARK_PERCENT,
            pressure: AtomicU8::new(Pressure::Normal as u8),
            counted: AtomicU64::new(0),
            resident: AtomicU64::new(0),
            connections: Mutex::new(Vec::new()),
        }
    }

    /// The budget in bytes.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The pressure at the last tick.
    pub fn pressure(&self) -> Pressure {
        match self.pressure.load(Ordering::Relaxed) {
            0 => Pressure::Normal,
            1 => Pressure::High,
            _ => Pressure::Full,
        }
    }

    /// The bytes counted at the last tick, and the resident size then (0: unknown).
    pub fn usage(&self) -> (u64, u64) {
        (
            self.counted.load(Ordering::Relaxed),
            self.resident.load(Ordering::Relaxed),
        )
    }

    /// Counts a connection's queued and pending bytes from now on (until it closes).
    pub fn register(&self, probe: Probe) {
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(probe);
    }

    /// Adds up `store_bytes` and the connections' bytes, and sets the pressure; `resident` is
    /// the process's resident size if known. Returns the new pressure if it changed.
    pub fn update(&self, store_bytes: u64, resident: Option<u64>) -> Option<Pressure> {
        let connections: u64 = {
            let mut list = self.connections.lock().unwrap_or_else(|p| p.into_inner());
            list.retain(Probe::is_alive);
            list.iter().map(|p| p.bytes() as u64).sum()
        };
        let counted = store_bytes.saturating_add(connections);
        self.counted.store(counted, Ordering::Relaxed);
        self.resident
            .store(resident.unwrap_or(0), Ordering::Relaxed);
        let resident_full = resident.is_some_and(|r| r >= self.max) && counted >= self.max / 2;
        let pressure = if counted >= self.max || resident_full {
            Pressure::Full
        } else if counted >= self.high {
            Pressure::High
        } else {
            Pressure::Normal
        };
        let before = self.pressure.swap(pressure as u8, Ordering::Relaxed);
        (before != pressure as u8).then_some(pressure)
    }
}

/// The default `max_memory`: half the memory the broker may use (the machine's, or its
/// control group's limit when lower), or 4 GiB when that cannot be read.
pub fn default_max_memory() -> u64 {
    available_memory().map_or(FALLBACK_MAX_MEMORY, |m| m / 2)
}

/// The memory this process may use: the machine's (`MemTotal`), or the control group's limit
/// when it is lower (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`).
pub fn available_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| kib_field(&t, "MemTotal:"));
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .find_map(|t| t.trim().parse::<u64>().ok());
    match (total, cgroup) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, c) => t.or(c),
    }
}

/// This process's resident size in bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    kib_field(
        &std::fs::read_to_string("/proc/self/status").ok()?,
        "VmRSS:",
    )
}

/// The figure of a `Name:   1234 kB` line, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kib_fields_are_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:  100 kB\n";
        assert_eq!(kib_field(text, "MemTotal:"), Some(24_576_000 * 1024));
        assert_eq!(kib_field(text, "VmRSS:"), None);
    }

    #[test]
    fn the_default_budget_is_half_the_memory_available() {
        let available = available_memory().expect("linux has /proc/meminfo");
        assert_eq!(default_max_memory(), available / 2);
        assert!(resident_bytes().expect("own status") > 0);
    }

    #[test]
    fn pressure_follows_the_watermarks_and_the_resident_size() {
        let budget = MemoryBudget::new(1000);
        assert_eq!(budget.update(100, Some(10)), None);
        assert_eq!(budget.pressure(), Pressure::Normal);
        assert_eq!(budget.update(800, Some(10)), Some(Pressure::High));
        assert_eq!(budget.update(1000, None), Some(Pressure::Full));
        assert_eq!(
            budget.update(500, Some(1000)),
            None,
            "resident size at the budget, half of it counted"
        );
        assert_eq!(budget.pressure(), Pressure::Full);
        assert_eq!(
            budget.update(10, Some(1000)),
            Some(Pressure::Normal),
            "the resident size alone, with little counted, is the allocator's"
        );
        assert_eq!(budget.usage(), (10, 1000));
    }
}
