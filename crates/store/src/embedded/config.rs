//! How an embedded store is opened: its directory, fsync policy, segment size and file backend.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::backend::{Backend, FsBackend};

/// Default size at which the active segment is sealed and a new one started: 64 MiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Default number of compacted segment files kept to be reused as new segments: 8 (512 MiB at
/// the default segment size; the broker compacts every second, and its heaviest loads roll a
/// segment about every half second). Reusing a file makes each commit's `fdatasync` cheaper (see
/// `spares`); the spares are disk space the log holds beyond its segments.
pub const DEFAULT_SPARE_SEGMENTS: usize = 8;

/// When the log is fsynced. Whatever the policy, every record is handed to the kernel (a `write`
/// system call) before the call that produced it returns, so killing the process (`kill -9`)
/// never loses an acknowledged operation; the policies differ only in what a crash of the
/// machine (power loss, kernel panic) may lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// A mutating call returns only after its record is on stable storage. Group commit: one
    /// fsync covers every record written since the previous one. A machine crash loses nothing
    /// acknowledged.
    #[default]
    Always,
    /// The log is fsynced at most this long after a write. A machine crash may lose the
    /// operations acknowledged during the last interval.
    Interval(Duration),
    /// The log is fsynced only by `flush()` (shutdown) and when a segment is sealed. A machine
    /// crash may lose everything the kernel had not yet written back.
    Never,
}

/// Why an fsync policy string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fsync policy '{0}': expected 'always', 'interval:<ms>' (ms > 0) or 'never'")]
pub struct FsyncPolicyParseError(pub String);

impl FromStr for FsyncPolicy {
    type Err = FsyncPolicyParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "never" => Ok(FsyncPolicy::Never),
            _ => {
                let ms = s
                    .strip_prefix("interval:")
                    .and_then(|ms| ms.parse::<u64>().ok())
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| FsyncPolicyParseError(s.to_owned()))?;
                Ok(FsyncPolicy::Interval(Duration::from_millis(ms)))
            }
        }
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsyncPolicy::Always => f.write_str("always"),
            FsyncPolicy::Interval(d) => write!(f, "interval:{}", d.as_millis()),
            FsyncPolicy::Never => f.write_str("never"),
        }
    }
}

/// Everything [`EmbeddedStore::open`](super::EmbeddedStore::open) needs.
#[derive(Clone)]
pub struct EmbeddedConfig {
    /// The data directory; segments live in `<dir>/segments/`.
    pub dir: PathBuf,
    /// When the log is fsynced.
    pub fsync: FsyncPolicy,
    /// Size at which the active segment is sealed and a new one started. Small values (a few
    /// hundred bytes) are allowed so that tests exercise rolling and compaction.
    pub segment_bytes: u64,
    /// How many compacted segment files are kept to be reused as new segments (0: delete
    /// them all).
    pub spare_segments: usize,
    /// Where file I/O goes: the real filesystem, or a `FaultyBackend` (`testing` feature)
    /// in tests.
    pub backend: Arc<dyn Backend>,
    /// Most bytes of recently written message bodies kept in memory, so that consumers that
    /// keep up never read the disk (see `docs/storage-format.md`, Message bodies); bodies
    /// evicted from it are read back from the log.
    pub cache_bytes: u64,
    /// Most bytes of persistent messages' properties kept in memory; the properties of the
    /// messages stored beyond it stay in the log only, read back (without the state lock)
    /// when a selector or a delivery needs them.
    pub properties_bytes: u64,
}

/// The properties kept in memory unless configured: 64 MiB.
pub const DEFAULT_PROPERTIES_BYTES: u64 = 64 * 1024 * 1024;

/// The body cache's size unless configured: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

impl EmbeddedConfig {
    /// A configuration with the defaults: fsync always, 64 MiB segments, up to 8 spare
    /// segment files, the real filesystem.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        EmbeddedConfig {
            dir: dir.into(),
            fsync: FsyncPolicy::Always,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            spare_segments: DEFAULT_SPARE_SEGMENTS,
            backend: Arc::new(FsBackend),
            cache_bytes: DEFAULT_CACHE_BYTES,
            properties_bytes: DEFAULT_PROPERTIES_BYTES,
        }
    }
}

impl fmt::Debug for EmbeddedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedConfig")
            .field("dir", &self.dir)
            .field("fsync", &self.fsync)
            .field("segment_bytes", &self.segment_bytes)
            .field("spare_segments", &self.spare_segments)
            .field("backend", &self.backend)
            .field("cache_bytes", &self.cache_bytes)
            .field("properties_bytes", &self.properties_bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_every_policy() {
        for (text, policy) in [
            ("always", FsyncPolicy::Always),
            ("never", FsyncPolicy::Never),
            (
                "interval:1",
                FsyncPolicy::Interval(Duration::from_millis(1)),
            ),
            (
                "interval:250",
                FsyncPolicy::Interval(Duration::from_millis(250)),
            ),
        ] {
            assert_eq!(text.parse::<FsyncPolicy>().unwrap(), policy);
            assert_eq!(policy.to_string(), text);
        }
    }

    #[test]
    fn refuses_anything_else_with_a_clear_message() {
        for bad in [
            "",
            "Always",
            "ALWAYS",
            " always",
            "sometimes",
            "interval",
            "interval:",
            "interval:0",
            "interval:-5",
            "interval:1.5",
            "interval:ms",
            "interval:10ms",
            "never:1",
        ] {
            let err = bad.parse::<FsyncPolicy>().unwrap_err();
            let text = err.to_string();
            assert!(text.contains(&format!("'{bad}'")), "{text}");
            assert!(text.contains("interval:<ms>"), "{text}");
        }
    }
}
