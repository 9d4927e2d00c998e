//! The emulated link: two network namespaces joined by a veth pair, shaped with `tc netem`
//! on both ends (half the round trip each way, the rate each way, jitter, loss), made and
//! removed by the workload with `ip` and `tc`. On a kernel without netem, a shaped link is a
//! TUN device in each namespace with this process carrying the packets between them
//! ([`super::emulator`]). Names carry the workload's process id
//! (`ferrysl-<pid>-<n>-c`, `ferrysl-<pid>-<n>-s`), so that a later run removes what an interrupted one
//! left ([`remove_stale`]) and never touches anything else.

use std::process::Command;

use anyhow::{anyhow, bail, Result};

use super::spec::LinkSpec;

/// The prefix of every namespace the workload makes.
pub const PREFIX: &str = "ferrysl-";
/// The client's address inside its namespace.
pub const CLIENT_ADDR: &str = "10.233.0.1";
/// The server's (the broker's) address inside its namespace.
pub const SERVER_ADDR: &str = "10.233.0.2";

/// What shapes the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shaper {
    /// netem when the kernel has it, else the user-space emulator.
    Auto,
    /// The kernel's `tc netem` on a veth pair.
    Netem,
    /// TUN devices and this process (see [`super::emulator`]).
    UserSpace,
}

/// Why the workload cannot make its link here, or `None` when it can: root, `ip` and `tc`,
/// network namespaces, and (for a shaped link) the kernel's netem queueing discipline or,
/// failing that (or with `shaper` user-space), TUN devices.
pub fn unavailable(link: &LinkSpec, shaper: Shaper) -> Option<String> {
    let why = unavailable_netem(link);
    match shaper {
        Shaper::Netem => why,
        _ if !link.shaped() => why,
        Shaper::Auto if why.is_none() => None,
        _ => {
            // The basic requirements (root, tools, namespaces) come first.
            if let Some(w) = why.as_deref() {
                if !w.contains("netem") {
                    return why;
                }
            }
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/net/tun")
                .err()
                .map(|e| {
                    format!(
                        "{}and no TUN devices for the user-space link (/dev/net/tun: {e})",
                        why.map(|w| format!("{w}; ")).unwrap_or_default()
                    )
                })
        }
    }
}

/// Whether the kernel's netem shapes links here (see [`unavailable`]).
pub fn netem_available(link: &LinkSpec) -> bool {
    unavailable_netem(link).is_none()
}

fn unavailable_netem(link: &LinkSpec) -> Option<String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        return Some(
            "slowlink makes network namespaces and needs root (its effective user id is not 0)"
                .into(),
        );
    }
    for tool in ["ip", "tc"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!(
                "slowlink needs `{tool}` (apt-get install -y iproute2)"
            ));
        }
    }
    let serial = next_serial();
    let probe = format!("{PREFIX}{}-{serial}-probe", std::process::id());
    if let Err(e) = ip(&["netns", "add", &probe]) {
        return Some(format!("network namespaces are not allowed here: {e}"));
    }
    let mut why = None;
    if link.shaped() {
        let veth = format!("fslp{}{serial}", std::process::id() % 100_000);
        let made = ip(&[
            "-n",
            &probe,
            "link",
            "add",
            &veth,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{veth}b"),
        ]);
        if let Err(e) = made {
            why = Some(format!("a veth pair cannot be made here: {e}"));
        } else {
            let netem = run(
                "tc",
                &[
                    "-n", &probe, "qdisc", "add", "dev", &veth, "root", "netem", "delay", "1ms",
                ],
            );
            if let Err(e) = netem {
                why = Some(format!(
                    "the kernel has no netem queueing discipline (sch_netem; `tc ... netem` says: {e}), \
                     so the {} link cannot be emulated",
                    link.name
                ));
            }
        }
    }
    let _ = ip(&["netns", "del", &probe]);
    why
}

/// A number for each link (and probe) this process makes, so that two at once do not share
/// names.
fn next_serial() -> u32 {
    static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 1000
}

/// Runs `program args`, failing with its standard error.
fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| anyhow!("{program}: {e}"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

/// Removes the namespaces of earlier runs whose process is gone.
pub fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
}

/// The two namespaces and the link between them; removed on drop.
pub struct Link {
    /// The client's namespace.
    pub client_ns: String,
    /// The server's namespace.
    pub server_ns: String,
    /// The client's end of the link.
    pub client_if: String,
    /// What shapes it: `none`, `netem` or `user-space`.
    pub shaper: &'static str,
    /// Bytes of link, IP and TCP headers per packet on the client's interface: Ethernet,
    /// IPv4 and TCP with timestamps on a veth (66), IPv4 and TCP on a TUN device (52).
    pub header_bytes_per_packet: u64,
    emulator: Option<super::emulator::Emulator>,
    removed: bool,
}

impl Link {
    /// Makes the namespaces, the link and the addresses, and shapes the link: netem on a veth
    /// pair, or the user-space emulator between TUN devices (`shaper`; see [`Shaper`]).
    pub fn make(link: &LinkSpec, shaper: Shaper) -> Result<Link> {
        let pid = std::process::id();
        let n = next_serial();
        let user_space = link.shaped()
            && (shaper == Shaper::UserSpace || (shaper == Shaper::Auto && !netem_available(link)));
        let mut me = Link {
            client_ns: format!("{PREFIX}{pid}-{n}-c"),
            server_ns: format!("{PREFIX}{pid}-{n}-s"),
            client_if: format!("fsl{pid}{n}c"),
            shaper: if !link.shaped() {
                "none"
            } else if user_space {
                "user-space"
            } else {
                "netem"
            },
            header_bytes_per_packet: if user_space { 20 + 32 } else { 14 + 20 + 32 },
            emulator: None,
            removed: false,
        };
        let server_if = format!("fsl{pid}{n}s");
        ip(&["netns", "add", &me.client_ns])?;
        ip(&["netns", "add", &me.server_ns])?;
        if user_space {
            let client = super::emulator::device(&me.client_if)?;
            let server = super::emulator::device(&server_if)?;
            for (ns, dev, addr, peer) in [
                (&me.client_ns, &me.client_if, CLIENT_ADDR, SERVER_ADDR),
                (&me.server_ns, &server_if, SERVER_ADDR, CLIENT_ADDR),
            ] {
                ip(&["link", "set", dev, "netns", ns])?;
                ip(&["-n", ns, "addr", "add", addr, "peer", peer, "dev", dev])?;
                ip(&["-n", ns, "link", "set", dev, "up"])?;
                ip(&["-n", ns, "link", "set", "lo", "up"])?;
            }
            me.emulator = Some(super::emulator::Emulator::start(*link, client, server));
            return Ok(me);
        }
        ip(&[
            "-n",
            &me.client_ns,
            "link",
            "add",
            &me.client_if,
            "type",
            "veth",
            "peer",
            "name",
            &server_if,
            "netns",
            &me.server_ns,
        ])?;
        ip(&[
            "-n",
            &me.client_ns,
            "addr",
            "add",
            &format!("{CLIENT_ADDR}/30"),
            "dev",
            &me.client_if,
        ])?;
        ip(&[
            "-n",
            &me.server_ns,
            "addr",
            "add",
            &format!("{SERVER_ADDR}/30"),
            "dev",
            &server_if,
        ])?;
        for (ns, dev) in [(&me.client_ns, &me.client_if), (&me.server_ns, &server_if)] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            if link.shaped() {
                let mut args = vec!["-n", ns, "qdisc", "add", "dev", dev, "root"];
                let netem = link.netem_args();
                args.extend(netem.iter().map(String::as_str));
                run("tc", &args)?;
            }
        }
        Ok(me)
    }

    /// What went through the client's end so far: bytes sent, bytes received, packets both
    /// ways (the interface's counters; Ethernet headers included).
    pub fn counters(&self) -> Result<(u64, u64, u64)> {
        let read = |what: &str| -> Result<u64> {
            let out = Command::new("ip")
                .args(["netns", "exec", &self.client_ns, "cat"])
                .arg(format!(
                    "/sys/class/net/{}/statistics/{what}",
                    self.client_if
                ))
                .output()?;
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .map_err(|e| anyhow!("interface counter {what}: {e}"))
        };
        Ok((
            read("tx_bytes")?,
            read("rx_bytes")?,
            read("rx_packets")? + read("tx_packets")?,
        ))
    }

    /// Removes the namespaces (and with them the veth pair).
    pub fn remove(mut self) {
        self.delete();
    }

    fn delete(&mut self) {
        // The TUN devices go with the emulator's handles.
        self.emulator.take();
        if !self.removed {
            let _ = ip(&["netns", "del", &self.client_ns]);
            let _ = ip(&["netns", "del", &self.server_ns]);
            self.removed = true;
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.delete();
    }
}
