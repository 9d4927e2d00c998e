//! The capacity model, in the method of operational analysis the SPECjms2007 studies used.
//!
//! Calibration: runs at two or more rates. For each resource, the busy time per second it
//! showed in each run is fitted by least squares to a line in the message rate X:
//! `busy/s = fixed + D * X`, the service demand D per message above a fixed part that does not
//! grow with load (timers, polling, group-commit cycles). One run alone, or runs at one rate,
//! give the plain utilization law (fixed 0, D = busy / messages). The resources: the broker's
//! CPU (limit: the cores it may use), the host's CPU as the broker and the load generator
//! share it (limit: the machine's cores; what other processes used meanwhile is recorded, not
//! subtracted: the scheduler shares the cores among whoever runs, so it is not a fixed
//! remainder), and the disk (limit: busy all the time).
//!
//! Prediction: the utilization at a rate is the line over the limit; the largest rate is
//! where the first resource reaches its limit (the bottleneck), and the largest BASE the
//! largest whose topology asks no more. The delivery time of a message is the sum along its
//! path of R = S / (1 - U) per resource: the CPU for every message, and for a message that is
//! persistent or sent in a transaction the wait for the log's fsyncs, whose service time is an
//! fsync timed on the broker's filesystem (else the disk's busy time per flush). A commit
//! waits for more than one fsync (the one in flight when it arrives, then its own; a send and
//! its commit record): how many is what the calibration runs observed, their commits' mean
//! time over one fsync's R at the run's disk utilization ([`Model::fsyncs_per_commit`]).

use serde::Serialize;

/// What one run measured, for calibrating the model (the differences of two
/// [`Probe`](super::probes::Probe)s around the measurement, and its counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Calibration {
    /// The run's BASE.
    pub base: f64,
    /// Measured seconds.
    pub secs: f64,
    /// Messages received in them.
    pub messages: f64,
    /// Of those, messages that wait for a commit (persistent, or sent in a transaction).
    pub committed: f64,
    /// Broker CPU seconds in them.
    pub broker_cpu_s: f64,
    /// Load generator CPU seconds in them.
    pub generator_cpu_s: Option<f64>,
    /// CPU seconds of the whole machine in them.
    pub machine_busy_s: Option<f64>,
    /// Seconds the disk was busy in them.
    pub disk_busy_s: Option<f64>,
    /// Bytes the broker wrote to disk in them.
    pub disk_bytes: Option<f64>,
    /// Flush requests the disk completed in them.
    pub flushes: Option<f64>,
    /// Wall time of one fsync timed on the broker's filesystem, seconds.
    pub fsync_s: Option<f64>,
    /// Sends in them that waited for the log (a transaction's commit, or persistent messages).
    pub commits: f64,
    /// Their time in all, from having a connection to the broker's answer, seconds.
    pub commit_s: f64,
    /// Cores the broker may use.
    pub broker_cores: f64,
    /// Cores of the machine.
    pub machine_cores: f64,
}

impl Calibration {
    /// Messages per second.
    pub fn rate(&self) -> f64 {
        self.messages / self.secs.max(1e-9)
    }

    /// Busy time per second of `resource`, when measured.
    pub fn busy(&self, resource: ResourceKind) -> Option<f64> {
        let busy = match resource {
            ResourceKind::BrokerCpu => Some(self.broker_cpu_s),
            ResourceKind::HostCpu => self.generator_cpu_s.map(|g| g + self.broker_cpu_s),
            ResourceKind::Disk => self.disk_busy_s,
        }?;
        Some(busy / self.secs.max(1e-9))
    }

    /// The fsyncs a commit of this run waited for: its mean time over one fsync's R = S / (1 -
    /// U) at the run's disk utilization; `None` without commits, a timed fsync or the disk.
    pub fn fsyncs_per_commit(&self) -> Option<f64> {
        let fsync = self.fsync_s.filter(|f| *f > 0.0)?;
        if self.commits <= 0.0 {
            return None;
        }
        let u = self.busy(ResourceKind::Disk)?.min(0.99);
        Some(self.commit_s / self.commits / residence(fsync, u))
    }

    /// CPU of other processes per second (the machine's less the broker's and generator's).
    pub fn others_cores(&self) -> Option<f64> {
        let (m, g) = (self.machine_busy_s?, self.generator_cpu_s?);
        Some(((m - g - self.broker_cpu_s) / self.secs.max(1e-9)).max(0.0))
    }
}

/// A resource the model knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// The broker process's CPU.
    BrokerCpu,
    /// The CPU the broker and the load generator share on one machine.
    HostCpu,
    /// The disk holding the broker's log.
    Disk,
}

impl ResourceKind {
    /// A name for reports.
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::BrokerCpu => "broker CPU",
            ResourceKind::HostCpu => "host CPU",
            ResourceKind::Disk => "disk",
        }
    }
}

/// A least-squares line `y = fixed + per_message * x`: busy time per second against messages
/// per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Line {
    /// Busy time per second that does not grow with load.
    pub fixed: f64,
    /// Busy time per message: the service demand.
    pub per_message: f64,
}

impl Line {
    /// The least-squares line through `(x, y)` points; `None` without points. With fewer than
    /// two distinct rates, the utilization law through the origin (fixed 0). A negative fixed
    /// part (noise) is refitted through the origin; a negative slope leaves the mean as fixed.
    pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
        let n = points.len() as f64;
        if points.is_empty() {
            return None;
        }
        let through_origin = || {
            let sxx: f64 = points.iter().map(|(x, _)| x * x).sum();
            let sxy: f64 = points.iter().map(|(x, y)| x * y).sum();
            Line {
                fixed: 0.0,
                per_message: if sxx > 0.0 { sxy / sxx } else { 0.0 },
            }
        };
        let mx = points.iter().map(|(x, _)| x).sum::<f64>() / n;
        let my = points.iter().map(|(_, y)| y).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        if sxx <= 1e-12 * mx.abs().max(1.0) * mx.abs().max(1.0) {
            return Some(through_origin());
        }
        let per_message = sxy / sxx;
        if per_message < 0.0 {
            return Some(Line {
                fixed: my,
                per_message: 0.0,
            });
        }
        let fixed = my - per_message * mx;
        if fixed < 0.0 {
            return Some(through_origin());
        }
        Some(Line { fixed, per_message })
    }

    /// Busy time per second at `x` messages per second.
    pub fn at(&self, x: f64) -> f64 {
        self.fixed + self.per_message * x
    }

    /// The rate at which the busy time reaches `limit` (infinite when it never does; 0 when
    /// the fixed part alone reaches it).
    pub fn reaches(&self, limit: f64) -> f64 {
        if self.fixed >= limit {
            0.0
        } else if self.per_message <= 0.0 {
            f64::INFINITY
        } else {
            (limit - self.fixed) / self.per_message
        }
    }
}

/// One resource of the model: its demand line and its limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Resource {
    /// Which one.
    pub kind: ResourceKind,
    /// Busy time per second against the message rate.
    pub demand: Line,
    /// The busy time per second it can give (cores for CPU, 1 for the disk).
    pub limit: f64,
}

impl Resource {
    /// Utilization at `x` messages per second, 0 to 1 of the limit.
    pub fn utilization(&self, x: f64) -> f64 {
        self.demand.at(x) / self.limit.max(1e-12)
    }

    /// The largest message rate it allows.
    pub fn max_rate(&self) -> f64 {
        self.demand.reaches(self.limit)
    }
}

/// The fitted model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    /// The BASEs it was calibrated on.
    pub calibrated_on: Vec<f64>,
    /// Its resources, the CPU ones first.
    pub resources: Vec<Resource>,
    /// Bytes the broker writes per second against the message rate (when measured).
    pub disk_bytes: Option<Line>,
    /// Flushes per second against the message rate (when measured).
    pub flushes: Option<Line>,
    /// The service time of one fsync of the log, seconds: the mean of the timed fsyncs, else
    /// the disk's busy time per flush.
    pub fsync_s: f64,
    /// Cores other processes of the machine used, on average over the calibration runs.
    pub others_cores: Option<f64>,
    /// The fsyncs a committed message's send waits for, as the calibration runs observed
    /// ([`Calibration::fsyncs_per_commit`], their mean); 1 when none observed it.
    pub fsyncs_per_commit: f64,
}

/// What the model predicts at one rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Messages per second.
    pub messages_per_s: f64,
    /// Utilization of each resource, in the order of [`Model::resources`].
    pub utilization: Vec<(ResourceKind, f64)>,
    /// Time on the CPU of a message, R = S / (1 - U), ms (infinite at or past saturation).
    pub cpu_ms: f64,
    /// Wait for the log's fsyncs of a committed message: [`Model::fsyncs_per_commit`] times
    /// R = S / (1 - U), ms.
    pub commit_ms: f64,
}

impl Prediction {
    /// The delivery time of a message, ms: the CPU, and the fsync when it waits for a commit.
    pub fn delivery_ms(&self, committed: bool) -> f64 {
        self.cpu_ms + if committed { self.commit_ms } else { 0.0 }
    }

    /// Utilization of `kind`, when modelled.
    pub fn utilization_of(&self, kind: ResourceKind) -> Option<f64> {
        self.utilization
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, u)| *u)
    }
}

/// R = S / (1 - U), infinite at or past saturation.
pub fn residence(service: f64, utilization: f64) -> f64 {
    if utilization < 1.0 {
        service / (1.0 - utilization)
    } else {
        f64::INFINITY
    }
}

impl Model {
    /// Fits the model to the calibration runs; `None` without any.
    pub fn fit(runs: &[Calibration]) -> Option<Model> {
        let first = runs.first()?;
        let line = |kind: ResourceKind| {
            let points: Vec<(f64, f64)> = runs
                .iter()
                .filter_map(|c| c.busy(kind).map(|b| (c.rate(), b)))
                .collect();
            (points.len() == runs.len())
                .then(|| Line::fit(&points))
                .flatten()
        };
        let mean =
            |f: &dyn Fn(&Calibration) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
        let mut resources = Vec::new();
        if let Some(demand) = line(ResourceKind::BrokerCpu) {
            resources.push(Resource {
                kind: ResourceKind::BrokerCpu,
                demand,
                limit: mean(&|c| c.broker_cores).max(0.01),
            });
        }
        if let Some(demand) = line(ResourceKind::HostCpu) {
            resources.push(Resource {
                kind: ResourceKind::HostCpu,
                demand,
                limit: first.machine_cores.max(0.01),
            });
        }
        let others: Option<Vec<f64>> = runs.iter().map(Calibration::others_cores).collect();
        let others_cores = others.map(|o| o.iter().sum::<f64>() / o.len() as f64);
        let timed: Vec<f64> = runs.iter().filter_map(|c| c.fsync_s).collect();
        if let Some(demand) = line(ResourceKind::Disk) {
            resources.push(Resource {
                kind: ResourceKind::Disk,
                demand,
                limit: 1.0,
            });
        }
        let fit_of = |f: &dyn Fn(&Calibration) -> Option<f64>| {
            let points: Option<Vec<(f64, f64)>> = runs
                .iter()
                .map(|c| f(c).map(|v| (c.rate(), v / c.secs.max(1e-9))))
                .collect();
            points.and_then(|p| Line::fit(&p))
        };
        let busy: f64 = runs.iter().filter_map(|c| c.disk_busy_s).sum();
        let flushes: f64 = runs.iter().filter_map(|c| c.flushes).sum();
        let observed: Vec<f64> = runs
            .iter()
            .filter_map(Calibration::fsyncs_per_commit)
            .collect();
        let mut bases: Vec<f64> = runs.iter().map(|c| c.base).collect();
        bases.sort_by(f64::total_cmp);
        Some(Model {
            calibrated_on: bases,
            resources,
            disk_bytes: fit_of(&|c| c.disk_bytes),
            flushes: fit_of(&|c| c.flushes),
            fsync_s: if !timed.is_empty() {
                timed.iter().sum::<f64>() / timed.len() as f64
            } else if flushes > 0.0 {
                busy / flushes
            } else {
                0.0
            },
            others_cores,
            fsyncs_per_commit: if observed.is_empty() {
                1.0
            } else {
                observed.iter().sum::<f64>() / observed.len() as f64
            },
        })
    }

    /// The resource that saturates first.
    pub fn bottleneck(&self) -> Option<&Resource> {
        self.resources
            .iter()
            .min_by(|a, b| a.max_rate().total_cmp(&b.max_rate()))
    }

    /// The largest message rate: where the bottleneck reaches its limit.
    pub fn max_messages_per_s(&self) -> f64 {
        self.bottleneck().map_or(f64::INFINITY, Resource::max_rate)
    }

    /// The largest BASE up to `ceiling` whose rate (`rate_of(base)`, rising with BASE) the
    /// bottleneck allows; 0 when not even BASE 1 fits.
    pub fn max_base(&self, rate_of: impl Fn(u32) -> f64, ceiling: u32) -> u32 {
        let max = self.max_messages_per_s();
        let (mut lo, mut hi) = (0u32, ceiling.saturating_add(1));
        // Invariant: lo fits (or is 0), hi does not (or is past the ceiling).
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if rate_of(mid) <= max {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The fractional BASE at which the bottleneck saturates, interpolating the rate between
    /// [`Model::max_base`] and the next BASE.
    pub fn max_base_exact(&self, rate_of: impl Fn(u32) -> f64, ceiling: u32) -> f64 {
        let b = self.max_base(&rate_of, ceiling);
        let max = self.max_messages_per_s();
        let (r0, r1) = (if b == 0 { 0.0 } else { rate_of(b) }, rate_of(b + 1));
        if b >= ceiling || r1 <= r0 {
            return f64::from(b);
        }
        f64::from(b) + ((max - r0) / (r1 - r0)).clamp(0.0, 1.0)
    }

    /// Utilizations and response times at `x` messages per second.
    pub fn predict(&self, x: f64) -> Prediction {
        let utilization = self
            .resources
            .iter()
            .map(|r| (r.kind, r.utilization(x)))
            .collect();
        // The CPU a message visits: the host's when the load generator is measured (the
        // broker and the generator queue for the same cores), else the broker's.
        let cpu = self
            .resources
            .iter()
            .find(|r| r.kind == ResourceKind::HostCpu)
            .or_else(|| {
                self.resources
                    .iter()
                    .find(|r| r.kind == ResourceKind::BrokerCpu)
            });
        let cpu_s = cpu.map_or(0.0, |r| {
            residence(r.demand.per_message, r.utilization(x).max(0.0))
        });
        let disk_u = self
            .resources
            .iter()
            .find(|r| r.kind == ResourceKind::Disk)
            .map_or(0.0, |r| r.utilization(x));
        Prediction {
            messages_per_s: x,
            utilization,
            cpu_ms: 1000.0 * cpu_s,
            commit_ms: 1000.0 * self.fsyncs_per_commit * residence(self.fsync_s, disk_u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// Three 10 s runs at 500, 1,000 and 2,000 messages/s on 2 cores, made by hand from:
    /// broker CPU 0.100 cores + 43.5 µs a message; load generator 0.05 + 100 µs; other
    /// processes 0.5 cores; disk busy 0.2 + 50 µs a message, one flush per ms of it (flushes
    /// 200/s + 0.05 a message); 3,000 bytes written per message.
    fn runs() -> Vec<Calibration> {
        [(10.0, 500.0), (20.0, 1000.0), (40.0, 2000.0)]
            .into_iter()
            .map(|(base, x)| {
                let broker = (0.100 + 43.5e-6 * x) * 10.0;
                let generator = (0.05 + 100e-6 * x) * 10.0;
                let disk = (0.2 + 50e-6 * x) * 10.0;
                Calibration {
                    base,
                    secs: 10.0,
                    messages: 10.0 * x,
                    committed: 5.0 * x,
                    broker_cpu_s: broker,
                    generator_cpu_s: Some(generator),
                    machine_busy_s: Some(broker + generator + 5.0),
                    disk_busy_s: Some(disk),
                    disk_bytes: Some(3000.0 * 10.0 * x),
                    flushes: Some(disk * 1000.0),
                    fsync_s: None,
                    commits: 0.0,
                    commit_s: 0.0,
                    broker_cores: 2.0,
                    machine_cores: 2.0,
                }
            })
            .collect()
    }

    #[test]
    fn least_squares_by_hand() {
        // (1, 1), (2, 3), (3, 2): means 2 and 2, Sxx = 2, Sxy = 1: slope 0.5, intercept 1.
        let l = Line::fit(&[(1.0, 1.0), (2.0, 3.0), (3.0, 2.0)]).unwrap();
        assert!(close(l.per_message, 0.5) && close(l.fixed, 1.0), "{l:?}");
        // One point: the utilization law, busy / rate through the origin.
        let l = Line::fit(&[(500.0, 0.12175)]).unwrap();
        assert!(close(l.per_message, 243.5e-6) && l.fixed == 0.0, "{l:?}");
        // (1, 0), (2, 2) would cross at -2: refitted through the origin, Sxy/Sxx = 4/5.
        let l = Line::fit(&[(1.0, 0.0), (2.0, 2.0)]).unwrap();
        assert!(close(l.per_message, 0.8) && l.fixed == 0.0, "{l:?}");
        // Falling busy time (noise): no demand per message, the mean as the fixed part.
        let l = Line::fit(&[(1.0, 2.0), (2.0, 1.0)]).unwrap();
        assert!(close(l.fixed, 1.5) && l.per_message == 0.0, "{l:?}");
        assert_eq!(Line::fit(&[]), None);
    }

    #[test]
    fn the_fit_recovers_fixed_and_per_message_demands() {
        let m = Model::fit(&runs()).unwrap();
        assert_eq!(m.calibrated_on, vec![10.0, 20.0, 40.0]);
        let r = |k| m.resources.iter().find(|r| r.kind == k).copied().unwrap();
        let broker = r(ResourceKind::BrokerCpu);
        assert!(close(broker.demand.fixed, 0.100) && close(broker.demand.per_message, 43.5e-6));
        assert!(close(broker.limit, 2.0));
        // Host: broker + generator = 0.15 + 143.5 µs; limit the 2 cores (others' 0.5 noted).
        let host = r(ResourceKind::HostCpu);
        assert!(close(host.demand.fixed, 0.15) && close(host.demand.per_message, 143.5e-6));
        assert!(close(host.limit, 2.0));
        assert!(close(m.others_cores.unwrap(), 0.5));
        let disk = r(ResourceKind::Disk);
        assert!(close(disk.demand.fixed, 0.2) && close(disk.demand.per_message, 50e-6));
        let bytes = m.disk_bytes.unwrap();
        assert!(bytes.fixed.abs() < 1e-6 && close(bytes.per_message, 3000.0));
        let flushes = m.flushes.unwrap();
        assert!(close(flushes.fixed, 200.0) && close(flushes.per_message, 0.05));
        // 7.75 s busy over 7,750 flushes.
        assert!(close(m.fsync_s, 1e-3));
        // Timed fsyncs win: the mean of 2 and 4 ms.
        let mut timed = runs();
        timed[0].fsync_s = Some(2e-3);
        timed[2].fsync_s = Some(4e-3);
        assert!(close(Model::fit(&timed).unwrap().fsync_s, 3e-3));
    }

    #[test]
    fn the_bottleneck_sets_the_largest_base() {
        let m = Model::fit(&runs()).unwrap();
        // Broker CPU: (2 - 0.1) / 43.5 µs = 43,678 msg/s; host CPU: (2 - 0.15) / 143.5 µs
        // = 12,891.99 msg/s; disk: (1 - 0.2) / 50 µs = 16,000 msg/s.
        assert_eq!(m.bottleneck().unwrap().kind, ResourceKind::HostCpu);
        assert!(close(m.max_messages_per_s(), 1.85 / 143.5e-6));
        // 55 messages/s per BASE: 12,891.99 / 55 = 234.40.
        let rate = |b: u32| 55.0 * f64::from(b);
        assert_eq!(m.max_base(rate, 100_000), 234);
        assert!((m.max_base_exact(rate, 100_000) - 234.3999).abs() < 1e-3);
        assert_eq!(m.max_base(rate, 100), 100, "held to the ceiling");
        // The utilization at the largest rate is the limit.
        assert!(close(
            m.predict(m.max_messages_per_s())
                .utilization_of(ResourceKind::HostCpu)
                .unwrap(),
            1.0
        ));
    }

    #[test]
    fn a_single_calibration_overestimates_the_demand() {
        // The first run alone: 1.2175 s over 5,000 messages = 243.5 µs, no fixed part.
        let m = Model::fit(&runs()[..1]).unwrap();
        let broker = m.resources[0];
        assert_eq!(broker.kind, ResourceKind::BrokerCpu);
        assert!(close(broker.demand.per_message, 243.5e-6) && broker.demand.fixed == 0.0);
    }

    #[test]
    fn response_times_add_up_along_the_path() {
        let m = Model::fit(&runs()).unwrap();
        // 5,500 msg/s: U_host = (0.15 + 0.78925) / 2 = 0.469625, R_cpu = 143.5 µs /
        // 0.530375 = 270.56 µs; U_disk = 0.2 + 0.275 = 0.475, R_fsync = 1 ms / 0.525 =
        // 1.904762 ms.
        let p = m.predict(5500.0);
        assert!((p.utilization_of(ResourceKind::HostCpu).unwrap() - 0.469_625).abs() < 1e-9);
        assert!(close(p.utilization_of(ResourceKind::Disk).unwrap(), 0.475));
        assert!((p.cpu_ms - 0.270_563).abs() < 1e-6, "{}", p.cpu_ms);
        assert!((p.commit_ms - 1.904_762).abs() < 1e-6, "{}", p.commit_ms);
        assert!(close(p.delivery_ms(false), p.cpu_ms));
        assert!(close(p.delivery_ms(true), p.cpu_ms + p.commit_ms));
        assert!(
            m.predict(20_000.0).delivery_ms(false).is_infinite(),
            "past saturation"
        );
        assert!(close(residence(2.0, 0.5), 4.0));
    }

    #[test]
    fn a_commit_waits_for_the_fsyncs_the_calibration_observed() {
        // Timed fsync 1 ms; disk busy 0.225, 0.25 and 0.3 at 500, 1,000 and 2,000 msg/s: one
        // fsync's R = 1 / 0.775 = 1.290323, 1 / 0.75 = 1.333333 and 1 / 0.7 = 1.428571 ms.
        // 1,000 commits a run, averaging 2, 3 and 4 of those: 2.580645, 4 and 5.714286 ms.
        let mut runs = runs();
        for (r, (n, u)) in runs.iter_mut().zip([(2.0, 0.225), (3.0, 0.25), (4.0, 0.3)]) {
            r.fsync_s = Some(1e-3);
            r.commits = 1000.0;
            r.commit_s = 1000.0 * n * 1e-3 / (1.0 - u);
        }
        assert!((runs[0].fsyncs_per_commit().unwrap() - 2.0).abs() < 1e-9);
        let m = Model::fit(&runs).unwrap();
        assert!(close(m.fsyncs_per_commit, 3.0), "{}", m.fsyncs_per_commit);
        // At 5,500 msg/s U_disk = 0.475: 3 x 1 ms / 0.525 = 5.714286 ms.
        let p = m.predict(5500.0);
        assert!((p.commit_ms - 5.714_286).abs() < 1e-6, "{}", p.commit_ms);
        // A run without commits observes nothing; none observed: one fsync.
        runs[1].commits = 0.0;
        assert_eq!(runs[1].fsyncs_per_commit(), None);
        assert!(close(Model::fit(&runs).unwrap().fsyncs_per_commit, 3.0));
        assert!(close(
            Model::fit(&super::tests::runs()).unwrap().fsyncs_per_commit,
            1.0
        ));
    }

    #[test]
    fn without_the_generator_the_broker_cpu_is_the_path() {
        let mut runs = runs();
        for r in &mut runs {
            r.generator_cpu_s = None;
            r.disk_busy_s = None;
            r.flushes = None;
        }
        let m = Model::fit(&runs).unwrap();
        assert_eq!(m.resources.len(), 1);
        // 2,000 msg/s: U = (0.1 + 0.087) / 2 = 0.0935; R = 43.5 µs / 0.9065 = 47.99 µs.
        let p = m.predict(2000.0);
        assert!((p.cpu_ms - 0.047_987).abs() < 1e-6, "{}", p.cpu_ms);
        assert_eq!(p.commit_ms, 0.0);
    }
}
