//! The listener and the broker's life cycle: start, accept, shut down gracefully.

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::{split_frame, ErrorCode, Response};
use ferry_store::{
    EmbeddedConfig, EmbeddedStore, PostgresConfig, PostgresStore, Store, StoreError,
};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::clock::{Clock, SystemClock};
use crate::config::{BrokerConfig, StoreSetting};
use crate::shared::Shared;
use crate::stats::{CloseKind, Stats};
use crate::wire::Wire;
use crate::{connection, jobs, runtime_file};

/// Why the broker could not start or stop cleanly.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The data directory could not be created or locked.
    #[error("data directory {path}: {what}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What could not be done (`cannot lock it`, `in use by another ferry process`).
        what: &'static str,
        /// The system's error, when there is one.
        source: Option<std::io::Error>,
    },
    /// The store could not be opened or flushed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration would expose an unauthenticated broker (see `docs/security.md`).
    #[error("{0}")]
    Insecure(String),
    /// The TLS certificate, key or client CA could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] ferry_tls::TlsError),
    /// The runtime file could not be written.
    #[error("cannot write {path}")]
    RuntimeFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Starts brokers.
pub struct Broker;

/// A running broker. Dropping it does not stop it; call [`RunningBroker::shutdown`].
pub struct RunningBroker {
    addr: SocketAddr,
    shared: Arc<Shared>,
    connections: TaskTracker,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    data_dir: PathBuf,
    grace: Duration,
    _lock: Option<File>,
    /// The bound HTTP listener until its server takes it.
    http: std::sync::Mutex<Option<TcpListener>>,
    http_addr: Option<SocketAddr>,
    /// The bound STOMP listener until its gateway takes it.
    stomp: std::sync::Mutex<Option<TcpListener>>,
    stomp_addr: Option<SocketAddr>,
    management: crate::manage::Management,
    tls: Option<ferry_tls::Acceptor>,
}

fn lock_data_dir(dir: &std::path::Path) -> Result<File, BrokerError> {
    let err = |what: &'static str, source: Option<std::io::Error>| BrokerError::DataDir {
        path: dir.to_owned(),
        what,
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| err("cannot create it", Some(e)))?;
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("LOCK"))
        .map_err(|e| err("cannot open its LOCK file", Some(e)))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(err("in use by another ferry process", None)),
        Err(std::fs::TryLockError::Error(e)) => Err(err("cannot lock it", Some(e))),
    }
}

impl Broker {
    /// Opens the configured store (the embedded one in `config.data_dir`, or PostgreSQL) and
    /// starts serving. Either way the data directory is locked and holds `runtime.toml`.
    pub async fn start(config: BrokerConfig) -> Result<RunningBroker, BrokerError> {
        Broker::start_with_clock(config, Arc::new(SystemClock)).await
    }

    /// As [`Broker::start`], with `clock` as the broker's time (tests move a manual clock).
    pub async fn start_with_clock(
        config: BrokerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<RunningBroker, BrokerError> {
        let mut config = config;
        let lock = lock_data_dir(&config.data_dir)?;
        let store: Arc<dyn Store> = match &config.store {
            StoreSetting::Embedded => {
                let mut store_cfg = EmbeddedConfig::new(config.data_dir.join("store"));
                store_cfg.fsync = config.fsync;
                store_cfg.spare_segments = config.spare_segments as usize;
                store_cfg.segment_bytes = config.segment_bytes;
                store_cfg.cache_bytes = config.body_cache_bytes;
                store_cfg.properties_bytes = config.properties_memory_bytes;
                EmbeddedStore::open(store_cfg).await?
            }
            StoreSetting::Postgres(url) => {
                let mut store_cfg = PostgresConfig::new(url.clone());
                store_cfg.pool_size = config.store_pool_size as usize;
                store_cfg.batch_max = config.store_batch_max as usize;
                store_cfg.node = config
                    .node
                    .clone()
                    .unwrap_or_else(crate::node::generated_name);
                // Named once, so the management API shows the name the store uses.
                config.node = Some(store_cfg.node.clone());
                PostgresStore::open(store_cfg).await?
            }
        };
        let mut running = Broker::start_with_store_and_clock(config, store, clock).await?;
        running._lock = Some(lock);
        Ok(running)
    }

    /// Starts serving over an already opened store (tests inject faulty stores this way).
    /// The data directory holds only `runtime.toml` then.
    pub async fn start_with_store(
        config: BrokerConfig,
        store: Arc<dyn Store>,
    ) -> Result<RunningBroker, BrokerError> {
        Broker::start_with_store_and_clock(config, store, Arc::new(SystemClock)).await
    }

    /// Starts serving over an already opened store with `clock` as the broker's time (tests
    /// move a manual clock to test delays and time to live without sleeping).
    pub async fn start_with_store_and_clock(
        config: BrokerConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<RunningBroker, BrokerError> {
        check_exposure(&config, &*store).await?;
        let tls = config
            .tls_files()
            .map(ferry_tls::Acceptor::load)
            .transpose()?;
        std::fs::create_dir_all(&config.data_dir).map_err(|e| BrokerError::DataDir {
            path: config.data_dir.clone(),
            what: "cannot create it",
            source: Some(e),
        })?;
        let listener =
            TcpListener::bind(&config.listen)
                .await
                .map_err(|source| BrokerError::Bind {
                    addr: config.listen.clone(),
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| BrokerError::Bind {
            addr: config.listen.clone(),
            source,
        })?;
        // Bound here, served by whoever embeds the broker (the `ferry` binary serves the
        // management API on it): so the runtime file names both addresses at once.
        let http = match config.http_addr() {
            Some(http) => {
                let l = TcpListener::bind(http)
                    .await
                    .map_err(|source| BrokerError::Bind {
                        addr: http.to_owned(),
                        source,
                    })?;
                let a = l.local_addr().map_err(|source| BrokerError::Bind {
                    addr: http.to_owned(),
                    source,
                })?;
                Some((l, a))
            }
            None => None,
        };
        let http_addr = http.as_ref().map(|(_, a)| *a);
        // Likewise the STOMP listener, which the `ferry-stomp` gateway serves.
        let stomp = match config.stomp_addr() {
            Some(stomp) => {
                let l = TcpListener::bind(stomp)
                    .await
                    .map_err(|source| BrokerError::Bind {
                        addr: stomp.to_owned(),
                        source,
                    })?;
                let a = l.local_addr().map_err(|source| BrokerError::Bind {
                    addr: stomp.to_owned(),
                    source,
                })?;
                Some((l, a))
            }
            None => None,
        };
        let stomp_addr = stomp.as_ref().map(|(_, a)| *a);
        if let Err(source) =
            runtime_file::write_with_listeners(&config.data_dir, addr, http_addr, stomp_addr)
        {
            let path = runtime_file::path(&config.data_dir);
            if !ferry_store::embedded::backend::is_no_space(&source) {
                return Err(BrokerError::RuntimeFile { path, source });
            }
            // Serving matters more than the file, which only tells tools the address.
            warn!(file = %path.display(), error = %source,
                "the disk is full: serving without a runtime file");
        }
        let shared = Arc::new(Shared::new(store, &config, clock));
        shared.access.reload(&*shared.store).await?;
        let connections = TaskTracker::new();
        let tasks = vec![
            tokio::spawn(accept_loop(
                listener,
                shared.clone(),
                connections.clone(),
                tls.clone(),
            )),
            tokio::spawn(jobs::leases::run(shared.clone())),
            tokio::spawn(jobs::maintenance::run(shared.clone(), config.client_expiry)),
            tokio::spawn(jobs::delayed::run(shared.clone())),
            tokio::spawn(jobs::cluster::heartbeat(
                shared.clone(),
                config.node_timeout_ms,
            )),
            tokio::spawn(jobs::cluster::forward_changes(shared.clone())),
            tokio::spawn(crate::jobs::memory::run(shared.clone())),
            tokio::spawn(crate::jobs::grants::run(shared.clone())),
        ];
        info!(
            version = env!("CARGO_PKG_VERSION"),
            %addr,
            tls = tls.is_some(),
            mtls = config.tls_client_ca.is_some(),
            http = %http_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
            stomp = %stomp_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
            data_dir = %config.data_dir.display(),
            store = %config.store.redacted(),
            fsync = %config.fsync,
            max_connections = config.limits.max_connections,
            max_body_bytes = config.limits.max_body_bytes,
            lease_ms = config.limits.lease_ms,
            max_memory = config.max_memory,
            workers = tokio::runtime::Handle::current().metrics().num_workers(),
            "ferry broker listening"
        );
        let management = crate::manage::Management::new(shared.clone(), &config, tls.clone());
        Ok(RunningBroker {
            addr,
            shared,
            connections,
            tasks,
            data_dir: config.data_dir,
            grace: config.shutdown_grace,
            _lock: None,
            http: std::sync::Mutex::new(http.map(|(l, _)| l)),
            http_addr,
            stomp: std::sync::Mutex::new(stomp.map(|(l, _)| l)),
            stomp_addr,
            management,
            tls,
        })
    }
}

impl RunningBroker {
    /// The bound native protocol address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The state its sessions share (for in-process sessions, [`crate::local`]).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The limits the broker enforces.
    pub fn limits(&self) -> ferry_protocol::Limits {
        self.shared.limits
    }

    /// The broker's counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// Live sessions.
    pub fn online_sessions(&self) -> usize {
        self.shared.online_count()
    }

    /// The bound HTTP address, when the HTTP listener is on.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Takes the bound HTTP listener (once) to serve it; `None` when it is off or taken.
    pub fn take_http_listener(&self) -> Option<TcpListener> {
        self.http.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The TLS acceptor of the listeners, when they speak TLS: the HTTP server wraps its
    /// connections with it, and [`RunningBroker::reload_tls`] reloads it.
    pub fn tls(&self) -> Option<&ferry_tls::Acceptor> {
        self.tls.as_ref()
    }

    /// Reads the TLS certificate, key and client CA files again (on SIGHUP): handshakes
    /// after it use them, connections already open keep theirs. On error the previous ones
    /// stay in force. `Ok(false)` when TLS is off.
    pub fn reload_tls(&self) -> Result<bool, ferry_tls::TlsError> {
        match &self.tls {
            Some(t) => {
                t.reload()?;
                info!(cert = %t.files().cert.display(), "TLS certificates reloaded");
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The bound STOMP address, when the STOMP listener is on.
    pub fn stomp_addr(&self) -> Option<SocketAddr> {
        self.stomp_addr
    }

    /// Takes the bound STOMP listener (once) to serve it; `None` when it is off or taken.
    pub fn take_stomp_listener(&self) -> Option<TcpListener> {
        self.stomp.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The management facade: what the HTTP API reads and does.
    pub fn management(&self) -> crate::manage::Management {
        self.management.clone()
    }

    /// Stops accepting, lets in-flight requests finish (up to the grace period), closes every
    /// connection (returning unsettled deliveries), flushes the store and removes the runtime
    /// file.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        info!("shutting down: no new connections, draining in-flight requests");
        self.shared.shutdown.cancel();
        self.connections.close();
        // Gateways' sessions (STOMP) end as native connections do: their clients hear why,
        // unsettled deliveries go back, and only then does the store close.
        self.shared.gateway_sessions.close();
        let gateways = self.shared.gateway_sessions.clone();
        let drained = async {
            self.connections.wait().await;
            gateways.wait().await;
        };
        if tokio::time::timeout(self.grace, drained).await.is_err() {
            warn!(grace = ?self.grace, "connections still open after the grace period; closing anyway");
        }
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
        // The heartbeat job is stopped: nothing re-adds this node once it has left.
        if let Err(e) = self.shared.store.sessions().leave().await {
            warn!(error = %e, "could not leave the cluster; the other nodes free this node after its heartbeat timeout");
        }
        self.shared.store.upkeep().flush().await?;
        let _ = std::fs::remove_file(runtime_file::path(&self.data_dir));
        info!("ferry broker stopped");
        Ok(())
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    connections: TaskTracker,
    tls: Option<ferry_tls::Acceptor>,
) {
    let slots = Arc::new(Semaphore::new(shared.limits.max_connections as usize));
    let mut backoff = Duration::from_millis(1);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shared.shutdown.cancelled() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::from_millis(1);
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    Stats::add(&shared.stats.connections_refused_full, 1);
                    shared.stats.count_close(CloseKind::ServerFull);
                    let why = format!(
                        "the broker is at its limit of {} connections",
                        shared.limits.max_connections
                    );
                    refuse(&connections, stream, &shared, why, tls.is_some());
                    continue;
                };
                let Some(address) = shared.admission.connect(peer.ip()) else {
                    Stats::add(&shared.stats.connections_refused_address, 1);
                    shared.stats.count_close(CloseKind::ServerFull);
                    let why = format!(
                        "{} has {} connections open, the limit per address",
                        peer.ip(),
                        shared.admission.max_per_address()
                    );
                    drop(permit);
                    refuse(&connections, stream, &shared, why, tls.is_some());
                    continue;
                };
                Stats::add(&shared.stats.connections_accepted, 1);
                let shared = shared.clone();
                match &tls {
                    None => {
                        connections.spawn(connection::serve(
                            shared,
                            Wire::plain(stream),
                            permit,
                            Some(address),
                        ));
                    }
                    Some(tls) => {
                        let tls = tls.clone();
                        connections.spawn(async move {
                            // Holds its slots while the handshake runs: a flood of
                            // handshakes is bounded like one of connections.
                            if let Some(wire) = tls_handshake(&shared, &tls, stream, peer).await {
                                connection::serve(shared, wire, permit, Some(address)).await;
                            }
                        });
                    }
                }
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!(error = %e, ?backoff, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Turns away a connection over a limit: a plain one is answered `ServerFull` saying `why`;
/// a TLS one is closed at once (an answer would cost a handshake when the broker is busiest).
fn refuse(connections: &TaskTracker, stream: TcpStream, shared: &Shared, why: String, tls: bool) {
    if tls {
        drop(stream);
    } else {
        connections.spawn(refuse_full(stream, shared.limits.max_frame_bytes, why));
    }
}

/// Runs the TLS handshake of an accepted connection within the handshake timeout; `None`
/// (the socket closed) when it fails. A client that speaks anything but TLS is closed on its
/// first bytes: rustls reads one record header, finds no TLS record, and gives up without
/// buffering what follows.
async fn tls_handshake(
    shared: &Shared,
    tls: &ferry_tls::Acceptor,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<Wire> {
    let (stream, socket) = match crate::wire::duplicate(stream) {
        Ok(s) => s,
        Err(e) => {
            warn!(%peer, error = %e, "cannot duplicate the socket for TLS");
            return None;
        }
    };
    match tls.accept(stream, shared.policy.handshake_timeout).await {
        Ok(accepted) => Some(Wire::tls(accepted, socket)),
        Err(e) => {
            Stats::add(&shared.stats.tls_handshakes_failed, 1);
            debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
    }
}

/// Answers the first request of a connection over a limit with `ServerFull` saying `why`, then
/// closes.
async fn refuse_full(mut stream: TcpStream, max_frame: u32, why: String) {
    let mut buf = BytesMut::with_capacity(1024);
    let request_id = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            match split_frame(&mut buf, max_frame) {
                Ok(Some(f)) => return f.request_id,
                Ok(None) => {}
                Err(_) => return 0,
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return 0,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap_or(0);
    let mut out = BytesMut::new();
    Response::error(ErrorCode::ServerFull, why).encode(request_id, &mut out);
    let _ = stream.write_all(&out).await;
    let _ = stream.shutdown().await;
}

/// Refuses to serve a non-loopback native listener to anyone without credentials: no users,
/// and anonymous access not explicitly allowed.
async fn check_exposure(config: &BrokerConfig, store: &dyn Store) -> Result<(), BrokerError> {
    if config.listen_is_loopback() || config.allow_anonymous || store.users().has_users().await? {
        return Ok(());
    }
    Err(BrokerError::Insecure(format!(
        "refusing to listen on {} with no users: anyone who reaches it could read and delete \
         every message. Create a user first (`ferry user add NAME --data-dir DIR` or \
         `--store URL`), or pass --allow-anonymous to accept unauthenticated clients anyway",
        config.listen
    )))
}
