//! A broker the pub/sub workloads start as a child process (`<ferry> serve`), so that its CPU
//! time can be read apart from the load generator's: default settings (embedded store) but the
//! fsync policy `--broker-fsync` names (default `always`, the broker's own), a free loopback port, a fresh data directory under the system's temporary
//! directory; killed and its data removed at the end.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use tokio::process::{Child, Command};

use crate::scratch::ScratchDir;

/// How long the broker may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A running child broker.
pub struct ChildBroker {
    child: Child,
    addr: String,
    dir: PathBuf,
    pid: u32,
    fsync: String,
}

impl ChildBroker {
    /// Starts `binary serve --fsync FSYNC` and waits until it accepts connections.
    pub async fn start(binary: &Path, fsync: &str) -> Result<ChildBroker> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        // From here on the directory is removed on every way out: by `ScratchDir` until the
        // broker owns it, then by the broker's `Drop`.
        let data = ScratchDir::new("ferry-bench-broker")?;
        let dir = data.path().to_path_buf();
        let child = Command::new(binary)
            .arg("serve")
            .arg("--listen")
            .arg(&addr)
            .arg("--data-dir")
            .arg(&dir)
            .arg("--fsync")
            .arg(fsync)
            .env("FERRY_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| anyhow!("cannot start {} serve: {e}", binary.display()))?;
        let Some(pid) = child.id() else {
            bail!("the broker exited at once");
        };
        let mut broker = ChildBroker {
            child,
            addr,
            dir: data.release(),
            pid,
            fsync: fsync.to_string(),
        };
        broker.wait_until_listening().await?;
        Ok(broker)
    }

    async fn wait_until_listening(&mut self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + START_LIMIT;
        loop {
            if tokio::net::TcpStream::connect(&self.addr).await.is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the broker exited before listening ({status})");
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the broker did not listen on {} within {START_LIMIT:?}",
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Its address, `HOST:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What it is, for the terminal.
    pub fn describe(&self) -> String {
        format!(
            "child process {} (default settings, fsync {}), listening on {}, data in {}",
            self.pid,
            self.fsync,
            self.addr,
            self.dir.display()
        )
    }

    /// Stops it and removes its data. Killing is enough: the data is thrown away.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        // Dropping `self` removes the data directory.
    }
}

impl Drop for ChildBroker {
    /// A broker dropped without `stop` (a failed start, an error on the way) is killed by
    /// `kill_on_drop`; its data goes too.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nobody listens on right now: one in 6700-6799 when one is free there (out
/// of the way of the default 6730 only by chance, so 6730 is skipped), else any.
fn free_port() -> Result<u16> {
    for _ in 0..20 {
        let port = 6700 + rand::random::<u16>() % 100;
        if port == 6730 {
            continue;
        }
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return Ok(listener.local_addr()?.port());
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
