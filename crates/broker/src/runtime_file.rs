//! `<data-dir>/runtime.toml`: the addresses the broker actually bound, so tools and tests can use
//! port 0 and find out which port they got.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// File name inside the data directory.
pub const FILE_NAME: &str = "runtime.toml";

/// The path of the runtime file for `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Writes the runtime file atomically (temp file, then rename).
pub fn write(data_dir: &Path, listen: SocketAddr) -> std::io::Result<()> {
    let text = format!("listen = \"{listen}\"\npid = {}\n", std::process::id());
    let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path(data_dir))
}

/// What a runtime file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
    /// The bound native protocol address.
    pub listen: SocketAddr,
    /// The broker's process id (a stale file from a killed broker names a dead process).
    pub pid: u32,
}

/// Reads a runtime file back; `None` if it is missing or incomplete.
pub fn read(data_dir: &Path) -> Option<Runtime> {
    let text = std::fs::read_to_string(path(data_dir)).ok()?;
    let value: toml::Value = toml::from_str(&text).ok()?;
    Some(Runtime {
        listen: value.get("listen")?.as_str()?.parse().ok()?,
        pid: u32::try_from(value.get("pid")?.as_integer()?).ok()?,
    })
}
