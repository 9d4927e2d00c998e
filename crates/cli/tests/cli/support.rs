//! Running the `ferry` binary against a test broker and looking at what it printed.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ferry_protocol::QueueInfo;
use ferry_testkit::TestServer;
use tokio::io::AsyncWriteExt;

/// The binary under test, built by cargo for this package's integration tests.
pub fn ferry_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ferry"))
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Out {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "ferry failed: {self:?}");
        &self.stdout
    }

    /// Asserts exit code 1 with exactly one line on stderr, and returns that line.
    pub fn failed(&self) -> &str {
        assert_eq!(self.code, 1, "expected exit code 1: {self:?}");
        assert_eq!(self.stderr.lines().count(), 1, "one stderr line: {self:?}");
        assert!(self.stderr.starts_with("ferry: "), "{self:?}");
        self.stderr.trim_end()
    }
}

/// A `ferry` command line to run against `addr`.
pub struct Run {
    cmd: tokio::process::Command,
    stdin: Option<Vec<u8>>,
    stdout_redirected: bool,
}

/// `ferry <args> --server <server>`; the global flags go last, as users type them.
pub fn ferry(server: &TestServer, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(ferry_path());
    cmd.args(args).arg("--server").arg(server.addr_string());
    cmd.env_remove("FERRY_SERVER").env_remove("FERRY_NAME");
    Run {
        cmd,
        stdin: None,
        stdout_redirected: false,
    }
}

/// `ferry <args>` with nothing added.
pub fn ferry_raw(args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(ferry_path());
    cmd.args(args);
    cmd.env_remove("FERRY_SERVER").env_remove("FERRY_NAME");
    Run {
        cmd,
        stdin: None,
        stdout_redirected: false,
    }
}

impl Run {
    /// Feeds `bytes` to standard input (otherwise it is empty).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Sends standard output to this file instead of capturing it.
    pub fn stdout_to(mut self, file: std::fs::File) -> Self {
        self.cmd.stdout(file);
        self.stdout_redirected = true;
        self
    }

    /// Runs to completion (at most 60 s).
    pub async fn run(mut self) -> Out {
        self.cmd
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if !self.stdout_redirected {
            self.cmd.stdout(Stdio::piped());
        }
        let mut child = self.cmd.spawn().expect("spawn ferry");
        let mut stdin = child.stdin.take().expect("stdin");
        let input = self.stdin.take().unwrap_or_default();
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            // Dropping stdin closes it: the end of input.
        });
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("ferry finished within 60 s")
            .expect("wait for ferry");
        let _ = writer.await;
        Out {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// The broker's view of queue `name`, through a client of the test's own.
pub async fn queue_info(server: &TestServer, name: &str) -> Option<QueueInfo> {
    let c = server.client(&format!("probe-{}", rand_suffix())).await;
    let q = c
        .list_queues()
        .await
        .expect("list")
        .into_iter()
        .find(|q| q.name == name);
    let _ = c.disconnect().await;
    q
}

/// Waits until queue `name` has `ready` ready and `in_flight` in-flight messages: a disconnect
/// returns deliveries asynchronously. Up to 15 s, for loaded CI machines.
pub async fn wait_for_depth(server: &TestServer, name: &str, ready: u64, in_flight: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let q = queue_info(server, name).await.expect("queue exists");
        if q.ready == ready && q.in_flight == in_flight {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "queue {name}: expected ready {ready}, in flight {in_flight}, got {q:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A short unique suffix for client names.
pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Parses each stdout line as JSON.
pub fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}
