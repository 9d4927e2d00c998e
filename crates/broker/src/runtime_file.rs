//! `<data-dir>/runtime.toml`: the addresses the broker actually bound, so tools and tests can use
//! port 0 and find out which port they got.
//!
//! On a full disk a new file cannot be written, but the file a broker killed before left can
//! be overwritten in place (its block is allocated): [`write()`] falls back to that.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// File name inside the data directory.
pub const FILE_NAME: &str = "runtime.toml";

/// The path of the runtime file for `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Writes the runtime file atomically (temp file, then rename); when that fails (a full disk)
/// and a runtime file exists, overwrites that one in place (a reader may then meet a half
/// written file, which [`read`] takes for a missing one). The first error if both fail.
pub fn write(data_dir: &Path, listen: SocketAddr) -> std::io::Result<()> {
    write_with_http(data_dir, listen, None)
}

/// [`write()`], with the bound HTTP address when the HTTP listener is on.
pub fn write_with_http(
    data_dir: &Path,
    listen: SocketAddr,
    http: Option<SocketAddr>,
) -> std::io::Result<()> {
    write_with_listeners(data_dir, listen, http, None)
}

/// [`write()`], with the bound HTTP and STOMP addresses of the listeners that are on.
pub fn write_with_listeners(
    data_dir: &Path,
    listen: SocketAddr,
    http: Option<SocketAddr>,
    stomp: Option<SocketAddr>,
) -> std::io::Result<()> {
    let mut text = format!("listen = \"{listen}\"\npid = {}\n", std::process::id());
    if let Some(http) = http {
        text.push_str(&format!("http = \"{http}\"\n"));
    }
    if let Some(stomp) = stomp {
        text.push_str(&format!("stomp = \"{stomp}\"\n"));
    }
    let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
    let atomic = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, path(data_dir)));
    let Err(e) = atomic else {
        return Ok(());
    };
    let _ = std::fs::remove_file(&tmp);
    overwrite(&path(data_dir), text.as_bytes()).map_err(|_| e)
}

/// Writes `text` over the existing file at `path`, then cuts it to that length.
fn overwrite(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(text)?;
    file.set_len(text.len() as u64)?;
    file.sync_data()
}

/// What a runtime file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
    /// The bound native protocol address.
    pub listen: SocketAddr,
    /// The broker's process id (a stale file from a killed broker names a dead process).
    pub pid: u32,
    /// The bound HTTP address, when the HTTP listener is on.
    pub http: Option<SocketAddr>,
    /// The bound STOMP address, when the STOMP listener is on.
    pub stomp: Option<SocketAddr>,
}

/// Reads a runtime file back; `None` if it is missing or incomplete.
pub fn read(data_dir: &Path) -> Option<Runtime> {
    let text = std::fs::read_to_string(path(data_dir)).ok()?;
    let value: toml::Value = toml::from_str(&text).ok()?;
    Some(Runtime {
        listen: value.get("listen")?.as_str()?.parse().ok()?,
        pid: u32::try_from(value.get("pid")?.as_integer()?).ok()?,
        http: value
            .get("http")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok()),
        stomp: value
            .get("stomp")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_read_back_and_overwritten_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a: SocketAddr = "127.0.0.1:6730".parse().expect("addr");
        write(dir.path(), a).expect("write");
        assert_eq!(read(dir.path()).map(|r| r.listen), Some(a));
        // A longer text first, then a shorter one in place: the file is cut to it.
        overwrite(
            &path(dir.path()),
            b"listen = \"127.0.0.1:65535\"\npid = 4294967295\n",
        )
        .expect("overwrite");
        let b: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let text = format!("listen = \"{b}\"\npid = 7\n");
        overwrite(&path(dir.path()), text.as_bytes()).expect("overwrite");
        assert_eq!(
            read(dir.path()),
            Some(Runtime {
                listen: b,
                pid: 7,
                http: None,
                stomp: None,
            })
        );
        assert!(overwrite(&dir.path().join("missing"), b"x").is_err());
    }

    #[test]
    fn the_stomp_address_is_recorded_when_the_listener_is_on() {
        let dir = tempfile::tempdir().expect("dir");
        let a: SocketAddr = "127.0.0.1:6730".parse().expect("addr");
        let s: SocketAddr = "127.0.0.1:61613".parse().expect("addr");
        write_with_listeners(dir.path(), a, None, Some(s)).expect("write");
        assert_eq!(read(dir.path()).and_then(|r| r.stomp), Some(s));
        write(dir.path(), a).expect("write");
        assert_eq!(read(dir.path()).and_then(|r| r.stomp), None);
    }
}
