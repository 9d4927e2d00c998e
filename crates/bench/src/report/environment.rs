//! What a result was measured with, recorded in every JSON report: the harness's version and
//! git commit, the host (CPU model, cores, kernel), when the run started, the Ferry broker's
//! fsync policy, and the command line (every parameter as given; the program by its name and
//! paths under the current directory relative to it, so that no result names the machine). A
//! figure without these cannot be compared with another one.

use std::time::SystemTime;

use serde::Serialize;

use crate::args::CommonArgs;

/// The commit the harness was built from (`git rev-parse`, by build.rs), `-dirty` when the
/// work tree had uncommitted changes to tracked files then; `None` outside a git checkout.
const GIT_COMMIT: Option<&str> = option_env!("FERRY_GIT_COMMIT");

/// The conditions of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Environment {
    /// The version of Ferry (the workspace's) the harness belongs to.
    pub ferry_version: String,
    /// The git commit the harness was built from, if known.
    pub git_commit: Option<String>,
    /// When the run started, RFC 3339 in UTC.
    pub date: String,
    /// The machine it ran on.
    pub host: Host,
    /// The Ferry broker's fsync policy (`always`, `interval:MS`, `never`): the one a broker the
    /// harness started ran with, or what `--broker-fsync` says of the broker at `--server`.
    pub fsync: String,
    /// The harness's command line, program name first.
    pub command: Vec<String>,
}

/// The machine a run was measured on.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Host {
    /// The CPU's model name (`/proc/cpuinfo`), if the system says.
    pub cpu_model: Option<String>,
    /// Cores (hardware threads) available to the harness.
    pub cores: usize,
    /// Operating system and kernel release, e.g. `Linux 6.1.0-18-amd64`.
    pub kernel: Option<String>,
}

impl Environment {
    /// The conditions of a run starting now with `common`'s flags.
    pub fn capture(common: &CommonArgs) -> Environment {
        Environment {
            ferry_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: GIT_COMMIT.map(str::to_string),
            date: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            host: Host::this(),
            fsync: common.broker_fsync.clone(),
            command: command_line(),
        }
    }
}

/// The harness's command line as a reader would type it in the project: the program by its
/// name (`ferry-bench`, not the build directory it was run from) and a path under the current
/// directory relative to it, so that a result names nothing of the machine it ran on.
pub fn command_line() -> Vec<String> {
    let here = std::env::current_dir().ok();
    portable_command(std::env::args().collect(), here.as_deref())
}

/// [`command_line`] of `args`, run from `here`.
fn portable_command(args: Vec<String>, here: Option<&std::path::Path>) -> Vec<String> {
    args.into_iter()
        .enumerate()
        .map(|(i, arg)| {
            let path = std::path::Path::new(&arg);
            if i == 0 {
                return path
                    .file_name()
                    .map_or(arg.clone(), |n| n.to_string_lossy().into_owned());
            }
            match here.and_then(|h| path.strip_prefix(h).ok()) {
                Some(inside) if path.is_absolute() => inside.to_string_lossy().into_owned(),
                _ => arg,
            }
        })
        .collect()
}

impl Host {
    /// This machine.
    pub fn this() -> Host {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let kernel = match (
            read("/proc/sys/kernel/ostype"),
            read("/proc/sys/kernel/osrelease"),
        ) {
            (Some(os), Some(release)) => Some(format!("{os} {release}")),
            (None, Some(release)) => Some(release),
            _ => None,
        };
        Host {
            cpu_model: read("/proc/cpuinfo").and_then(|info| cpu_model(&info)),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            kernel,
        }
    }
}

/// The first `model name` (x86) or `Model`/`Hardware` (ARM) line of `/proc/cpuinfo`.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_command_names_the_program_and_paths_inside_the_project_only() {
        let args = [
            "/somewhere/build/target/release/ferry-bench",
            "stream",
            "--json",
            "/home/me/ferry/docs/benchmarks/results/stream.json",
            "--data-dir",
            "/scratch/data",
            "relative/out.json",
        ]
        .map(String::from)
        .to_vec();
        let here = std::path::Path::new("/home/me/ferry");
        assert_eq!(
            portable_command(args, Some(here)),
            [
                "ferry-bench",
                "stream",
                "--json",
                "docs/benchmarks/results/stream.json",
                "--data-dir",
                "/scratch/data",
                "relative/out.json",
            ]
        );
    }

    #[test]
    fn cpu_models() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(
            cpu_model(x86).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\n\nModel\t\t: Raspberry Pi 4 Model B\n";
        assert_eq!(cpu_model(arm).as_deref(), Some("Raspberry Pi 4 Model B"));
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn this_host() {
        let host = Host::this();
        assert!(host.cores >= 1);
        if cfg!(target_os = "linux") {
            assert!(
                host.kernel
                    .as_deref()
                    .is_some_and(|k| k.starts_with("Linux ")),
                "{host:?}"
            );
        }
    }
}
