//! The disk space reserve: one segment's worth of allocated space that only operations freeing
//! space may use, so that a full disk still lets consumers drain it.
//!
//! Every segment's disk space is allocated when the segment starts
//! ([`BackendFile::allocate`](super::BackendFile::allocate)), so appends never meet a full
//! disk: only a new segment needs new space. A roll takes, in this order, a spare file
//! (allocated already), a new file whose space can be allocated, and only then the **reserve**:
//! the file `segments/reserve`, allocated at open. Once the reserve is in use the store is
//! *full*: operations that would grow the log (sends, publishes, new queues, topics and
//! subscriptions, new permanent client names) are refused with `ResourceExhausted` before they
//! change anything, and operations that lead to freeing space (takes, acks, nacks, deletes,
//! compaction, registry expiry) go on in the reserve. [`Space::replenish`], run by each
//! `maintain()`, makes the reserve again (from a spare freed by compaction, or a new file) as
//! soon as there is room: then the store is no longer full.
//!
//! A full disk is thus met when a segment starts, where the store can still choose which
//! operations go on, never in the middle of a write.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::backend::{is_no_space, Backend};
use super::spares::Spares;

/// Name of the reserve file in the segments directory.
pub const RESERVE_FILE: &str = "reserve";

/// The reserve of one log.
#[derive(Debug)]
pub struct Space {
    backend: Arc<dyn Backend>,
    path: PathBuf,
    /// How many bytes the reserve holds: one segment.
    bytes: u64,
    /// Whether the reserve file is there, allocated and unused (read without the lock).
    ready: AtomicBool,
    /// Serialises taking the reserve (the writer) and making it (`replenish`).
    lock: Mutex<()>,
}

impl Space {
    /// The reserve of the segments directory `dir`, `bytes` large; not made yet.
    pub fn new(backend: Arc<dyn Backend>, dir: &Path, bytes: u64) -> Space {
        Space {
            backend,
            path: dir.join(RESERVE_FILE),
            bytes,
            ready: AtomicBool::new(false),
            lock: Mutex::new(()),
        }
    }

    /// Whether the store is full: its reserve is in use, or could not be made. Only
    /// operations that lead to freeing space may then write.
    pub fn is_full(&self) -> bool {
        !self.ready.load(Ordering::Acquire)
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer, out of other files for a new segment: renames the reserve to `segment`.
    /// `Ok(false)` when there is no reserve to take.
    pub fn take(&self, segment: &Path) -> io::Result<bool> {
        let _held = self.locked();
        if !self.ready.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.backend.rename(&self.path, segment)?;
        self.ready.store(false, Ordering::Release);
        tracing::warn!(
            "the disk is full: the log continues in its reserve; sends and publishes are \
             refused until compaction or the operator frees space"
        );
        Ok(true)
    }

    /// Makes the reserve if it is missing: a new file whose space can be allocated, else (the
    /// disk is full) a spare from `spares`, whose space is allocated already. Blocking.
    /// Returns whether the reserve is ready. Does nothing (no I/O) when it is.
    pub fn replenish(&self, spares: &Spares) -> bool {
        if !self.is_full() {
            return true;
        }
        let _held = self.locked();
        let made = self.make(spares);
        match &made {
            Ok(()) => {
                self.ready.store(true, Ordering::Release);
                tracing::info!("log space reserve ready: the store takes every write again");
            }
            Err(e) if is_no_space(e) => {
                tracing::debug!(error = %e, "no room for the log space reserve yet");
            }
            Err(e) => tracing::warn!(error = %e, "could not make the log space reserve"),
        }
        made.is_ok()
    }

    fn make(&self, spares: &Spares) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        // A file left by an earlier attempt or run: allocated already, or nearly.
        let left = self.backend.list(dir)?.iter().any(|n| n == RESERVE_FILE);
        if !(left && self.backend.allocate(&self.path, self.bytes).is_ok()) {
            // A new file keeps the spares for new segments, which they make cheaper.
            let made = self
                .backend
                .create(&self.path)
                .and_then(|mut f| f.allocate(self.bytes));
            if let Err(e) = made {
                // Give back whatever part could be allocated, then try the spares.
                let _ = self.backend.remove(&self.path);
                loop {
                    let Some(spare) = spares.take() else {
                        return Err(e);
                    };
                    self.backend.rename(&spare, &self.path)?;
                    if self.backend.allocate(&self.path, self.bytes).is_ok() {
                        break;
                    }
                }
            }
        }
        self.backend.sync_dir(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::backend::FaultyBackend;

    fn setup(capacity: usize) -> (FaultyBackend, Space, Spares) {
        let disk = FaultyBackend::new();
        disk.set_capacity(Some(capacity));
        let dir = Path::new("/d/segments");
        let space = Space::new(Arc::new(disk.clone()), dir, 1000);
        let spares = Spares::new(dir.to_path_buf(), 4, Vec::new());
        (disk, space, spares)
    }

    #[test]
    fn the_reserve_is_made_taken_and_made_again() {
        let (disk, space, spares) = setup(10_000);
        assert!(space.is_full(), "no reserve before it is made");
        assert!(space.replenish(&spares));
        assert!(!space.is_full());
        assert_eq!(disk.used_bytes(), 1000, "the reserve's space is allocated");
        let seg = Path::new("/d/segments/00000000000000000002.log");
        assert!(space.take(seg).unwrap());
        assert!(space.is_full());
        assert!(!space.take(seg).unwrap(), "taken once");
        assert!(disk.file(seg).is_some());
        assert!(space.replenish(&spares), "there is room for another");
        assert!(!space.is_full());
    }

    #[test]
    fn a_full_disk_has_no_reserve_until_a_spare_comes() {
        let (disk, space, spares) = setup(900);
        assert!(!space.replenish(&spares));
        assert!(space.is_full());
        assert_eq!(
            disk.used_bytes(),
            0,
            "a failed attempt leaves nothing behind"
        );
        // Compaction kept a segment's file as a spare: it becomes the reserve.
        let spare = Path::new("/d/segments/00000000000000000001.spare");
        disk.set_file(spare, vec![7; 800]);
        spares.add(1);
        disk.set_capacity(Some(1000));
        assert!(space.replenish(&spares));
        assert_eq!(spares.len(), 0);
        assert!(disk.file(spare).is_none());
        assert_eq!(disk.used_bytes(), 1000);
    }
}
