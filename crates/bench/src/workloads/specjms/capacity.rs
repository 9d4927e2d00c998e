//! The capacity model, in the method of operational analysis the SPECjms2007 studies used:
//! from one run at a known rate, the service demand of a message on each resource by the
//! utilization law (D = B / N: busy time over messages, so U = X D), the largest throughput
//! each resource allows (X_max = servers / D), hence the largest BASE, and the response time
//! of a message on a resource at a given load (R = D / (1 - U)), summed over the resources a
//! message visits (the CPU for every message, the disk for persistent ones) to predict the
//! delivery time of each interaction's messages.
//!
//! The broker's busy times come from `/proc/<pid>/stat` (CPU, user + system) and
//! `/proc/diskstats` (the time the data directory's device was busy).

use serde::Serialize;

/// What one run measured, for calibrating the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calibration {
    /// Measured seconds.
    pub secs: f64,
    /// Messages received in them.
    pub messages: f64,
    /// Of those, persistent messages (the disk's customers).
    pub persistent: f64,
    /// Broker CPU seconds in them.
    pub cpu_s: f64,
    /// Cores the broker may use.
    pub cores: f64,
    /// Seconds the disk was busy in them; `None` when it could not be read.
    pub disk_busy_s: Option<f64>,
    /// Bytes the broker wrote to disk in them.
    pub disk_bytes: Option<f64>,
    /// Messages per second per unit of BASE in the topology.
    pub messages_per_base: f64,
}

/// Service demands, and what follows from them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Model {
    /// CPU seconds per message.
    pub cpu_demand_s: f64,
    /// Disk seconds per persistent message (0 when unknown).
    pub disk_demand_s: f64,
    /// Bytes written per persistent message (0 when unknown).
    pub disk_bytes_per_message: f64,
    /// Cores the broker may use.
    pub cores: f64,
    /// Share of persistent messages.
    pub persistent_share: f64,
    /// Messages per second per unit of BASE.
    pub messages_per_base: f64,
}

/// What the model predicts at one load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    /// Messages per second.
    pub messages_per_s: f64,
    /// CPU utilization, 0 to 1 of all cores.
    pub cpu_utilization: f64,
    /// Disk utilization, 0 to 1.
    pub disk_utilization: f64,
    /// Delivery time of a non-persistent message, ms (infinite at or past saturation).
    pub non_persistent_ms: f64,
    /// Delivery time of a persistent message, ms.
    pub persistent_ms: f64,
}

impl Model {
    /// Demands from a calibration run (utilization law: D = busy time / completions).
    pub fn calibrate(c: &Calibration) -> Model {
        let messages = c.messages.max(1.0);
        Model {
            cpu_demand_s: c.cpu_s / messages,
            disk_demand_s: c.disk_busy_s.map_or(0.0, |b| b / c.persistent.max(1.0)),
            disk_bytes_per_message: c.disk_bytes.map_or(0.0, |b| b / c.persistent.max(1.0)),
            cores: c.cores.max(0.01),
            persistent_share: c.persistent / messages,
            messages_per_base: c.messages_per_base,
        }
    }

    /// The largest message rate: the bottleneck's servers over its demand per message.
    pub fn max_messages_per_s(&self) -> f64 {
        let cpu = self.cores / self.cpu_demand_s.max(1e-12);
        let disk = if self.disk_demand_s > 0.0 && self.persistent_share > 0.0 {
            1.0 / (self.disk_demand_s * self.persistent_share)
        } else {
            f64::INFINITY
        };
        cpu.min(disk)
    }

    /// The largest BASE.
    pub fn max_base(&self) -> f64 {
        self.max_messages_per_s() / self.messages_per_base.max(1e-12)
    }

    /// The bottleneck's name.
    pub fn bottleneck(&self) -> &'static str {
        let cpu = self.cores / self.cpu_demand_s.max(1e-12);
        if self.disk_demand_s > 0.0
            && self.persistent_share > 0.0
            && 1.0 / (self.disk_demand_s * self.persistent_share) < cpu
        {
            "disk"
        } else {
            "cpu"
        }
    }

    /// Utilizations and delivery times at `base`.
    pub fn predict(&self, base: f64) -> Prediction {
        let x = base * self.messages_per_base;
        let u_cpu = x * self.cpu_demand_s / self.cores;
        let u_disk = x * self.persistent_share * self.disk_demand_s;
        // One message is served by one core: its own demand, stretched by the queue.
        let r = |d: f64, u: f64| {
            if u < 1.0 {
                d / (1.0 - u)
            } else {
                f64::INFINITY
            }
        };
        let cpu = r(self.cpu_demand_s, u_cpu);
        let disk = r(self.disk_demand_s, u_disk);
        Prediction {
            messages_per_s: x,
            cpu_utilization: u_cpu,
            disk_utilization: u_disk,
            non_persistent_ms: 1000.0 * cpu,
            persistent_ms: 1000.0 * (cpu + disk),
        }
    }
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

/// Seconds the block devices were busy so far (`/proc/diskstats`, the time spent doing I/O,
/// summed over whole disks: partitions are left out so that nothing counts twice).
pub fn disks_busy_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    Some(busy_of(&text))
}

/// The busy time of whole disks in a `/proc/diskstats` text, seconds.
fn busy_of(text: &str) -> f64 {
    let mut ms = 0.0;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = f.get(2) else { continue };
        // Whole disks: vda, sda, nvme0n1; not vda1, sda2, nvme0n1p1, loop or ram devices.
        let partition = name.starts_with("nvme") && name.contains('p')
            || !name.starts_with("nvme") && name.ends_with(|c: char| c.is_ascii_digit());
        if partition || name.starts_with("loop") || name.starts_with("ram") {
            continue;
        }
        // Field 13 (index 12): milliseconds spent doing I/Os.
        if let Some(v) = f.get(12).and_then(|v| v.parse::<f64>().ok()) {
            ms += v;
        }
    }
    ms / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 CPU seconds for 50,000 messages over 10 s on 2 cores, half of them persistent, the
    /// disk busy 1.25 s: by hand, D_cpu = 40 µs, D_disk = 50 µs per persistent message.
    fn calibration() -> Calibration {
        Calibration {
            secs: 10.0,
            messages: 50_000.0,
            persistent: 25_000.0,
            cpu_s: 2.0,
            cores: 2.0,
            disk_busy_s: Some(1.25),
            disk_bytes: Some(25_000.0 * 3000.0),
            messages_per_base: 55.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn demands_follow_the_utilization_law() {
        let m = Model::calibrate(&calibration());
        assert!(close(m.cpu_demand_s, 40e-6));
        assert!(close(m.disk_demand_s, 50e-6));
        assert!(close(m.disk_bytes_per_message, 3000.0));
        assert!(close(m.persistent_share, 0.5));
    }

    #[test]
    fn the_bottleneck_sets_the_largest_base() {
        let m = Model::calibrate(&calibration());
        // CPU: 2 cores / 40 µs = 50,000 msg/s; disk: 1 / (50 µs x 0.5) = 40,000 msg/s.
        assert!(close(m.max_messages_per_s(), 40_000.0));
        assert_eq!(m.bottleneck(), "disk");
        assert!(close(m.max_base(), 40_000.0 / 55.0));
        let mut cpu_bound = calibration();
        cpu_bound.disk_busy_s = Some(0.25);
        let m = Model::calibrate(&cpu_bound);
        assert_eq!(m.bottleneck(), "cpu");
        assert!(close(m.max_base(), 50_000.0 / 55.0));
    }

    #[test]
    fn response_times_stretch_with_utilization() {
        let m = Model::calibrate(&calibration());
        // BASE 200: 11,000 msg/s; U_cpu = 11,000 x 40 µs / 2 = 0.22, U_disk = 5,500 x 50 µs
        // = 0.275; R_cpu = 40 / 0.78 = 51.28 µs, R_disk = 50 / 0.725 = 68.97 µs.
        let p = m.predict(200.0);
        assert!(close(p.messages_per_s, 11_000.0));
        assert!(close(p.cpu_utilization, 0.22));
        assert!(close(p.disk_utilization, 0.275));
        assert!(
            (p.non_persistent_ms - 0.051_282).abs() < 1e-6,
            "{}",
            p.non_persistent_ms
        );
        assert!(
            (p.persistent_ms - (0.051_282 + 0.068_966)).abs() < 1e-6,
            "{}",
            p.persistent_ms
        );
        assert!(
            m.predict(1000.0).persistent_ms.is_infinite(),
            "past saturation"
        );
    }

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
    fn disk_busy_time_counts_whole_disks_only() {
        let text = "\
 254       0 vda 100 0 0 0 0 0 0 0 0 500 1500 0 0 0 0
 254       1 vda1 90 0 0 0 0 0 0 0 0 400 1400 0 0 0 0
   7       0 loop0 1 0 0 0 0 0 0 0 0 10 99 0 0 0 0
 259       0 nvme0n1 1 0 0 0 0 0 0 0 0 10 250 0 0 0 0
 259       1 nvme0n1p1 1 0 0 0 0 0 0 0 0 10 200 0 0 0 0";
        // vda 500 ms and nvme0n1 10 ms; partitions and loop devices left out.
        assert!(close(busy_of(text), 0.51));
    }
}
