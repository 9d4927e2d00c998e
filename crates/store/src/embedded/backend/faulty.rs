//! [`FaultyBackend`]: in-memory files for tests, with injected failures and crash images.
//!
//! Each file remembers how many of its bytes were synced, and whether its name was made durable
//! by a directory sync. A test can make the next writes, syncs or renames fail (with `ENOSPC` or
//! `EIO`), and can ask for the image a crash would leave: after `kill -9` everything written
//! survives; after a machine crash the synced bytes survive, plus any prefix of the unsynced
//! tail, which may also come back garbled. It is public so that broker tests can use it as well.
//!
//! A disk may also be given a **capacity** ([`FaultyBackend::set_capacity`]): then each file
//! takes the space of its content or of what was allocated for it
//! ([`BackendFile::allocate`]), whichever is more, and a write or an allocation that needs more
//! than is free fails with `ENOSPC` as a full disk's would (a write after taking what fits). That
//! is a full disk as the store meets it, where the injected failures are faults.
//!
//! A file reused with [`Backend::open_overwrite`] keeps its old content as what the disk holds
//! until a sync: a crash image shows the unsynced overwrites up to some point, then the old
//! bytes, as a real disk would. A rename not yet made durable by a directory sync leaves the
//! file under either name.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Backend, BackendFile, Syncer};

/// `ENOSPC` on Linux.
const ENOSPC: i32 = 28;
/// `EIO` on Linux.
const EIO: i32 = 5;

/// What an injected failure reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// No space left on device (`ENOSPC`).
    NoSpace,
    /// Input/output error (`EIO`).
    Io,
}

impl FaultKind {
    fn error(self) -> io::Error {
        match self {
            FaultKind::NoSpace => io::Error::from_raw_os_error(ENOSPC),
            FaultKind::Io => io::Error::from_raw_os_error(EIO),
        }
    }
}

/// Which file image [`FaultyBackend::crash`] leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// The process was killed: the kernel still had every written byte, so all of it survives.
    Process,
    /// The machine crashed: synced bytes survive, plus a prefix (chosen by `seed`) of each
    /// file's unsynced tail; files whose creation was never made durable may vanish.
    Machine {
        /// Chooses the prefixes; the same seed gives the same image.
        seed: u64,
    },
    /// Like [`CrashMode::Machine`], but some bytes of each surviving unsynced tail are
    /// overwritten with garbage, as a half-written sector would leave them.
    MachineGarbled {
        /// Chooses the prefixes and the garbage.
        seed: u64,
    },
}

/// One in-memory file.
#[derive(Debug, Clone, Default)]
struct FileImage {
    data: Vec<u8>,
    /// Bytes known to be on stable storage.
    synced: usize,
    /// Whether the file's name survives a machine crash (a directory sync happened since its
    /// creation or rename).
    name_durable: bool,
    /// The name it had before its last rename.
    renamed_from: Option<PathBuf>,
    /// What stable storage holds from offset `synced` on: the old content of a file being
    /// overwritten, shown by a crash past the surviving part of the unsynced writes.
    stale: Vec<u8>,
    /// Bytes of disk space allocated ahead for it (at least its content's takes the space
    /// of its content too).
    allocated: usize,
}

impl FileImage {
    /// Disk space the file takes.
    fn space(&self) -> usize {
        self.data.len().max(self.stale.len()).max(self.allocated)
    }
}

/// The whole simulated disk.
#[derive(Debug, Default)]
struct Disk {
    files: BTreeMap<PathBuf, FileImage>,
    /// Failures still to inject into appends.
    failing_writes: u32,
    write_fault: Option<FaultKind>,
    /// Failures still to inject into file and directory syncs.
    failing_syncs: u32,
    sync_fault: Option<FaultKind>,
    /// Failures still to inject into renames.
    failing_renames: u32,
    rename_fault: Option<FaultKind>,
    /// Failures still to inject into positional reads ([`Backend::read_at`]).
    failing_reads: u32,
    read_fault: Option<FaultKind>,
    reads: u64,
    /// Read-ahead hints received: file, offset, length.
    read_aheads: Vec<(PathBuf, u64, u64)>,
    writes: u64,
    syncs: u64,
    background_syncs: u64,
    /// Bytes the disk holds at most; `None`: no limit.
    capacity: Option<usize>,
    /// What [`Backend::disk_space`] reports; `None`: unknown.
    space: Option<super::DiskSpace>,
}

impl Disk {
    /// Bytes still free (`usize::MAX` without a capacity).
    fn free(&self) -> usize {
        match self.capacity {
            None => usize::MAX,
            Some(c) => c.saturating_sub(self.files.values().map(FileImage::space).sum()),
        }
    }
}

/// In-memory files with fault injection; cheap to clone (clones share the same disk).
#[derive(Clone, Default)]
pub struct FaultyBackend {
    disk: Arc<Mutex<Disk>>,
}

impl std::fmt::Debug for FaultyBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the file contents: they can be megabytes.
        let d = self.disk();
        f.debug_struct("FaultyBackend")
            .field("files", &d.files.len())
            .field("writes", &d.writes)
            .field("syncs", &d.syncs)
            .finish_non_exhaustive()
    }
}

impl FaultyBackend {
    /// An empty disk.
    pub fn new() -> Self {
        FaultyBackend::default()
    }

    /// Makes the disk report `free` of `total` bytes available, whatever it holds (without
    /// it, a disk with a capacity reports what is left of it).
    pub fn set_disk_space(&self, free: u64, total: u64) {
        self.disk().space = Some(super::DiskSpace { free, total });
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // A panicking test thread must not hide the disk from the others.
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the next `n` appends fail with `kind`, each after writing half of its bytes.
    pub fn fail_writes(&self, n: u32, kind: FaultKind) {
        let mut d = self.disk();
        d.failing_writes = n;
        d.write_fault = Some(kind);
    }

    /// Makes the next `n` syncs (of files or directories) fail with `kind`; the unsynced bytes
    /// stay unsynced.
    pub fn fail_syncs(&self, n: u32, kind: FaultKind) {
        let mut d = self.disk();
        d.failing_syncs = n;
        d.sync_fault = Some(kind);
    }

    /// Makes the next `n` renames fail with `kind`, leaving the file where it was.
    pub fn fail_renames(&self, n: u32, kind: FaultKind) {
        let mut d = self.disk();
        d.failing_renames = n;
        d.rename_fault = Some(kind);
    }

    /// Makes the next `n` positional reads (a message body read from its segment) fail with
    /// `kind`. Whole-file reads (recovery, compaction) are not affected.
    pub fn fail_reads(&self, n: u32, kind: FaultKind) {
        let mut d = self.disk();
        d.failing_reads = n;
        d.read_fault = Some(kind);
    }

    /// Number of positional reads attempted so far (failed ones included).
    pub fn read_count(&self) -> u64 {
        self.disk().reads
    }

    /// The read-ahead hints received so far ([`Backend::read_ahead`]): file, offset, length.
    pub fn read_aheads(&self) -> Vec<(PathBuf, u64, u64)> {
        self.disk().read_aheads.clone()
    }

    /// Limits the disk to `bytes` (`None`: no limit). A disk already holding more has no
    /// room left; nothing is lost.
    pub fn set_capacity(&self, bytes: Option<usize>) {
        self.disk().capacity = bytes;
    }

    /// Bytes the files take (content or allocation, whichever is more).
    pub fn used_bytes(&self) -> usize {
        self.disk().files.values().map(FileImage::space).sum()
    }

    /// Bytes still free under the capacity (`usize::MAX` without one).
    pub fn free_bytes(&self) -> usize {
        self.disk().free()
    }

    /// Number of appends attempted so far.
    pub fn write_count(&self) -> u64 {
        self.disk().writes
    }

    /// Number of file and directory syncs attempted so far.
    pub fn sync_count(&self) -> u64 {
        self.disk().syncs
    }

    /// Number of background syncs ([`Backend::open_syncer`]) done so far.
    pub fn background_sync_count(&self) -> u64 {
        self.disk().background_syncs
    }

    /// Every file with its length, in path order.
    pub fn files(&self) -> Vec<(PathBuf, usize)> {
        self.disk()
            .files
            .iter()
            .map(|(p, f)| (p.clone(), f.data.len()))
            .collect()
    }

    /// A copy of one file's bytes.
    pub fn file(&self, path: &Path) -> Option<Vec<u8>> {
        self.disk().files.get(path).map(|f| f.data.clone())
    }

    /// Replaces (or creates) a file; its content counts as synced and its name as durable.
    pub fn set_file(&self, path: &Path, data: Vec<u8>) {
        let synced = data.len();
        self.disk().files.insert(
            path.to_path_buf(),
            FileImage {
                data,
                synced,
                name_durable: true,
                ..FileImage::default()
            },
        );
    }

    /// Bytes written to `path` but not yet synced.
    pub fn unsynced_bytes(&self, path: &Path) -> usize {
        self.disk()
            .files
            .get(path)
            .map_or(0, |f| f.data.len().saturating_sub(f.synced))
    }

    /// A new, independent disk holding what a crash of kind `mode` would leave of this one.
    /// Stores still running on `self` keep writing to the old disk, not to the image.
    pub fn crash(&self, mode: CrashMode) -> FaultyBackend {
        let d = self.disk();
        let mut files = BTreeMap::new();
        let (seed, garble) = match mode {
            CrashMode::Process => {
                for (path, f) in &d.files {
                    let data = f.data.clone();
                    let image = FileImage {
                        synced: data.len(),
                        data,
                        name_durable: true,
                        allocated: f.allocated,
                        ..FileImage::default()
                    };
                    files.insert(path.clone(), image);
                }
                return FaultyBackend::from_files(files, d.capacity);
            }
            CrashMode::Machine { seed } => (seed, false),
            CrashMode::MachineGarbled { seed } => (seed, true),
        };
        let mut rng = SplitMix(seed);
        for (path, f) in &d.files {
            let mut path = path;
            if !f.name_durable && rng.next().is_multiple_of(2) {
                // The creation or the rename did not reach the disk.
                match &f.renamed_from {
                    Some(from) => path = from,
                    None => continue,
                }
            }
            let synced = f.synced.min(f.data.len());
            let tail = f.data.len() - synced;
            let keep = if tail == 0 {
                0
            } else {
                (rng.next() % (tail as u64 + 1)) as usize
            };
            let mut data = f.data.get(..synced + keep).unwrap_or_default().to_vec();
            if garble && keep > 0 {
                // Garble a few bytes of the surviving unsynced tail.
                for _ in 0..1 + rng.next() % 4 {
                    let at = synced + (rng.next() % keep as u64) as usize;
                    if let Some(b) = data.get_mut(at) {
                        *b ^= (rng.next() % 255 + 1) as u8;
                    }
                }
            }
            // Past the surviving writes, the disk still holds the old content.
            data.extend_from_slice(f.stale.get(data.len()..).unwrap_or_default());
            let image = FileImage {
                synced: data.len(),
                data,
                name_durable: true,
                allocated: f.allocated,
                ..FileImage::default()
            };
            files.insert(path.clone(), image);
        }
        FaultyBackend::from_files(files, d.capacity)
    }

    fn from_files(files: BTreeMap<PathBuf, FileImage>, capacity: Option<usize>) -> FaultyBackend {
        FaultyBackend {
            disk: Arc::new(Mutex::new(Disk {
                files,
                capacity,
                ..Disk::default()
            })),
        }
    }
}

/// A small deterministic generator, so crash images need no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} does not exist", path.display()),
    )
}

impl Disk {
    /// Consumes one injected sync failure, if any is due.
    fn sync_fault(&mut self) -> io::Result<()> {
        self.syncs += 1;
        if self.failing_syncs > 0 {
            self.failing_syncs -= 1;
            return Err(self.sync_fault.unwrap_or(FaultKind::Io).error());
        }
        Ok(())
    }
}

impl Backend for FaultyBackend {
    fn disk_space(&self, _dir: &Path) -> io::Result<super::DiskSpace> {
        let d = self.disk();
        match (d.space, d.capacity) {
            (Some(space), _) => Ok(space),
            (None, Some(capacity)) => Ok(super::DiskSpace {
                free: d.free() as u64,
                total: capacity as u64,
            }),
            (None, None) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        // Directories are implicit: a file's path is its key.
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self
            .disk()
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.file(path).ok_or_else(|| not_found(path))
    }

    fn read_ahead(&self, path: &Path, offset: u64, len: u64) {
        // Nothing to read ahead into: noted, for the tests of when it is asked for.
        self.disk().read_aheads.push((path.to_owned(), offset, len));
    }

    fn read_at(&self, path: &Path, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut d = self.disk();
        d.reads += 1;
        if d.failing_reads > 0 {
            d.failing_reads -= 1;
            return Err(d.read_fault.unwrap_or(FaultKind::Io).error());
        }
        let f = d.files.get(path).ok_or_else(|| not_found(path))?;
        usize::try_from(offset)
            .ok()
            .and_then(|at| f.data.get(at..)?.get(..len))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn BackendFile>> {
        let mut d = self.disk();
        let name_durable = d.files.get(path).is_some_and(|f| f.name_durable);
        d.files.insert(
            path.to_path_buf(),
            FileImage {
                name_durable,
                ..FileImage::default()
            },
        );
        Ok(Box::new(FaultyFile {
            backend: self.clone(),
            path: path.to_path_buf(),
            pos: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn BackendFile>> {
        let pos = match self.disk().files.get(path) {
            Some(f) => f.data.len(),
            None => return Err(not_found(path)),
        };
        Ok(Box::new(FaultyFile {
            backend: self.clone(),
            path: path.to_path_buf(),
            pos,
        }))
    }

    fn open_overwrite(&self, path: &Path) -> io::Result<Box<dyn BackendFile>> {
        let mut d = self.disk();
        let f = d.files.get_mut(path).ok_or_else(|| not_found(path))?;
        // The old content is what the disk holds until the overwrites are synced.
        f.stale = f.data.clone();
        f.synced = 0;
        Ok(Box::new(FaultyFile {
            backend: self.clone(),
            path: path.to_path_buf(),
            pos: 0,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut d = self.disk();
        if d.failing_renames > 0 {
            d.failing_renames -= 1;
            return Err(d.rename_fault.unwrap_or(FaultKind::Io).error());
        }
        let mut f = d.files.remove(from).ok_or_else(|| not_found(from))?;
        f.name_durable = false;
        f.renamed_from = Some(from.to_path_buf());
        d.files.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match self.disk().files.remove(path) {
            Some(_) => Ok(()),
            None => Err(not_found(path)),
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut d = self.disk();
        d.sync_fault()?;
        for (path, f) in d.files.iter_mut() {
            if path.parent() == Some(dir) {
                f.name_durable = true;
            }
        }
        Ok(())
    }

    /// Makes what the file holds durable, like the real background sync; an injected sync
    /// failure is left for the writer's own sync to meet, as a real writeback error would be.
    fn open_syncer(&self, path: &Path) -> io::Result<Syncer> {
        let backend = self.clone();
        let path = path.to_path_buf();
        Ok(Box::new(move || {
            let mut d = backend.disk();
            if d.failing_syncs > 0 {
                return Ok(());
            }
            d.background_syncs += 1;
            let f = d.files.get_mut(&path).ok_or_else(|| not_found(&path))?;
            f.synced = f.data.len();
            f.stale.clear();
            Ok(())
        }))
    }

    fn lock_dir(&self, _dir: &Path) -> io::Result<Box<dyn Send + Sync>> {
        // Crash tests open a new store on a crash image while the old one still runs on the
        // old disk: they never share files, so there is nothing to lock.
        Ok(Box::new(()))
    }
}

/// A handle on one in-memory file.
struct FaultyFile {
    backend: FaultyBackend,
    path: PathBuf,
    /// Where the next append writes.
    pos: usize,
}

/// Writes `buf` into `data` at `pos`, over what is there and past its end.
fn write_at(data: &mut Vec<u8>, pos: usize, buf: &[u8]) {
    let over = data.len().saturating_sub(pos).min(buf.len());
    if let (Some(dst), Some(src)) = (data.get_mut(pos..pos + over), buf.get(..over)) {
        dst.copy_from_slice(src);
    }
    data.extend_from_slice(buf.get(over..).unwrap_or_default());
}

impl BackendFile for FaultyFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut d = self.backend.disk();
        d.writes += 1;
        let fault = if d.failing_writes > 0 {
            d.failing_writes -= 1;
            Some(d.write_fault.unwrap_or(FaultKind::NoSpace))
        } else {
            None
        };
        let free = d.free();
        let f = d
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        // Past the space the file takes, a write needs free space; a full disk takes what fits.
        let room = f.space().saturating_sub(self.pos).saturating_add(free);
        match fault {
            Some(kind) => {
                // A real disk filling up usually takes part of the write first.
                write_at(
                    &mut f.data,
                    self.pos,
                    buf.get(..(buf.len() / 2).min(room)).unwrap_or_default(),
                );
                Err(kind.error())
            }
            None if buf.len() > room => {
                write_at(&mut f.data, self.pos, buf.get(..room).unwrap_or_default());
                Err(FaultKind::NoSpace.error())
            }
            None => {
                write_at(&mut f.data, self.pos, buf);
                self.pos += buf.len();
                Ok(())
            }
        }
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        let mut d = self.backend.disk();
        let free = d.free();
        let f = d
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len.saturating_sub(f.space()) > free {
            return Err(FaultKind::NoSpace.error());
        }
        f.allocated = f.allocated.max(len);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut d = self.backend.disk();
        d.sync_fault()?;
        let f = d
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        f.synced = f.data.len();
        f.stale.clear();
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut d = self.backend.disk();
        let f = d
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        f.data.truncate(len);
        f.stale.truncate(len);
        f.synced = f.synced.min(f.data.len());
        self.pos = f.data.len();
        Ok(())
    }
}
