//! The embedded engine: a segmented append-only log on local disk with in-memory indexes.
//!
//! - [`config`]: [`EmbeddedConfig`] and [`FsyncPolicy`];
//! - [`backend`]: the [`Backend`] trait for file I/O, [`FsBackend`] and (with the `testing`
//!   feature) `FaultyBackend`;
//! - `format`: the bytes on disk (segment header, records), drawn in `docs/storage-format.md`;
//! - `bodies`: reading a message body back from its record in the log;
//! - `writer`: the group-commit writer thread, poisoning and write-failure carry;
//! - `state`: clients, queues, topics and subscriptions, messages, ready indexes, leases,
//!   transactions, segment accounting;
//! - `recovery`: replaying the log at open, truncating a torn tail;
//! - `compaction`: deleting and rewriting old segments (`maintain()`);
//! - `spares`: compacted segment files kept to be reused as new segments;
//! - `space`: the disk space reserve that lets a full disk still drain;
//! - `store`: [`EmbeddedStore`], the [`Store`](crate::Store) implementation tying them together;
//! - `receiving`: receives, picked in bounded steps and handed out once durable;
//! - `runs`: a run of publishes its subscribers all take directly, handed over at once;
//! - `figures`: the engine's figures kept outside the state lock.

use std::path::{Path, PathBuf};

mod admin;
pub mod backend;
mod bodies;
#[cfg(test)]
mod body_tests;
mod claims;
mod compaction;
pub mod config;
mod consumers;
#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod direct_tests;
#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod expiry_tests;
mod figures;
mod flusher;
#[cfg(test)]
mod flusher_tests;
mod format;
#[cfg(test)]
mod perf_tests;
#[cfg(test)]
mod properties_tests;
mod receiving;
mod recovery;
#[cfg(test)]
mod registry_tests;
#[cfg(test)]
mod run_tests;
mod runs;
mod space;
#[cfg(test)]
mod spare_tests;
mod spares;
mod state;
mod store;
mod user_file;
mod users;
mod writer;

pub use backend::{Backend, BackendFile, DiskSpace, FsBackend};
#[cfg(any(test, feature = "testing"))]
pub use backend::{CrashMode, FaultKind, FaultyBackend};
pub use config::{
    EmbeddedConfig, FsyncPolicy, FsyncPolicyParseError, DEFAULT_CACHE_BYTES,
    DEFAULT_PROPERTIES_BYTES, DEFAULT_SEGMENT_BYTES, DEFAULT_SPARE_SEGMENTS,
};
pub use store::EmbeddedStore;

/// Sub-directory of the data directory that holds the segments.
pub const SEGMENTS_DIR: &str = "segments";

/// Digits in a segment file name.
const SEGMENT_DIGITS: usize = 20;

/// Path of segment `n`: `<dir>/<20-digit n>.log`.
pub fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:0SEGMENT_DIGITS$}.log"))
}

/// Path of the spare file that was segment `n`: `<dir>/<20-digit n>.spare`.
pub fn spare_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:0SEGMENT_DIGITS$}.spare"))
}

/// The segment number a file name stands for, if it is a segment's name.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    parse_numbered(name, ".log")
}

/// The former segment number of a spare file, if `name` is a spare's name.
pub fn parse_spare_name(name: &str) -> Option<u64> {
    parse_numbered(name, ".spare")
}

fn parse_numbered(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != SEGMENT_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_roundtrip() {
        let p = segment_path(Path::new("/d"), 42);
        assert_eq!(p, Path::new("/d/00000000000000000042.log"));
        let name = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_segment_name(name), Some(42));
        assert_eq!(parse_segment_name("42.log"), None);
        assert_eq!(parse_segment_name("0000000000000000004x.log"), None);
        assert_eq!(parse_segment_name("00000000000000000042.tmp"), None);
        assert_eq!(
            parse_segment_name(&format!("{}.log", u64::MAX)),
            Some(u64::MAX)
        );
    }
}
