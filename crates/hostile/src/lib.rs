//! Ferry's hostile-client suite: each file under `tests/` is one area of attack or misfortune
//! (dead sessions, floods, slow and idle peers, full disks, registry floods, ...), driving the
//! real `ferry` binary over loopback and asserting a precise error or a closed connection,
//! bounded memory, and nothing lost. Every scenario is bounded in time.
//!
//! This library holds what the scenarios share beyond `ferry-testkit`: reading a process's
//! resident memory, in [`fs`] a small tmpfs and data directory fingerprints, and in [`probe`]
//! a client timing round trips and a memory sampler, to watch the broker while an attack runs.

use std::io;

pub mod fs;
pub mod probe;

/// The resident set size of process `pid` in bytes, from `/proc/<pid>/status` (`VmRSS`).
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&status).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no VmRSS line in /proc/<pid>/status",
        )
    })
}

/// The `VmRSS` figure of a `/proc/<pid>/status` text, in bytes.
fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let text = "Name:\tferry\nVmPeak:\t  9000 kB\nVmRSS:\t  2048 kB\nThreads:\t4\n";
        assert_eq!(parse_vm_rss(text), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("Name:\tferry\n"), None);
    }

    #[test]
    fn own_rss_is_above_zero() {
        assert!(rss_bytes(std::process::id()).expect("own status") > 0);
    }
}
