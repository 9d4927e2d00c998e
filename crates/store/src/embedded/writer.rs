//! The group-commit writer: one dedicated thread owns the active segment.
//!
//! Callers encode records into a shared in-memory buffer under a short mutex (while they hold
//! the state lock, so that log order is state-change order) and get a [`Ticket`] for the batch
//! the records belong to. The writer thread swaps the buffer out, writes it with one `write`,
//! fsyncs once (policy permitting) and completes every ticket of the batch. While it writes,
//! the next batch accumulates: under load one fsync covers thousands of records.
//!
//! Failures:
//! - a failed `write` (disk full) truncates the file back to its last good length, fails the
//!   batch with `Unavailable` and keeps the unwritten bytes as a *carry*, written before
//!   anything else by the next attempt. The in-memory state already reflects those records, so
//!   they must reach the log before any later record does; meanwhile the store is *degraded*
//!   and refuses new mutations until a retry succeeds ([`Log::probe`]), so that a client
//!   retrying against a full disk does not pile up changes whose fate is unknown.
//! - a failed fsync *poisons* the store: the kernel may have dropped the dirty pages it could
//!   not write back, so what is on disk is unknown and no later write can be trusted. Every
//!   write fails with `Unavailable` until the store is reopened (recovery reads what is really
//!   there).
//!
//! A new segment reuses a spare file when there is one (see [`Spares`]), or gets a new file;
//! either way its disk space is allocated before anything is written to it, so that appends
//! never meet a full disk. When no file can be had (the disk is full), it takes the reserve
//! (see [`Space`]). Under the `never` and `interval` policies a [`Flusher`] syncs the active
//! segment in the background every few MiB, so that the syncs the writer still does (sealing
//! a segment, each interval) stay short.

use std::io;
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::Notify;

use super::backend::{Backend, BackendFile};
use super::config::FsyncPolicy;
use super::flusher::Flusher;
use super::segment_path;
use super::space::Space;
use super::spares::Spares;
use crate::error::StoreError;

/// How many bytes a segment whose header takes `header_len` bytes holds: `segment_bytes`, but
/// at least half of it for records, however large the header (so that a store with a huge
/// header does not roll at every record).
pub fn segment_capacity(segment_bytes: u64, header_len: u64) -> u64 {
    segment_bytes.max(header_len.saturating_add(segment_bytes / 2))
}

/// A written buffer larger than this is not kept for reuse, so one huge batch does not pin its
/// memory forever.
const MAX_SPARE_CAPACITY: usize = 8 * 1024 * 1024;

/// One group-commit batch: completed once, with the outcome for every record in it.
#[derive(Debug, Default)]
struct Batch {
    result: OnceLock<Result<(), StoreError>>,
    notify: Notify,
}

impl Batch {
    fn complete(&self, result: Result<(), StoreError>) {
        let _ = self.result.set(result);
        self.notify.notify_waiters();
    }
}

/// A claim on a batch's outcome.
#[derive(Debug, Clone)]
pub struct Ticket(Arc<Batch>);

impl Ticket {
    /// Waits (without blocking the thread) until the batch is written and, as the policy says,
    /// synced.
    pub async fn wait(&self) -> Result<(), StoreError> {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            // Register before checking, so a completion in between is not missed.
            notified.as_mut().enable();
            if let Some(result) = self.0.result.get() {
                return result.clone();
            }
            notified.await;
        }
    }
}

/// Waits for an optional ticket.
pub async fn wait(ticket: Option<Ticket>) -> Result<(), StoreError> {
    match ticket {
        Some(t) => t.wait().await,
        None => Ok(()),
    }
}

/// Seal the current segment and continue in a new one, before the bytes at `at`.
#[derive(Debug)]
struct Roll {
    at: usize,
    segment: u64,
    header: Vec<u8>,
}

/// An fsync slower than this is logged as a warning (rate-limited).
pub const SLOW_FSYNC: std::time::Duration = std::time::Duration::from_millis(500);

/// Work handed from callers to the writer.
#[derive(Debug, Default)]
struct Work {
    buf: Vec<u8>,
    rolls: Vec<Roll>,
    /// Sync even if the policy would not (flush, compaction).
    force_sync: bool,
    /// Someone asked for a retry of the carry ([`Log::probe`]).
    probe: bool,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.rolls.is_empty() && !self.force_sync && !self.probe
    }

    /// Puts `self` (a carry) in front of `next`.
    fn prepend_to(mut self, next: Work) -> Work {
        let shift = self.buf.len();
        self.buf.extend_from_slice(&next.buf);
        self.rolls.extend(next.rolls.into_iter().map(|mut r| {
            r.at += shift;
            r
        }));
        self.force_sync |= next.force_sync;
        self.probe |= next.probe;
        self
    }
}

/// What callers and the writer share, under [`Shared::pending`].
#[derive(Debug)]
struct Pending {
    work: Work,
    batch: Arc<Batch>,
    /// The batch the writer is working on, so that a reader can wait for it.
    inflight: Option<Arc<Batch>>,
    writer_idle: bool,
    shutdown: bool,
}

#[derive(Debug)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    /// Set once by a failed fsync; the reason.
    poisoned: OnceLock<String>,
    /// A write failed and its bytes are carried; cleared by a successful retry.
    degraded: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // The writer never panics while holding the lock; if something did, the data is still
        // consistent (plain buffers), so carry on rather than cascade the panic.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn poison(&self, why: String) {
        tracing::error!(reason = %why, "embedded store poisoned: refusing writes until reopened");
        let _ = self.poisoned.set(why);
    }

    fn poisoned_error(&self) -> Option<StoreError> {
        self.poisoned.get().map(|why| {
            StoreError::Unavailable(format!("{why}; the store refuses writes until reopened"))
        })
    }
}

/// The caller side of the log.
#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Where the writer starts: the open active segment.
pub struct Head {
    /// The active segment's file, opened for appending.
    pub file: Box<dyn BackendFile>,
    /// Its number.
    pub segment: u64,
    /// Its length (records are appended from here).
    pub len: u64,
}

/// Where the writer gets files for new segments, and how large they are.
pub struct Files {
    /// Compacted segment files to reuse.
    pub spares: Arc<Spares>,
    /// The reserve, for when there is no other file.
    pub space: Arc<Space>,
    /// The configured segment size.
    pub segment_bytes: u64,
}

impl Log {
    /// Starts the writer thread on the active segment.
    pub fn start(
        backend: Arc<dyn Backend>,
        seg_dir: PathBuf,
        policy: FsyncPolicy,
        head: Head,
        files: Files,
        figures: Arc<super::figures::EngineFigures>,
    ) -> io::Result<Log> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                work: Work::default(),
                batch: Arc::default(),
                inflight: None,
                writer_idle: false,
                shutdown: false,
            }),
            wake: Condvar::new(),
            poisoned: OnceLock::new(),
            degraded: AtomicBool::new(false),
        });
        // Every commit syncs under `always`: nothing piles up for a background sync to do.
        // Without the thread the log still works, its syncs are only longer.
        let flusher = match policy {
            FsyncPolicy::Always => None,
            _ => Flusher::spawn(backend.clone())
                .map_err(|e| tracing::warn!(error = %e, "no background writeback thread"))
                .ok(),
        };
        let writer = Writer {
            shared: shared.clone(),
            flusher,
            backend,
            seg_dir,
            policy,
            file: head.file,
            segment: head.segment,
            len: head.len,
            dirty: false,
            last_sync: Instant::now(),
            carry: None,
            spare: Vec::new(),
            files,
            figures,
        };
        let thread = std::thread::Builder::new()
            .name("ferry-log-writer".into())
            .spawn(move || writer.run())?;
        Ok(Log {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Locks the pending buffer for appending. Hold it only to encode records.
    pub fn lock(&self) -> LogGuard<'_> {
        LogGuard {
            pending: Some(self.shared.lock()),
            shared: &self.shared,
            wake: false,
        }
    }

    /// `Unavailable` if the store is poisoned.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        match self.shared.poisoned_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Poisons the store from outside the writer (a failed directory sync during compaction).
    pub fn poison(&self, why: String) {
        self.shared.poison(why);
    }

    /// Whether a failed write's bytes wait to be retried.
    pub fn is_degraded(&self) -> bool {
        self.shared.degraded.load(Ordering::Acquire)
    }

    /// Retries carried bytes now; `Ok` once they are written (the store is healthy again).
    pub async fn probe(&self) -> Result<(), StoreError> {
        let ticket = {
            let mut g = self.lock();
            g.pending_mut().work.probe = true;
            g.wake = true;
            g.ticket()
        };
        ticket.wait().await
    }

    /// Makes everything appended so far durable, whatever the policy.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let ticket = {
            let mut g = self.lock();
            g.force_sync();
            g.ticket()
        };
        ticket.wait().await
    }

    /// Stops the writer after it has written (and synced) what is pending.
    pub fn shutdown(&self) {
        {
            let mut p = self.shared.lock();
            p.shutdown = true;
        }
        self.shared.wake.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::error!("log writer thread panicked");
            }
        }
    }
}

/// The pending buffer, locked. Dropping it wakes the writer if something was appended.
pub struct LogGuard<'a> {
    pending: Option<MutexGuard<'a, Pending>>,
    shared: &'a Shared,
    wake: bool,
}

impl LogGuard<'_> {
    fn pending_mut(&mut self) -> &mut Pending {
        // Always Some until drop.
        match self.pending.as_mut() {
            Some(p) => p,
            None => unreachable!("log guard used after drop"),
        }
    }

    /// The buffer to encode records into.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        self.wake = true;
        &mut self.pending_mut().work.buf
    }

    /// Whether anything was appended through this guard (a call that wrote nothing, such as a
    /// non-persistent send, need not wait for the batch).
    pub fn appended(&self) -> bool {
        self.wake
    }

    /// Seals the active segment before the bytes at `at` of [`LogGuard::buf`] and continues in
    /// `segment`, which starts with `header`.
    pub fn roll_at(&mut self, at: usize, segment: u64, header: Vec<u8>) {
        self.wake = true;
        self.pending_mut().work.rolls.push(Roll {
            at,
            segment,
            header,
        });
    }

    /// Makes this batch durable whatever the policy.
    pub fn force_sync(&mut self) {
        self.wake = true;
        self.pending_mut().work.force_sync = true;
    }

    /// A ticket for the batch being filled.
    pub fn ticket(&mut self) -> Ticket {
        Ticket(self.pending_mut().batch.clone())
    }

    /// A ticket covering everything appended so far, if some of it is not written yet (the
    /// batch being filled, or else the one the writer is working on).
    pub fn ticket_if_pending(&mut self) -> Option<Ticket> {
        let p = self.pending_mut();
        if !p.work.is_empty() {
            return Some(Ticket(p.batch.clone()));
        }
        p.inflight.clone().map(Ticket)
    }

    /// The ticket to wait for when this hold appended anything ([`LogGuard::appended`]), as
    /// [`LogGuard::ticket_if_pending`] gives it; `None` when it appended nothing.
    pub fn ticket_if_appended(&mut self) -> Option<Ticket> {
        if self.appended() {
            self.ticket_if_pending()
        } else {
            None
        }
    }
}

impl Drop for LogGuard<'_> {
    fn drop(&mut self) {
        let idle = self.pending.as_ref().is_some_and(|p| p.writer_idle);
        // Unlock first so the woken writer does not block on the mutex straight away.
        self.pending = None;
        if self.wake && idle {
            self.shared.wake.notify_one();
        }
    }
}

/// The writer thread's state.
struct Writer {
    shared: Arc<Shared>,
    /// Background writeback, under the policies that do not sync every commit.
    flusher: Option<Flusher>,
    backend: Arc<dyn Backend>,
    seg_dir: PathBuf,
    policy: FsyncPolicy,
    file: Box<dyn BackendFile>,
    segment: u64,
    /// Bytes of the active segment known to be written in full.
    len: u64,
    /// Written but not synced.
    dirty: bool,
    last_sync: Instant,
    /// Bytes a failed write left unwritten; written before anything else.
    carry: Option<Work>,
    spare: Vec<u8>,
    /// Where new segments' files come from.
    files: Files,
    /// Fsync latency and group-commit sizes, for metrics.
    figures: Arc<super::figures::EngineFigures>,
}

/// How a batch failed.
enum Failure {
    /// The bytes from chunk onwards were not written; they are carried.
    Write(Work, String),
    /// The store is poisoned.
    Poisoned,
}

impl Writer {
    fn run(mut self) {
        let _guard = ExitGuard(self.shared.clone());
        while let Some((work, batch)) = self.next_work() {
            // The callers waiting on this write: every ticket holds the batch, besides this
            // variable and the in-flight slot.
            let waiting = Arc::strong_count(&batch).saturating_sub(2);
            if waiting > 0 {
                self.figures.batch.observe(waiting as f64);
            }
            let result = self.process(work);
            // Complete before forgetting the batch: a reader that still finds it in `inflight`
            // then gets its outcome at once, and one that does not find it may rely on it.
            batch.complete(result);
            self.shared.lock().inflight = None;
        }
        if self.dirty && self.shared.poisoned.get().is_none() {
            if let Err(e) = self.file.sync() {
                tracing::warn!(error = %e, "final log sync failed");
            }
        }
    }

    /// Waits for work (or for the interval policy's next sync); `None` at shutdown.
    fn next_work(&mut self) -> Option<(Work, Arc<Batch>)> {
        let mut p = self.shared.lock();
        loop {
            if !p.work.is_empty() {
                let fresh = Work {
                    buf: mem::take(&mut self.spare),
                    ..Work::default()
                };
                let work = mem::replace(&mut p.work, fresh);
                let batch = mem::take(&mut p.batch);
                p.inflight = Some(batch.clone());
                return Some((work, batch));
            }
            if p.shutdown {
                return None;
            }
            let timeout = match self.policy {
                FsyncPolicy::Interval(every) if self.dirty => {
                    let due = self.last_sync + every;
                    let now = Instant::now();
                    if now >= due {
                        drop(p);
                        self.sync_now();
                        p = self.shared.lock();
                        continue;
                    }
                    Some(due - now)
                }
                _ => None,
            };
            p.writer_idle = true;
            p = match timeout {
                Some(t) => {
                    self.shared
                        .wake
                        .wait_timeout(p, t)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.shared.wake.wait(p).unwrap_or_else(|e| e.into_inner()),
            };
            p.writer_idle = false;
        }
    }

    /// Interval policy: a sync with no batch waiting on it.
    fn sync_now(&mut self) {
        if self.shared.poisoned.get().is_some() {
            self.dirty = false;
            return;
        }
        if let Err(e) = self.file.sync() {
            self.shared
                .poison(format!("fsync of segment {} failed: {e}", self.segment));
        }
        self.dirty = false;
        self.last_sync = Instant::now();
    }

    fn process(&mut self, work: Work) -> Result<(), StoreError> {
        if let Some(e) = self.shared.poisoned_error() {
            return Err(e);
        }
        let work = match self.carry.take() {
            Some(carry) => carry.prepend_to(work),
            None => work,
        };
        match self.write_all(work) {
            Ok(mut buf) => {
                if self.shared.degraded.swap(false, Ordering::AcqRel) {
                    tracing::info!("log writes succeed again; store no longer degraded");
                }
                buf.clear();
                if buf.capacity() <= MAX_SPARE_CAPACITY {
                    self.spare = buf;
                }
                Ok(())
            }
            Err(Failure::Write(rest, why)) => {
                tracing::warn!(reason = %why, "log write failed; batch refused, will retry");
                self.carry = Some(rest);
                self.shared.degraded.store(true, Ordering::Release);
                Err(StoreError::Unavailable(why))
            }
            Err(Failure::Poisoned) => Err(self
                .shared
                .poisoned_error()
                .unwrap_or_else(|| StoreError::Unavailable("store poisoned".into()))),
        }
    }

    /// Writes and syncs what `work` asks for. Returns the buffer for reuse.
    fn write_all(&mut self, mut work: Work) -> Result<Vec<u8>, Failure> {
        let rolls = mem::take(&mut work.rolls);
        let mut pos = 0;
        let mut rolls = rolls.into_iter().peekable();
        while let Some(roll) = rolls.next() {
            let at = roll.at.min(work.buf.len());
            if let Err(why) = self.append(work.buf.get(pos..at).unwrap_or_default()) {
                return Err(self.carry_from(work, pos, Some(roll), rolls.collect(), why));
            }
            pos = at;
            if let Err(why) = self.roll(&roll) {
                return Err(self.carry_from(work, pos, Some(roll), rolls.collect(), why));
            }
        }
        if let Err(why) = self.append(work.buf.get(pos..).unwrap_or_default()) {
            return Err(self.carry_from(work, pos, None, Vec::new(), why));
        }
        let must_sync = work.force_sync
            || match self.policy {
                FsyncPolicy::Always => true,
                FsyncPolicy::Interval(every) => self.last_sync.elapsed() >= every,
                FsyncPolicy::Never => false,
            };
        if must_sync && self.dirty {
            self.sync_file()?;
        }
        Ok(work.buf)
    }

    /// Builds the carry after a failure at byte `pos` (and, if given, at roll `failed`).
    fn carry_from(
        &mut self,
        work: Work,
        pos: usize,
        failed: Option<Roll>,
        later: Vec<Roll>,
        why: String,
    ) -> Failure {
        if self.shared.poisoned.get().is_some() {
            return Failure::Poisoned;
        }
        let shift = |mut r: Roll| {
            r.at = r.at.saturating_sub(pos);
            r
        };
        let rest = Work {
            buf: work.buf.get(pos..).unwrap_or_default().to_vec(),
            rolls: failed.into_iter().chain(later).map(shift).collect(),
            force_sync: work.force_sync,
            probe: false,
        };
        Failure::Write(rest, why)
    }

    /// Appends bytes to the active segment; on failure cuts the file back to its last good
    /// length so that no partial record stays in the middle of the log.
    fn append(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        match self.file.append(bytes) {
            Ok(()) => {
                self.len += bytes.len() as u64;
                self.dirty = true;
                if let Some(flusher) = self.flusher.as_mut() {
                    flusher.written(&self.seg_dir, self.segment, bytes.len() as u64);
                }
                Ok(())
            }
            Err(e) => {
                let why = format!("write to segment {} failed: {e}", self.segment);
                if let Err(t) = self.file.truncate(self.len) {
                    // A partial record would stay in front of every later one: recovery would
                    // cut the log there and lose acknowledged records. Stop writing instead.
                    self.shared.poison(format!(
                        "{why}; truncating back to {} bytes failed too: {t}",
                        self.len
                    ));
                }
                Err(why)
            }
        }
    }

    fn sync_file(&mut self) -> Result<(), Failure> {
        let started = Instant::now();
        let synced = self.file.sync();
        let took = started.elapsed();
        self.figures.fsync.observe(took.as_secs_f64());
        if took >= SLOW_FSYNC {
            let n = self.figures.slow_fsyncs.fetch_add(1, Ordering::Relaxed) + 1;
            if n <= 10 || n.is_power_of_two() {
                tracing::warn!(
                    segment = self.segment,
                    took_ms = took.as_millis() as u64,
                    slow_so_far = n,
                    "slow fsync of the log: every commit waits for it"
                );
            }
        }
        match synced {
            Ok(()) => {
                self.dirty = false;
                self.last_sync = Instant::now();
                Ok(())
            }
            Err(e) => {
                self.shared
                    .poison(format!("fsync of segment {} failed: {e}", self.segment));
                Err(Failure::Poisoned)
            }
        }
    }

    fn sync_dir(&mut self) -> Result<(), Failure> {
        self.backend.sync_dir(&self.seg_dir).map_err(|e| {
            self.shared.poison(format!(
                "fsync of directory {} failed: {e}",
                self.seg_dir.display()
            ));
            Failure::Poisoned
        })
    }

    /// Seals the active segment (cut to what was written, since a reused file may hold old
    /// bytes past it, and synced whatever the policy, so that only the last segment can ever
    /// have a torn tail) and starts the next one.
    fn roll(&mut self, roll: &Roll) -> Result<(), String> {
        self.file
            .truncate(self.len)
            .map_err(|e| format!("sealing segment {} failed: {e}", self.segment))?;
        self.dirty = true;
        self.sync_file().map_err(|_| "fsync failed".to_owned())?;
        let path = segment_path(&self.seg_dir, roll.segment);
        let capacity = segment_capacity(self.files.segment_bytes, roll.header.len() as u64);
        let mut file = self.new_segment_file(&path, capacity)?;
        if let Err(e) = file.append(&roll.header) {
            // Leave no half header behind; the retry creates the file again.
            let _ = file.truncate(0);
            return Err(format!(
                "writing the header of {} failed: {e}",
                path.display()
            ));
        }
        self.file = file;
        self.segment = roll.segment;
        self.len = roll.header.len() as u64;
        self.dirty = true;
        // Makes the new name durable (and a spare's rename with it) before any record in the
        // segment can be acknowledged.
        self.sync_dir()
            .map_err(|_| "directory fsync failed".to_owned())?;
        Ok(())
    }

    /// The file for a new segment at `path`, with the space of its first `capacity` bytes
    /// allocated: a spare renamed and overwritten in place when there is one, else a new
    /// file, else (the disk is full) the reserve.
    fn new_segment_file(
        &mut self,
        path: &Path,
        capacity: u64,
    ) -> Result<Box<dyn BackendFile>, String> {
        while let Some(spare) = self.files.spares.take() {
            match self
                .backend
                .rename(&spare, path)
                .and_then(|()| self.backend.open_overwrite(path))
            {
                // A spare's space is allocated already (its end too, unless it was written
                // by an older version): then this asks the disk for nothing.
                Ok(mut file) => match file.allocate(capacity) {
                    Ok(()) => return Ok(file),
                    Err(e) if e.kind() == io::ErrorKind::Unsupported => return Ok(file),
                    Err(e) => {
                        tracing::warn!(spare = %spare.display(), error = %e,
                            "a spare segment file cannot hold a whole segment; deleting it");
                        drop(file);
                        let _ = self.backend.remove(path);
                    }
                },
                Err(e) => tracing::warn!(spare = %spare.display(), error = %e,
                    "could not reuse a spare segment file; trying the next"),
            }
        }
        let created = self.backend.create(path).and_then(|mut file| {
            match file.allocate(capacity) {
                Ok(()) => Ok(file),
                // Nothing to allocate ahead with: go on without (documented).
                Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok(file),
                Err(e) => Err(e),
            }
        });
        let why = match created {
            Ok(file) => return Ok(file),
            Err(e) => {
                // Give back what the attempt took.
                let _ = self.backend.remove(path);
                format!("creating {} failed: {e}", path.display())
            }
        };
        match self.files.space.take(path) {
            Ok(true) => self
                .backend
                .open_overwrite(path)
                .map_err(|e| format!("opening the reserve as {} failed: {e}", path.display())),
            Ok(false) => Err(format!("{why}, and the space reserve is in use")),
            Err(e) => Err(format!("{why}; taking the space reserve failed too: {e}")),
        }
    }
}

/// Fails every waiting batch if the writer thread ends, so no caller waits forever.
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let mut p = self.0.lock();
        if std::thread::panicking() {
            self.0.poison("the log writer thread panicked".into());
        }
        let err = StoreError::Unavailable("the store is shut down".into());
        if let Some(b) = p.inflight.take() {
            b.complete(Err(err.clone()));
        }
        p.batch.complete(Err(err));
    }
}
