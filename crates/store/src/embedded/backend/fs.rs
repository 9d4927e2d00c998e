//! [`FsBackend`]: the real filesystem, through `std::fs`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::{Backend, BackendFile};

/// Name of the lock file in the data directory.
const LOCK_FILE: &str = "LOCK";

/// The real filesystem. Appends use `O_APPEND`, syncs use `fdatasync`, directory syncs fsync
/// the directory itself (needed on Linux for a new or removed file name to survive a crash).
#[derive(Debug, Clone, Copy, Default)]
pub struct FsBackend;

impl Backend for FsBackend {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_owned());
                }
            }
        }
        Ok(names)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn BackendFile>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)?;
        // Reopen in append mode so that writes after a truncate land at the new end.
        drop(file);
        self.open_append(path)
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn BackendFile>> {
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(Box::new(FsFile { file }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Box<dyn Send + Sync>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(file)),
            Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another process", dir.display()),
            )),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// A segment file opened for appending.
struct FsFile {
    file: File,
}

impl BackendFile for FsFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}
