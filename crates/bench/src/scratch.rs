//! Data directories of the brokers the harness starts for itself: made fresh under the
//! system's temporary directory and removed on every way out, including a broker that is
//! killed rather than stopped (it cannot clean up after itself then).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

/// A fresh directory, removed when dropped unless [`ScratchDir::release`]d.
#[derive(Debug)]
pub struct ScratchDir(Option<PathBuf>);

impl ScratchDir {
    /// Makes `<temp>/<prefix>-<this process's id>-<random>`.
    pub fn new(prefix: &str) -> Result<ScratchDir> {
        let dir = std::env::temp_dir().join(format!(
            "{prefix}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
        Ok(ScratchDir(Some(dir)))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    /// Hands the directory over: it is no longer removed here.
    pub fn release(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_scratch_dir_is_removed_when_dropped_and_kept_when_released() {
        let dir = ScratchDir::new("ferry-bench-scratch-test").unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("file"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());

        let dir = ScratchDir::new("ferry-bench-scratch-test").unwrap();
        let kept = dir.release();
        assert!(kept.exists());
        std::fs::remove_dir_all(kept).unwrap();
    }
}
