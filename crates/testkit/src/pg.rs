//! [`PgCluster`]: a throwaway PostgreSQL server for tests, never a shared or existing one.
//!
//! It runs the Debian binaries (`/usr/lib/postgresql/<version>/bin`, or `FERRY_PG_BINDIR`):
//! `initdb` a cluster in a temporary directory, start it with `pg_ctl` on a free loopback port below the ephemeral range
//! (fsync on, unix sockets in the temp dir), stop it with `pg_ctl stop -m immediate` on drop.
//! PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
//! (via `runuser`) and owns the temp dir. A small watcher process stops the server and removes
//! the directory if the test process dies without dropping the cluster (or keeps it in a
//! `static`, which is never dropped).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use tempfile::TempDir;

/// Where the Debian package puts each major version's binaries.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// A PostgreSQL server of the test's own; stopped and deleted on drop.
pub struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    /// Run server commands as the `postgres` user (the test runs as root).
    as_postgres: bool,
    watcher: Option<Child>,
    next_db: AtomicU64,
}

impl std::fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCluster")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// The directory holding `initdb`, `pg_ctl` and `psql`.
pub fn find_bindir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("FERRY_PG_BINDIR") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").exists() {
            return Ok(dir);
        }
        return Err(format!("FERRY_PG_BINDIR={} has no initdb", dir.display()));
    }
    let mut best: Option<(u32, PathBuf)> = None;
    if let Ok(entries) = std::fs::read_dir(DEBIAN_ROOT) {
        for e in entries.flatten() {
            let bin = e.path().join("bin");
            let version = e.file_name().to_string_lossy().parse::<u32>().unwrap_or(0);
            if bin.join("initdb").exists() && best.as_ref().is_none_or(|(v, _)| version > *v) {
                best = Some((version, bin));
            }
        }
    }
    best.map(|(_, bin)| bin).ok_or_else(|| {
        format!(
            "PostgreSQL server binaries not found: no {DEBIAN_ROOT}/*/bin/initdb. \
             These tests need a real PostgreSQL: install the Debian package \
             (`apt-get install -y postgresql`, which scripts/test does) or set FERRY_PG_BINDIR"
        )
    })
}

fn run(cmd: &mut Command, what: &str) -> Result<Output, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out)
}

fn id_of(flag: &str) -> Result<u32, String> {
    let out = run(
        Command::new("id").args([flag, "postgres"]),
        "looking up the postgres user",
    )?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| format!("bad id output: {e}"))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Ports for test servers come from below Linux's ephemeral range (32768 and up): a port
/// the kernel hands to some other socket bound to port 0, or to a client's outgoing
/// connection, can never collide with a test server's, even while that server is stopped.
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// How often a first start picks another port when its port was taken meanwhile.
const START_ATTEMPTS: u32 = 5;

/// A loopback port in [`TEST_PORTS`] that nothing listens on right now.
fn free_port() -> Result<u16, String> {
    use std::hash::{BuildHasher, Hasher};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let span = u64::from(TEST_PORTS.end - TEST_PORTS.start);
    for _ in 0..200 {
        // Random enough that parallel test processes start from different places.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
        let offset = u16::try_from(h.finish() % span).unwrap_or(0);
        let port = TEST_PORTS.start + offset;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(format!(
        "finding a free port: none free among 200 tries in {TEST_PORTS:?}"
    ))
}

/// Whether a failed start failed because its port was taken.
fn port_taken(error: &str) -> bool {
    error.contains("Address already in use")
}

impl PgCluster {
    /// Creates and starts a cluster. Panics, saying why, when PostgreSQL is missing or does
    /// not start: tests that need it fail rather than skip.
    pub fn start() -> PgCluster {
        PgCluster::try_start().unwrap_or_else(|e| panic!("cannot start a test PostgreSQL: {e}"))
    }

    /// Creates and starts a cluster.
    pub fn try_start() -> Result<PgCluster, String> {
        PgCluster::try_start_on(free_port()?)
    }

    /// Creates and starts a cluster, trying `port` first.
    fn try_start_on(port: u16) -> Result<PgCluster, String> {
        let bin = find_bindir()?;
        let dir = tempfile::Builder::new()
            .prefix("ferry-pg-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let as_postgres = running_as_root();
        if as_postgres {
            let (uid, gid) = (id_of("-u")?, id_of("-g")?);
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(|e| format!("chown {} to postgres: {e}", dir.path().display()))?;
        }
        let mut cluster = PgCluster {
            dir,
            bin,
            port,
            as_postgres,
            watcher: None,
            next_db: AtomicU64::new(1),
        };
        let data = cluster.data_dir();
        run(
            cluster
                .server_command("initdb")
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                ])
                .arg("--no-sync"),
            "initdb",
        )?;
        // The port was free when picked; another process may take it before the server
        // binds it. A first start then simply picks another.
        let mut attempt = 1;
        while let Err(e) = cluster.start_again() {
            if !port_taken(&e) || attempt == START_ATTEMPTS {
                return Err(e);
            }
            attempt += 1;
            cluster.port = free_port()?;
            // A fresh log, so the next failure is judged by its own lines.
            let _ = std::fs::remove_file(cluster.dir.path().join("server.log"));
        }
        cluster.watcher = cluster.spawn_watcher();
        Ok(cluster)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A command running `program` from the bin dir, as `postgres` when we are root.
    fn server_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Starts the server (again, after [`PgCluster::stop`]) on the same port and data.
    pub fn start_again(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=300 \
             -c shared_buffers=32MB",
            self.port,
            self.dir.path().display()
        );
        run(
            self.server_command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
            "pg_ctl start",
        )
        .map_err(|e| format!("{e}\nserver log:\n{}", self.log()))?;
        Ok(())
    }

    /// Stops the server at once (`-m immediate`, like a crash: committed data survives).
    pub fn stop(&self) -> Result<(), String> {
        run(
            self.server_command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-m", "immediate", "-w", "stop"]),
            "pg_ctl stop",
        )
        .map(|_| ())
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// A watcher that stops the server and removes the directory once this process is gone.
    fn spawn_watcher(&self) -> Option<Child> {
        let pg_ctl = self.bin.join("pg_ctl");
        let runas = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {runas}'{pg_ctl}' -D '{data}' -m immediate stop; rm -rf '{dir}'",
            pid = std::process::id(),
            pg_ctl = pg_ctl.display(),
            data = self.data_dir().display(),
            dir = self.dir.path().display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the cluster (and its unix socket).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// URL of the `postgres` database as the `postgres` superuser.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// URL of database `db` as the `postgres` superuser.
    pub fn url_for(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs one SQL command with `psql` against database `db`.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = run(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
                .args(["-h", "127.0.0.1", "-U", "postgres"])
                .args(["-p", &self.port.to_string(), "-d", db, "-c", sql]),
            "psql",
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Creates a new, empty database and returns its URL.
    pub fn fresh_database(&self) -> String {
        let n = self.next_db.fetch_add(1, Ordering::Relaxed);
        let name = format!("ferry_test_{n}");
        self.psql("postgres", &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        self.url_for(&name)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self.stop();
        if let Some(mut w) = self.watcher.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn free_ports_come_from_below_the_ephemeral_range() {
        for _ in 0..20 {
            assert!(TEST_PORTS.contains(&free_port().unwrap()));
        }
    }

    #[test]
    fn a_first_start_on_a_taken_port_moves_to_another() {
        let taken = TcpListener::bind(("127.0.0.1", free_port().unwrap())).unwrap();
        let taken_port = taken.local_addr().unwrap().port();
        let pg = PgCluster::try_start_on(taken_port).unwrap();
        assert_ne!(pg.port(), taken_port);
        assert_eq!(pg.psql("postgres", "SELECT 1").unwrap().trim(), "1");
    }
}
