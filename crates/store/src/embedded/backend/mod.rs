//! Every byte the embedded engine reads or writes goes through the [`Backend`] trait, so tests
//! can inject failures and rebuild the file image a crash would leave.
//!
//! - [`fs`]: [`FsBackend`], the real filesystem;
//! - `faulty` (with the `testing` feature): `FaultyBackend`, in-memory files with fault
//!   injection and crash images.
//!
//! The trait is deliberately small: the engine only ever lists a directory, reads a whole
//! segment at recovery and compaction, reads one record at a position (a message body that is
//! no longer cached), appends to the active segment, truncates a torn or failed tail, syncs,
//! allocates disk space ahead of writing (a segment's, and the reserve's), and renames or
//! removes compacted segments (a renamed one is kept as a spare and later reused, overwritten
//! from its start, as a new segment).

use std::fmt;
use std::io;
use std::path::Path;

#[cfg(any(test, feature = "testing"))]
pub mod faulty;
pub mod fs;

#[cfg(any(test, feature = "testing"))]
pub use faulty::{CrashMode, FaultKind, FaultyBackend};
pub use fs::FsBackend;

/// File operations the embedded engine needs. Implementations are shared between the writer
/// thread and recovery, hence `Send + Sync`. All methods block; the engine calls them only from
/// its writer thread or while opening, never on a tokio worker in the hot path.
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names (not paths) of the regular files directly in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// `len` bytes of the file at `path` from `offset`: a message's record, read when its body
    /// is delivered and no longer cached. Called from blocking threads, never under the state
    /// lock on the hot path. `UnexpectedEof` when the file is shorter. The default reads the
    /// whole file.
    fn read_at(&self, path: &Path, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let all = self.read(path)?;
        usize::try_from(offset)
            .ok()
            .and_then(|at| all.get(at..)?.get(..len))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
    }
    /// Asks for `len` bytes of the file at `path` from `offset` to be read into the page cache
    /// in the background, so that the reads that follow find them there: a hint, which returns
    /// at once and whose failure is ignored. The default does nothing (nothing to read ahead
    /// into).
    fn read_ahead(&self, _path: &Path, _offset: u64, _len: u64) {}
    /// Creates a file (truncating it if it exists) and opens it for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn BackendFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn BackendFile>>;
    /// Opens an existing file for writing from its start, keeping its content: each append
    /// overwrites the old bytes in place (past them, the file grows), and the old bytes after
    /// the last append stay until the file is truncated.
    fn open_overwrite(&self, path: &Path) -> io::Result<Box<dyn BackendFile>>;
    /// Renames a file, replacing `to` if it exists (durable after [`Backend::sync_dir`]).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the creation and removal of entries in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on the data directory so that two processes never write the same
    /// log; the lock lasts as long as the returned guard.
    fn lock_dir(&self, dir: &Path) -> io::Result<Box<dyn Send + Sync>>;
    /// A handle that syncs the file at `path` (fdatasync) from a thread other than the one
    /// writing it: background writeback, which must not change what a failed sync of the
    /// writer's own handle reports. The default does nothing.
    fn open_syncer(&self, path: &Path) -> io::Result<Syncer> {
        let _ = path;
        Ok(Box::new(|| Ok(())))
    }
    /// Allocates the disk space of the first `len` bytes of the existing file at `path`, as
    /// [`BackendFile::allocate`] does.
    fn allocate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.open_append(path)?.allocate(len)
    }
    /// Free and total bytes of the filesystem holding `dir` (free: what an unprivileged
    /// writer may still use), for the operator's warnings and readiness. The default knows
    /// nothing.
    fn disk_space(&self, dir: &Path) -> io::Result<DiskSpace> {
        let _ = dir;
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// See [`Backend::disk_space`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes still available to the broker.
    pub free: u64,
    /// Bytes of the filesystem.
    pub total: u64,
}

/// See [`Backend::open_syncer`]: each call syncs the file once.
pub type Syncer = Box<dyn FnMut() -> io::Result<()> + Send>;

/// An open file that is only ever appended to, synced or truncated.
pub trait BackendFile: Send {
    /// Appends all of `buf` at the end of what was written (for a file opened with
    /// [`Backend::open_overwrite`], over the old bytes there). On error a prefix of `buf` may
    /// have been written: the caller truncates back to the last length it knows good.
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes the content written so far durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the file to `len` bytes (dropping any old bytes past them); later appends go to
    /// the new end. Disk space allocated past `len` stays allocated where the backend can.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Allocates the disk space of the first `len` bytes without changing the file's length,
    /// so that appends up to `len` bytes cannot fail for lack of space. `ENOSPC` when the disk
    /// has not that much room (what could be allocated may stay allocated); `Unsupported` when
    /// the filesystem cannot allocate ahead. The space stays with the file, also once closed.
    fn allocate(&mut self, len: u64) -> io::Result<()>;
}

/// Whether `e` says the disk (`ENOSPC`) or a quota (`EDQUOT`) is full.
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(28 | 122))
        || matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
}
