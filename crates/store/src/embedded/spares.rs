//! Spare segment files: compacted segments kept to be reused as new segments.
//!
//! A new segment file costs every commit something: each `fdatasync` of the active segment
//! must also commit the filesystem's metadata for it (the size grows with every batch, and
//! blocks are allocated as it grows). A file reused in place has its blocks allocated and
//! written already, and keeps its size, so the same `fdatasync` writes the data alone. So when
//! compaction frees a segment, it renames the file to `<n>.spare` (up to a limit) instead of
//! deleting it, and the writer renames a spare to the next segment's name and overwrites it
//! from its start ([`Backend::open_overwrite`](super::Backend::open_overwrite)).
//!
//! What makes the old bytes harmless:
//! - each record's CRC is masked with its segment's number
//!   ([`record::segment_mask`](super::format::record::segment_mask)): a record of the file's
//!   previous life, left past the new segment's end by a crash, fails its check, and recovery
//!   stops at the real end as it does at a torn tail;
//! - a crash after the rename but before the new header is on disk leaves the old header, which
//!   names another segment: recovery removes such a last segment as "being created";
//! - a segment is cut to its length when it is sealed, so a sealed segment never holds old
//!   bytes, and damage in one stays corruption;
//! - a spare enters the pool only once its rename is durable, so a crash never finds a reused
//!   file under the name of the segment it used to be.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::spare_path;

/// The spare files of a log, by their former segment numbers.
#[derive(Debug)]
pub struct Spares {
    dir: PathBuf,
    limit: usize,
    free: Mutex<Vec<u64>>,
}

impl Spares {
    /// A pool for the segments directory `dir` keeping at most `limit` files, holding `found`
    /// (the spares recovery found, at most `limit` of them).
    pub fn new(dir: PathBuf, limit: usize, found: Vec<u64>) -> Self {
        Spares {
            dir,
            limit,
            free: Mutex::new(found),
        }
    }

    fn free(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The path of a spare to reuse, taken out of the pool; `None` when there is none.
    pub fn take(&self) -> Option<PathBuf> {
        self.free().pop().map(|n| spare_path(&self.dir, n))
    }

    /// Whether one more spare may be kept.
    pub fn has_room(&self) -> bool {
        self.free().len() < self.limit
    }

    /// Adds the spare that was segment `n` (its rename is durable).
    pub fn add(&self, n: u64) {
        self.free().push(n);
    }

    /// Number of spares in the pool.
    pub fn len(&self) -> usize {
        self.free().len()
    }

    /// The segments directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_up_to_its_limit_and_hands_out_paths() {
        let spares = Spares::new(PathBuf::from("/d"), 2, vec![3]);
        assert!(spares.has_room());
        spares.add(5);
        assert!(!spares.has_room());
        assert_eq!(spares.len(), 2);
        assert_eq!(
            spares.take(),
            Some(PathBuf::from("/d/00000000000000000005.spare"))
        );
        assert_eq!(
            spares.take(),
            Some(PathBuf::from("/d/00000000000000000003.spare"))
        );
        assert_eq!(spares.take(), None);
        assert!(Spares::new(PathBuf::from("/d"), 0, Vec::new())
            .take()
            .is_none());
        assert!(!Spares::new(PathBuf::from("/d"), 0, Vec::new()).has_room());
    }
}
