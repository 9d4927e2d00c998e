//! Test helpers for Ferry: a broker in-process on a free loopback port ([`TestServer`]), the real
//! `ferry` binary as a child process ([`BinaryServer`]), and where that binary is
//! ([`ferry_bin`]). Every server gets its own temporary data directory. [`PgCluster`] is a
//! throwaway PostgreSQL server for the postgres engine's tests.

pub mod clock;
pub mod faults;
pub mod pg;
pub mod raw;

pub use clock::ManualClock;
pub use faults::FaultInjectingStore;
pub use pg::PgCluster;
pub use raw::RawConn;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::{runtime_file, Broker, BrokerConfig, Clock, RunningBroker};
use ferry_client::Client;
use ferry_store::Store;
use tempfile::TempDir;

/// A broker running inside the test process on `127.0.0.1:0`.
pub struct TestServer {
    broker: Option<RunningBroker>,
    config: BrokerConfig,
    dir: Option<TempDir>,
    addr: SocketAddr,
}

/// A fresh configuration for tests: loopback port 0, data in `dir`.
pub fn test_config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.to_owned(),
        shutdown_grace: Duration::from_secs(5),
        // Tests that want the HTTP API turn it on (port 0) and serve it themselves.
        http_listen: ferry_broker::config::HTTP_OFF.into(),
        // Likewise the STOMP listener (tests that want it serve it with `ferry-stomp`).
        stomp_listen: ferry_broker::config::STOMP_OFF.into(),
        ..BrokerConfig::default()
    }
}

impl TestServer {
    /// Starts a broker with default settings on the embedded store.
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    /// Starts a broker after `adjust` has changed the test configuration.
    pub async fn start_with(adjust: impl FnOnce(&mut BrokerConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path());
        adjust(&mut config);
        let broker = Broker::start(config.clone()).await.expect("broker starts");
        TestServer {
            addr: broker.local_addr(),
            broker: Some(broker),
            config,
            dir: Some(dir),
        }
    }

    /// Starts a broker whose time is `clock` (e.g. a [`ManualClock`]) after `adjust` has
    /// changed the test configuration.
    pub async fn start_with_clock(
        clock: Arc<dyn Clock>,
        adjust: impl FnOnce(&mut BrokerConfig),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path());
        adjust(&mut config);
        let broker = Broker::start_with_clock(config.clone(), clock)
            .await
            .expect("broker starts");
        TestServer {
            addr: broker.local_addr(),
            broker: Some(broker),
            config,
            dir: Some(dir),
        }
    }

    /// Starts a broker over a store the test built (e.g. with a faulty backend).
    pub async fn start_with_store(
        store: Arc<dyn Store>,
        adjust: impl FnOnce(&mut BrokerConfig),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path());
        adjust(&mut config);
        let broker = Broker::start_with_store(config.clone(), store)
            .await
            .expect("broker starts");
        TestServer {
            addr: broker.local_addr(),
            broker: Some(broker),
            config,
            dir: Some(dir),
        }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound address as `HOST:PORT`.
    pub fn addr_string(&self) -> String {
        self.addr.to_string()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// The running broker.
    pub fn broker(&self) -> &RunningBroker {
        self.broker.as_ref().expect("running")
    }

    /// A connected client named `name`.
    pub async fn client(&self, name: &str) -> Client {
        Client::connect(&self.addr_string(), name)
            .await
            .expect("client connects")
    }

    /// Stops the broker gracefully.
    pub async fn shutdown(mut self) {
        if let Some(b) = self.broker.take() {
            b.shutdown().await.expect("clean shutdown");
        }
    }

    /// Stops the broker gracefully and starts a new one on the same data directory (and a new
    /// port).
    pub async fn restart(mut self) -> TestServer {
        if let Some(b) = self.broker.take() {
            b.shutdown().await.expect("clean shutdown");
        }
        let broker = Broker::start(self.config.clone())
            .await
            .expect("broker restarts");
        TestServer {
            addr: broker.local_addr(),
            broker: Some(broker),
            config: self.config.clone(),
            dir: self.dir.take(),
        }
    }
}

/// The `ferry` binary: `$FERRY_BIN`, else `ferry` next to the test executable's directory
/// (`target/<profile>/ferry`). Build it first (`cargo build -p ferry`).
pub fn ferry_bin() -> PathBuf {
    if let Ok(p) = std::env::var("FERRY_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join(format!("ferry{}", std::env::consts::EXE_SUFFIX))
}

/// The real `ferry serve` in a child process, with its own data directory.
pub struct BinaryServer {
    child: Option<Child>,
    dir: PathBuf,
    _temp: Option<TempDir>,
    args: Vec<String>,
    addr: SocketAddr,
}

impl BinaryServer {
    /// Starts `ferry serve --data-dir <temp> --listen 127.0.0.1:0 <extra>`.
    pub fn start(extra: &[&str]) -> std::io::Result<BinaryServer> {
        let temp = tempfile::tempdir()?;
        let dir = temp.path().to_owned();
        let mut s = BinaryServer::start_in(&dir, extra)?;
        s._temp = Some(temp);
        Ok(s)
    }

    /// Starts `ferry serve` on an existing data directory.
    pub fn start_in(dir: &Path, extra: &[&str]) -> std::io::Result<BinaryServer> {
        let args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, addr) = spawn(dir, &args)?;
        Ok(BinaryServer {
            child: Some(child),
            dir: dir.to_owned(),
            _temp: None,
            args,
            addr,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// The bound HTTP address (management API, metrics, console), if it is on.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        runtime_file::read(&self.dir).and_then(|rt| rt.http)
    }

    /// The bound STOMP address, if the STOMP listener is on.
    pub fn stomp_addr(&self) -> Option<SocketAddr> {
        runtime_file::read(&self.dir).and_then(|rt| rt.stomp)
    }

    /// The child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// `kill -9`: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits for the process to exit.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        c.wait().ok()
    }

    /// Starts the binary again on the same data directory, after a kill or terminate.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill9();
        let (child, addr) = spawn(&self.dir, &self.args)?;
        self.child = Some(child);
        self.addr = addr;
        Ok(())
    }
}

impl Drop for BinaryServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn spawn(dir: &Path, extra: &[String]) -> std::io::Result<(Child, SocketAddr)> {
    let mut child = Command::new(ferry_bin())
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .arg("--listen")
        .arg("127.0.0.1:0")
        // A free port for the HTTP API unless the test chose (the default port would clash
        // between tests running at once).
        .args(
            (!extra.iter().any(|a| a.starts_with("--http-listen")))
                .then_some(["--http-listen", "127.0.0.1:0"])
                .into_iter()
                .flatten(),
        )
        .args(
            (!extra.iter().any(|a| a.starts_with("--stomp-listen")))
                .then_some(["--stomp-listen", "127.0.0.1:0"])
                .into_iter()
                .flatten(),
        )
        .args(extra)
        // `FERRY_TEST_BROKER_LOG` raises the brokers' log level when a test needs a closer look.
        .env(
            "FERRY_LOG",
            std::env::var("FERRY_TEST_BROKER_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(rt) = runtime_file::read(dir) {
            if rt.pid == child.id() {
                return Ok((child, rt.listen));
            }
        }
        if let Some(status) = child.try_wait()? {
            return Err(std::io::Error::other(format!(
                "ferry serve exited early: {status}"
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(std::io::Error::other(
                "ferry serve did not write runtime.toml in 30 s",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
