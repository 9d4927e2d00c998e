//! What the capacity model is calibrated with, read from `/proc`: a process's CPU time
//! (`/proc/<pid>/stat`) and bytes written (`/proc/<pid>/io`), the cores it may use, the
//! machine's busy time (`/proc/stat`), and the disks' busy time and flushes
//! (`/proc/diskstats`). [`Probe`] reads them all at once; the difference of two probes is
//! what a run used.

/// Every figure at one instant; `None` where it could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Probe {
    /// The broker's CPU seconds.
    pub broker_cpu_s: Option<f64>,
    /// The load generator's (this process's) CPU seconds.
    pub generator_cpu_s: Option<f64>,
    /// CPU seconds every process of the machine used (all cores).
    pub machine_busy_s: Option<f64>,
    /// Bytes the broker caused to be written to storage.
    pub broker_write_bytes: Option<f64>,
    /// Whole disks: seconds busy, flush requests completed, seconds spent flushing.
    pub disks: Option<DiskFigures>,
}

impl Probe {
    /// Reads everything now; `broker` is the broker's process, when known.
    pub fn now(broker: Option<u32>) -> Probe {
        Probe {
            broker_cpu_s: broker.and_then(process_cpu_s),
            generator_cpu_s: process_cpu_s(std::process::id()),
            machine_busy_s: machine_busy_s(),
            broker_write_bytes: broker.and_then(process_write_bytes),
            disks: disk_figures(),
        }
    }

    /// What was used between `earlier` and this probe.
    pub fn since(&self, earlier: &Probe) -> Probe {
        let d = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
        Probe {
            broker_cpu_s: d(self.broker_cpu_s, earlier.broker_cpu_s),
            generator_cpu_s: d(self.generator_cpu_s, earlier.generator_cpu_s),
            machine_busy_s: d(self.machine_busy_s, earlier.machine_busy_s),
            broker_write_bytes: d(self.broker_write_bytes, earlier.broker_write_bytes),
            disks: self.disks.zip(earlier.disks).map(|(a, b)| DiskFigures {
                busy_s: a.busy_s - b.busy_s,
                flushes: a.flushes - b.flushes,
                flush_s: a.flush_s - b.flush_s,
            }),
        }
    }
}

/// Figures of the machine's whole disks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskFigures {
    /// Seconds some I/O was in progress.
    pub busy_s: f64,
    /// Flush requests completed (each fsync of the log is one or more).
    pub flushes: f64,
    /// Seconds spent flushing.
    pub flush_s: f64,
}

/// CPU seconds (user + system) of process `pid` so far, from `/proc/<pid>/stat`.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    crate::workloads::pubsub::cpu::cpu_time(pid).map(|d| d.as_secs_f64())
}

/// Bytes process `pid` caused to be written to storage so far (`/proc/<pid>/io`).
pub fn process_write_bytes(pid: u32) -> Option<f64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
}

/// Cores process `pid` may use: the fewest of the machine's cores, the CPUs it may run on
/// (`Cpus_allowed_list`) and its control group's CPU quota (cgroup v2 `cpu.max`, v1
/// `cpu.cfs_quota_us` / `cpu.cfs_period_us`). A broker confined so that it saturates before
/// the load generator is how the model is validated.
pub fn process_cores(pid: u32) -> f64 {
    let machine = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|list| cpus_in_list(list.trim()) as f64)
        .filter(|n| *n > 0.0)
        .unwrap_or(machine);
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let quota = cgroup_quota(&cgroups, |path| std::fs::read_to_string(path).ok());
    machine.min(allowed).min(quota.unwrap_or(f64::INFINITY))
}

/// CPUs in a list such as `0-3,6`.
fn cpus_in_list(list: &str) -> usize {
    list.split(',')
        .filter_map(|part| match part.split_once('-') {
            Some((a, b)) => {
                Some(b.trim().parse::<usize>().ok()? + 1 - a.trim().parse::<usize>().ok()?)
            }
            None => part.trim().parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

/// The CPU quota in cores of the control group named in a `/proc/<pid>/cgroup` text, read
/// through `read`; `None` without one.
fn cgroup_quota(cgroups: &str, read: impl Fn(&str) -> Option<String>) -> Option<f64> {
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            // v2: "max 100000" or "50000 100000".
            let Some(max) = read(&format!("/sys/fs/cgroup{path}/cpu.max")) else {
                continue;
            };
            let mut f = max.split_whitespace().map(|v| v.parse::<f64>().ok());
            if let (Some(Some(q)), Some(Some(p))) = (f.next(), f.next()) {
                return Some(q / p);
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            let dir = format!("/sys/fs/cgroup/{controllers}{path}");
            let value = |file: &str| {
                read(&format!("{dir}/{file}")).and_then(|v| v.trim().parse::<f64>().ok())
            };
            if let (Some(q), Some(p)) = (value("cpu.cfs_quota_us"), value("cpu.cfs_period_us")) {
                if q > 0.0 && p > 0.0 {
                    return Some(q / p);
                }
            }
        }
    }
    None
}

/// The mean wall time of an fsync on the filesystem holding `dir`: `n` appends of 4 KiB to a
/// file of its own there, each followed by `sync_data` (the log's commit, without the
/// broker). The service time of the commit wait in the model; `None` when the file cannot be
/// written.
pub fn fsync_seconds(dir: &std::path::Path, n: u32) -> Option<f64> {
    use std::io::Write;
    let path = dir.join(format!(
        "ferry-bench-fsync-probe-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let probe = || -> std::io::Result<f64> {
        let mut file = std::fs::File::create(&path)?;
        let block = [0x5au8; 4096];
        let mut total = 0.0;
        for _ in 0..n.max(1) {
            file.write_all(&block)?;
            let t = std::time::Instant::now();
            file.sync_data()?;
            total += t.elapsed().as_secs_f64();
        }
        Ok(total / f64::from(n.max(1)))
    };
    let result = probe();
    let _ = std::fs::remove_file(&path);
    result.ok()
}

/// The cores of the machine.
pub fn machine_cores() -> f64 {
    std::thread::available_parallelism().map_or(1, usize::from) as f64
}

/// Seconds of CPU the whole machine used so far, over all cores (`/proc/stat`: every field
/// of the `cpu` line but idle and iowait, in clock ticks).
pub fn machine_busy_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    busy_of_stat(&text)
}

/// Clock ticks per second of `/proc/stat` (USER_HZ, 100 on Linux whatever the kernel's HZ).
const USER_HZ: f64 = 100.0;

/// The busy seconds in a `/proc/stat` text.
fn busy_of_stat(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse::<f64>().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user].
    let busy: f64 = ticks.iter().take(8).sum::<f64>()
        - ticks.get(3).copied().unwrap_or(0.0)
        - ticks.get(4).copied().unwrap_or(0.0);
    Some(busy / USER_HZ)
}

/// The machine's whole disks so far (`/proc/diskstats`).
pub fn disk_figures() -> Option<DiskFigures> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    Some(disks_of(&text))
}

/// The figures of whole disks in a `/proc/diskstats` text (partitions, loop, RAM and zram
/// devices are left out so that nothing counts twice).
fn disks_of(text: &str) -> DiskFigures {
    let mut sum = DiskFigures::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = f.get(2) else { continue };
        // Whole disks: vda, sda, nvme0n1; not vda1, sda2, nvme0n1p1.
        let partition = name.starts_with("nvme") && name.contains('p')
            || !name.starts_with("nvme") && name.ends_with(|c: char| c.is_ascii_digit());
        if partition || ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // Index 12: ms doing I/O; 18 and 19 (kernels since 5.5): flushes, ms flushing.
        sum.busy_s += field(12) / 1000.0;
        sum.flushes += field(18);
        sum.flush_s += field(19) / 1000.0;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_come_from_the_cpu_list_and_the_cgroup_quota() {
        assert_eq!(cpus_in_list("0-1"), 2);
        assert_eq!(cpus_in_list("0-3,6"), 5);
        let files = |path: &str| match path {
            "/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us" => Some("25000\n".to_string()),
            "/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us" => Some("100000\n".to_string()),
            "/sys/fs/cgroup/c/cpu.max" => Some("150000 100000\n".to_string()),
            "/sys/fs/cgroup/d/cpu.max" => Some("max 100000\n".to_string()),
            _ => None,
        };
        assert_eq!(cgroup_quota("4:cpu,cpuacct:/b\n0::/", files), Some(0.25));
        assert_eq!(cgroup_quota("0::/c", files), Some(1.5));
        assert_eq!(cgroup_quota("0::/d", files), None);
        assert!(process_cores(std::process::id()) >= 0.01);
    }

    #[test]
    fn disks_count_whole_disks_and_their_flushes() {
        let text = "\
 254       0 vda 100 0 0 0 0 0 0 0 0 500 1500 0 0 0 0 40 20
 254       1 vda1 90 0 0 0 0 0 0 0 0 400 1400 0 0 0 0 30 10
   7       0 loop0 1 0 0 0 0 0 0 0 0 10 99 0 0 0 0 5 5
 253       0 zram0 1 0 0 0 0 0 0 0 0 10 99 0 0 0 0 5 5
 259       0 nvme0n1 1 0 0 0 0 0 0 0 0 10 250 0 0 0 0 2 4
 259       1 nvme0n1p1 1 0 0 0 0 0 0 0 0 10 200 0 0 0 0 1 1";
        // vda 500 ms busy, 40 flushes in 20 ms; nvme0n1 10 ms, 2 flushes in 4 ms.
        let d = disks_of(text);
        assert!((d.busy_s - 0.51).abs() < 1e-12);
        assert_eq!(d.flushes, 42.0);
        assert!((d.flush_s - 0.024).abs() < 1e-12);
    }

    #[test]
    fn machine_busy_time_leaves_out_idle_and_iowait() {
        // user 100, nice 10, system 50, idle 1000, iowait 40, irq 5, softirq 5, steal 30:
        // 200 ticks busy = 2 s.
        let text = "cpu  100 10 50 1000 40 5 5 30 0 0\ncpu0 50 5 25 500 20 2 3 15 0 0\n";
        assert_eq!(busy_of_stat(text), Some(2.0));
    }

    #[test]
    fn the_difference_of_two_probes_is_what_a_run_used() {
        let a = Probe {
            broker_cpu_s: Some(1.0),
            generator_cpu_s: Some(2.0),
            machine_busy_s: Some(10.0),
            broker_write_bytes: None,
            disks: Some(DiskFigures {
                busy_s: 1.0,
                flushes: 10.0,
                flush_s: 0.5,
            }),
        };
        let b = Probe {
            broker_cpu_s: Some(1.5),
            generator_cpu_s: Some(3.0),
            machine_busy_s: Some(12.0),
            broker_write_bytes: Some(5.0),
            disks: Some(DiskFigures {
                busy_s: 1.25,
                flushes: 30.0,
                flush_s: 0.75,
            }),
        };
        let d = b.since(&a);
        assert_eq!(d.broker_cpu_s, Some(0.5));
        assert_eq!(d.generator_cpu_s, Some(1.0));
        assert_eq!(d.machine_busy_s, Some(2.0));
        assert_eq!(d.broker_write_bytes, None, "unknown before: unknown");
        assert_eq!(
            d.disks,
            Some(DiskFigures {
                busy_s: 0.25,
                flushes: 20.0,
                flush_s: 0.25
            })
        );
        assert!(Probe::now(Some(std::process::id())).broker_cpu_s.is_some());
    }

    #[test]
    fn an_fsync_probe_times_and_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let s = fsync_seconds(dir.path(), 3).unwrap();
        assert!(s > 0.0 && s < 10.0, "{s}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(fsync_seconds(&dir.path().join("missing"), 3), None);
    }
}
