//! Filesystem helpers of the disk and registry scenarios: a small tmpfs to fill up, and a
//! fingerprint of a data directory to tell whether anything in it changed.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a fixed size mounted on a fresh temporary directory, unmounted when dropped.
/// Mounting needs the right to (root, outside a container that forbids it).
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `48m`). The error says why it
    /// could not, for the scenario to print before it skips.
    pub fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("no temp dir: {e}"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy, so that a process still holding a file there cannot keep the mount.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A file's length, modification time and content hash.
pub type FilePrint = (u64, std::time::SystemTime, u64);

/// Every regular file under `dir` with its length, modification time and content hash: two
/// equal fingerprints mean that nothing in the directory was written, created, removed or
/// renamed in between.
pub fn fingerprint(dir: &Path) -> io::Result<BTreeMap<PathBuf, FilePrint>> {
    let mut out = BTreeMap::new();
    for (path, meta) in files(dir)? {
        let bytes = std::fs::read(&path)?;
        out.insert(path, (meta.len(), meta.modified()?, fnv(&bytes)));
    }
    Ok(out)
}

/// Total length of the files under `dir` whose name ends with `suffix` (nothing is read).
pub fn bytes_of(dir: &Path, suffix: &str) -> io::Result<u64> {
    Ok(files(dir)?
        .iter()
        .filter(|(p, _)| p.to_string_lossy().ends_with(suffix))
        .map(|(_, meta)| meta.len())
        .sum())
}

/// Every regular file under `dir`, with its metadata.
fn files(dir: &Path) -> io::Result<Vec<(PathBuf, std::fs::Metadata)>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                todo.push(entry.path());
            } else if meta.is_file() {
                out.push((entry.path(), meta));
            }
        }
    }
    Ok(out)
}

/// FNV-1a, 64 bits: enough to notice a changed byte, with no dependency.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_sees_every_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/a.log"), b"abc").expect("write");
        let before = fingerprint(dir.path()).expect("fingerprint");
        assert_eq!(fingerprint(dir.path()).expect("again"), before);
        assert_eq!(bytes_of(dir.path(), ".log").expect("bytes"), 3);
        std::fs::write(dir.path().join("sub/a.log"), b"abd").expect("rewrite");
        assert_ne!(fingerprint(dir.path()).expect("changed"), before);
    }
}
