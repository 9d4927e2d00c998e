//! Broker configuration: defaults in code, then a TOML file, then `FERRY_*` environment
//! variables, then command-line flags. Each layer is a [`ConfigLayer`] of optional values;
//! [`BrokerConfig::resolve`] applies them in that order and validates the result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_protocol::Limits;
use ferry_store::postgres::is_postgres_url;
use ferry_store::FsyncPolicy;
use serde::Deserialize;
use thiserror::Error;

/// Default native protocol address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6730";
/// Default HTTP address (management API, metrics, health checks, console).
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:6731";
/// The `http_listen` value that turns the HTTP listener off.
pub const HTTP_OFF: &str = "off";
/// Default data directory, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "ferry-data";
/// Default `client_expiry_secs`: a day.
pub const DEFAULT_CLIENT_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// A configuration problem, naming the setting and where it came from.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The config file is not valid TOML for this schema.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (names the key and line).
        message: String,
    },
    /// A value is out of range or malformed.
    #[error("invalid {key} = '{value}' (from {origin}): {reason}")]
    Invalid {
        /// The setting.
        key: &'static str,
        /// The value given.
        value: String,
        /// File, environment or flag.
        origin: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// One layer of settings; `None` leaves the value of the layer below.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigLayer {
    /// Native protocol listen address.
    pub listen: Option<String>,
    /// Data directory.
    pub data_dir: Option<PathBuf>,
    /// `always`, `interval:<ms>` or `never`.
    pub fsync: Option<String>,
    /// Most concurrent connections.
    pub max_connections: Option<u32>,
    /// Largest message body in bytes.
    pub max_body_bytes: Option<u32>,
    /// Largest frame in bytes.
    pub max_frame_bytes: Option<u32>,
    /// Most queues.
    pub max_queues: Option<u32>,
    /// Most unsettled client-ack deliveries per session.
    pub max_in_flight_per_session: Option<u32>,
    /// Largest subscription prefetch.
    pub max_prefetch: Option<u32>,
    /// Most messages per batch send.
    pub max_batch: Option<u32>,
    /// Client-ack lease in ms.
    pub lease_ms: Option<u32>,
    /// Most requests processed at once per connection (pipelining depth).
    pub max_pipelined: Option<u32>,
    /// Threads serving connections (the async runtime's workers).
    pub workers: Option<u32>,
    /// Seconds to let in-flight requests finish on shutdown.
    pub shutdown_grace_secs: Option<u64>,
    /// Storage engine: `embedded` or a `postgres://` URL.
    pub store: Option<String>,
    /// Most database connections (postgres engine).
    pub store_pool_size: Option<u32>,
    /// Most messages and acks per database transaction (postgres engine).
    pub store_batch_max: Option<u32>,
    /// Compacted log segment files kept for reuse (embedded engine).
    pub spare_segments: Option<u32>,
    /// Size at which a log segment is sealed (embedded engine).
    pub segment_bytes: Option<u64>,
    /// Seconds a client name that holds nothing stays registered after its last session.
    pub client_expiry_secs: Option<u64>,
    /// This node's name among the nodes sharing a database (postgres engine).
    pub node: Option<String>,
    /// Milliseconds without a heartbeat after which a node counts as dead (postgres engine).
    pub node_timeout_ms: Option<u32>,
    /// HTTP address (management API, metrics, health, console), or `off`.
    pub http_listen: Option<String>,
    /// Allow `http_listen` on an address other than loopback.
    pub http_allow_remote: Option<bool>,
    /// Per-queue and per-subscription series in `/metrics`.
    pub metrics_per_object: Option<bool>,
    /// Bytes a connection may have queued for its client before its requests are no longer read.
    pub max_outbound_bytes: Option<u64>,
    /// Bytes a connection's pending requests may hold before its requests are no longer read.
    pub max_pending_bytes: Option<u64>,
    /// Milliseconds a client may leave its replies unread before its connection is closed.
    pub write_timeout_ms: Option<u32>,
    /// Milliseconds a frame may take to arrive once its first bytes have.
    pub read_timeout_ms: Option<u32>,
    /// Milliseconds a new connection has to complete its connect.
    pub handshake_timeout_ms: Option<u32>,
    /// Longest keep-alive interval granted, and the one used when a client asks for none (ms).
    pub keepalive_ms: Option<u32>,
    /// Most connections from one IP address (0: no limit).
    pub max_connections_per_address: Option<u32>,
    /// New client names registered per second from one IP address (0: no limit).
    pub max_new_clients_per_sec: Option<u32>,
    /// The broker-wide memory budget in bytes.
    pub max_memory: Option<u64>,
}

/// Smallest `segment_bytes`: 64 KiB.
pub const MIN_SEGMENT_BYTES: u64 = 64 * 1024;

/// Largest `segment_bytes`: 16 GiB (a segment is read whole at recovery).
pub const MAX_SEGMENT_BYTES: u64 = 16 * 1024 * 1024 * 1024;

/// Smallest `max_outbound_bytes` and `max_pending_bytes`: 64 KiB.
pub const MIN_CONNECTION_BUDGET: u64 = 64 * 1024;

/// Smallest `max_memory`: 16 MiB.
pub const MIN_MAX_MEMORY: u64 = 16 * 1024 * 1024;

/// Shortest keep-alive interval granted, whatever a client asks for (ms).
pub const MIN_KEEPALIVE_MS: u32 = 100;

/// Every environment variable the broker reads, with the setting it fills.
pub const ENV_VARS: &[&str] = &[
    "FERRY_LISTEN",
    "FERRY_DATA_DIR",
    "FERRY_FSYNC",
    "FERRY_MAX_CONNECTIONS",
    "FERRY_MAX_BODY_BYTES",
    "FERRY_MAX_FRAME_BYTES",
    "FERRY_MAX_QUEUES",
    "FERRY_MAX_IN_FLIGHT_PER_SESSION",
    "FERRY_MAX_PREFETCH",
    "FERRY_MAX_BATCH",
    "FERRY_LEASE_MS",
    "FERRY_MAX_PIPELINED",
    "FERRY_WORKERS",
    "FERRY_SHUTDOWN_GRACE_SECS",
    "FERRY_STORE",
    "FERRY_STORE_POOL_SIZE",
    "FERRY_STORE_BATCH_MAX",
    "FERRY_SPARE_SEGMENTS",
    "FERRY_SEGMENT_BYTES",
    "FERRY_CLIENT_EXPIRY_SECS",
    "FERRY_NODE",
    "FERRY_NODE_TIMEOUT_MS",
    "FERRY_HTTP_LISTEN",
    "FERRY_HTTP_ALLOW_REMOTE",
    "FERRY_METRICS_PER_OBJECT",
    "FERRY_MAX_OUTBOUND_BYTES",
    "FERRY_MAX_PENDING_BYTES",
    "FERRY_WRITE_TIMEOUT_MS",
    "FERRY_READ_TIMEOUT_MS",
    "FERRY_HANDSHAKE_TIMEOUT_MS",
    "FERRY_KEEPALIVE_MS",
    "FERRY_MAX_CONNECTIONS_PER_ADDRESS",
    "FERRY_MAX_NEW_CLIENTS_PER_SEC",
    "FERRY_MAX_MEMORY",
];

/// Which storage engine the broker runs on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StoreSetting {
    /// The embedded log engine, in the data directory.
    #[default]
    Embedded,
    /// The PostgreSQL engine, at this URL.
    Postgres(String),
}

impl std::str::FromStr for StoreSetting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s == "embedded" {
            Ok(StoreSetting::Embedded)
        } else if is_postgres_url(s) {
            Ok(StoreSetting::Postgres(s.to_owned()))
        } else {
            Err("expected `embedded` or a postgres://user@host/db URL".into())
        }
    }
}

impl StoreSetting {
    /// The setting for logs and `--check-config`, with any password in the URL masked.
    pub fn redacted(&self) -> String {
        match self {
            StoreSetting::Embedded => "embedded".into(),
            StoreSetting::Postgres(url) => {
                let Some((scheme, rest)) = url.split_once("://") else {
                    return url.clone();
                };
                match rest.split_once('@') {
                    Some((userinfo, host)) if userinfo.contains(':') => {
                        let user = userinfo.split(':').next().unwrap_or("");
                        format!("{scheme}://{user}:****@{host}")
                    }
                    _ => url.clone(),
                }
            }
        }
    }
}

fn parse_env_bool(key: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(ConfigError::Invalid {
            key,
            value: v.to_owned(),
            origin: "environment",
            reason: "expected true or false".into(),
        }),
    }
}

fn parse_env_number<T: std::str::FromStr<Err = std::num::ParseIntError>>(
    key: &'static str,
    v: &str,
) -> Result<T, ConfigError> {
    v.trim()
        .parse()
        .map_err(|e: std::num::ParseIntError| ConfigError::Invalid {
            key,
            value: v.to_owned(),
            origin: "environment",
            reason: e.to_string(),
        })
}

impl ConfigLayer {
    /// Reads a TOML config file.
    pub fn from_file(path: &Path) -> Result<ConfigLayer, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }

    /// Reads the `FERRY_*` variables of [`ENV_VARS`] from `vars` (other variables are ignored:
    /// `FERRY_SERVER` and `FERRY_NAME` belong to the client commands).
    pub fn from_env(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<ConfigLayer, ConfigError> {
        let mut layer = ConfigLayer::default();
        for (k, v) in vars {
            match k.as_str() {
                "FERRY_LISTEN" => layer.listen = Some(v),
                "FERRY_DATA_DIR" => layer.data_dir = Some(PathBuf::from(v)),
                "FERRY_FSYNC" => layer.fsync = Some(v),
                "FERRY_MAX_CONNECTIONS" => {
                    layer.max_connections = Some(parse_env_number("max_connections", &v)?)
                }
                "FERRY_MAX_BODY_BYTES" => {
                    layer.max_body_bytes = Some(parse_env_number("max_body_bytes", &v)?)
                }
                "FERRY_MAX_FRAME_BYTES" => {
                    layer.max_frame_bytes = Some(parse_env_number("max_frame_bytes", &v)?)
                }
                "FERRY_MAX_QUEUES" => layer.max_queues = Some(parse_env_number("max_queues", &v)?),
                "FERRY_MAX_IN_FLIGHT_PER_SESSION" => {
                    layer.max_in_flight_per_session =
                        Some(parse_env_number("max_in_flight_per_session", &v)?)
                }
                "FERRY_MAX_PREFETCH" => {
                    layer.max_prefetch = Some(parse_env_number("max_prefetch", &v)?)
                }
                "FERRY_MAX_BATCH" => layer.max_batch = Some(parse_env_number("max_batch", &v)?),
                "FERRY_LEASE_MS" => layer.lease_ms = Some(parse_env_number("lease_ms", &v)?),
                "FERRY_MAX_PIPELINED" => {
                    layer.max_pipelined = Some(parse_env_number("max_pipelined", &v)?)
                }
                "FERRY_WORKERS" => layer.workers = Some(parse_env_number("workers", &v)?),
                "FERRY_STORE" => layer.store = Some(v),
                "FERRY_STORE_POOL_SIZE" => {
                    layer.store_pool_size = Some(parse_env_number("store_pool_size", &v)?)
                }
                "FERRY_STORE_BATCH_MAX" => {
                    layer.store_batch_max = Some(parse_env_number("store_batch_max", &v)?)
                }
                "FERRY_SPARE_SEGMENTS" => {
                    layer.spare_segments = Some(parse_env_number("spare_segments", &v)?)
                }
                "FERRY_SEGMENT_BYTES" => {
                    layer.segment_bytes = Some(parse_env_number("segment_bytes", &v)?)
                }
                "FERRY_CLIENT_EXPIRY_SECS" => {
                    layer.client_expiry_secs = Some(parse_env_number("client_expiry_secs", &v)?)
                }
                "FERRY_NODE" => layer.node = Some(v),
                "FERRY_NODE_TIMEOUT_MS" => {
                    layer.node_timeout_ms = Some(parse_env_number("node_timeout_ms", &v)?)
                }
                "FERRY_HTTP_LISTEN" => layer.http_listen = Some(v),
                "FERRY_HTTP_ALLOW_REMOTE" => {
                    layer.http_allow_remote = Some(parse_env_bool("http_allow_remote", &v)?)
                }
                "FERRY_METRICS_PER_OBJECT" => {
                    layer.metrics_per_object = Some(parse_env_bool("metrics_per_object", &v)?)
                }
                "FERRY_MAX_OUTBOUND_BYTES" => {
                    layer.max_outbound_bytes = Some(parse_env_number("max_outbound_bytes", &v)?)
                }
                "FERRY_MAX_PENDING_BYTES" => {
                    layer.max_pending_bytes = Some(parse_env_number("max_pending_bytes", &v)?)
                }
                "FERRY_WRITE_TIMEOUT_MS" => {
                    layer.write_timeout_ms = Some(parse_env_number("write_timeout_ms", &v)?)
                }
                "FERRY_READ_TIMEOUT_MS" => {
                    layer.read_timeout_ms = Some(parse_env_number("read_timeout_ms", &v)?)
                }
                "FERRY_HANDSHAKE_TIMEOUT_MS" => {
                    layer.handshake_timeout_ms = Some(parse_env_number("handshake_timeout_ms", &v)?)
                }
                "FERRY_KEEPALIVE_MS" => {
                    layer.keepalive_ms = Some(parse_env_number("keepalive_ms", &v)?)
                }
                "FERRY_MAX_CONNECTIONS_PER_ADDRESS" => {
                    layer.max_connections_per_address =
                        Some(parse_env_number("max_connections_per_address", &v)?)
                }
                "FERRY_MAX_NEW_CLIENTS_PER_SEC" => {
                    layer.max_new_clients_per_sec =
                        Some(parse_env_number("max_new_clients_per_sec", &v)?)
                }
                "FERRY_MAX_MEMORY" => layer.max_memory = Some(parse_env_number("max_memory", &v)?),
                "FERRY_SHUTDOWN_GRACE_SECS" => {
                    layer.shutdown_grace_secs = Some(u64::from(parse_env_number::<u32>(
                        "shutdown_grace_secs",
                        &v,
                    )?))
                }
                _ => {}
            }
        }
        Ok(layer)
    }

    fn apply(&self, cfg: &mut BrokerConfig, origin: &'static str) -> Result<(), ConfigError> {
        if let Some(v) = &self.listen {
            cfg.listen = v.clone();
        }
        if let Some(v) = &self.data_dir {
            cfg.data_dir = v.clone();
        }
        if let Some(v) = &self.fsync {
            cfg.fsync = v.parse::<FsyncPolicy>().map_err(|e| ConfigError::Invalid {
                key: "fsync",
                value: v.clone(),
                origin,
                reason: e.to_string(),
            })?;
        }
        if let Some(v) = &self.store {
            cfg.store = v.parse().map_err(|reason| ConfigError::Invalid {
                key: "store",
                value: StoreSetting::Postgres(v.clone()).redacted(),
                origin,
                reason,
            })?;
        }
        if let Some(v) = self.store_pool_size {
            cfg.store_pool_size = v;
        }
        if let Some(v) = self.store_batch_max {
            cfg.store_batch_max = v;
        }
        if let Some(v) = self.spare_segments {
            cfg.spare_segments = v;
        }
        if let Some(v) = self.segment_bytes {
            cfg.segment_bytes = v;
        }
        if let Some(v) = self.client_expiry_secs {
            cfg.client_expiry = (v > 0).then(|| Duration::from_secs(v));
        }
        if let Some(v) = &self.node {
            cfg.node = Some(v.clone());
        }
        if let Some(v) = self.node_timeout_ms {
            cfg.node_timeout_ms = v;
        }
        if let Some(v) = self.workers {
            cfg.workers = Some(v);
        }
        if let Some(v) = &self.http_listen {
            cfg.http_listen = v.trim().to_owned();
        }
        if let Some(v) = self.http_allow_remote {
            cfg.http_allow_remote = v;
        }
        if let Some(v) = self.metrics_per_object {
            cfg.metrics_per_object = v;
        }
        if let Some(v) = self.max_outbound_bytes {
            cfg.max_outbound_bytes = v;
        }
        if let Some(v) = self.max_pending_bytes {
            cfg.max_pending_bytes = v;
        }
        if let Some(v) = self.write_timeout_ms {
            cfg.write_timeout_ms = v;
        }
        if let Some(v) = self.read_timeout_ms {
            cfg.read_timeout_ms = v;
        }
        if let Some(v) = self.handshake_timeout_ms {
            cfg.handshake_timeout_ms = v;
        }
        if let Some(v) = self.keepalive_ms {
            cfg.keepalive_ms = v;
        }
        if let Some(v) = self.max_connections_per_address {
            cfg.max_connections_per_address = v;
        }
        if let Some(v) = self.max_new_clients_per_sec {
            cfg.max_new_clients_per_sec = v;
        }
        if let Some(v) = self.max_memory {
            cfg.max_memory = v;
        }
        let l = &mut cfg.limits;
        let set = |slot: &mut u32, v: Option<u32>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        set(&mut l.max_connections, self.max_connections);
        set(&mut l.max_body_bytes, self.max_body_bytes);
        set(&mut l.max_frame_bytes, self.max_frame_bytes);
        set(&mut l.max_queues, self.max_queues);
        set(
            &mut l.max_in_flight_per_session,
            self.max_in_flight_per_session,
        );
        set(&mut l.max_prefetch, self.max_prefetch);
        set(&mut l.max_batch, self.max_batch);
        set(&mut l.lease_ms, self.lease_ms);
        set(&mut cfg.max_pipelined, self.max_pipelined);
        if let Some(v) = self.shutdown_grace_secs {
            cfg.shutdown_grace = Duration::from_secs(v);
        }
        Ok(())
    }
}

/// The resolved broker configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// Native protocol listen address (`HOST:PORT`; port 0 picks a free port).
    pub listen: String,
    /// Data directory: the embedded store's files, the lock file and `runtime.toml`.
    pub data_dir: PathBuf,
    /// When the store fsyncs.
    pub fsync: FsyncPolicy,
    /// Limits enforced and advertised.
    pub limits: Limits,
    /// Most requests processed at once per connection; reading pauses beyond it.
    pub max_pipelined: u32,
    /// How long shutdown lets in-flight requests finish.
    pub shutdown_grace: Duration,
    /// The storage engine.
    pub store: StoreSetting,
    /// Most database connections (postgres engine).
    pub store_pool_size: u32,
    /// Most messages and acks per database transaction (postgres engine).
    pub store_batch_max: u32,
    /// How many compacted log segment files the embedded engine keeps to reuse as new
    /// segments (0: delete them). Each is a segment's size (64 MiB) of disk.
    pub spare_segments: u32,
    /// Size at which the embedded engine seals a log segment and starts the next; between
    /// [`MIN_SEGMENT_BYTES`] and [`MAX_SEGMENT_BYTES`].
    pub segment_bytes: u64,
    /// How long a client name that holds nothing (no message sent by it or addressed to it, no
    /// durable subscription of its own) stays registered after its last session ended; then
    /// the broker forgets it (its next session registers it again). `None` (`0` in the
    /// settings): permanent names are never forgotten (ephemeral ones still go with their
    /// session).
    pub client_expiry: Option<Duration>,
    /// This node's name among the nodes sharing a database; unique among the live ones.
    /// `None`: a name generated at start ([`crate::node::generated_name`]).
    pub node: Option<String>,
    /// A node silent for this long is taken for dead: its sessions end, its deliveries return.
    pub node_timeout_ms: u32,
    /// Threads of the async runtime that serves connections and runs the jobs. `None`: one
    /// per core. Fewer than the cores leaves cores to other programs on the machine, such as
    /// a load generator on a small machine (measured in docs/benchmarks.md). Whoever builds
    /// the runtime applies it (`ferry serve`, the bench's in-process broker);
    /// [`crate::Broker::start`] runs on the runtime it is called from.
    pub workers: Option<u32>,
    /// HTTP address of the management API, metrics, health checks and console (`HOST:PORT`,
    /// port 0 picks a free port), or [`HTTP_OFF`]. The broker binds it and records it in the
    /// runtime file; the `ferry` binary serves it (see the `ferry-http` crate).
    pub http_listen: String,
    /// Allow `http_listen` on an address that is not loopback. The API has no authentication
    /// yet, so exposing it is an explicit choice.
    pub http_allow_remote: bool,
    /// Per-queue and per-subscription series in `/metrics`; off for brokers with very many
    /// queues (the global series stay).
    pub metrics_per_object: bool,
    /// Bytes a connection may have queued for its client (replies, pushes) before the broker
    /// stops reading its requests and stops pushing to it, until the client reads.
    pub max_outbound_bytes: u64,
    /// Bytes a connection's pending requests (long polls, sends waiting for the disk) may hold,
    /// selectors included, before the broker stops reading its requests.
    pub max_pending_bytes: u64,
    /// A connection whose socket accepts none of its replies for this long is closed.
    pub write_timeout_ms: u32,
    /// A connection whose frame has started arriving but not ended within this is closed.
    pub read_timeout_ms: u32,
    /// A new connection that has not connected within this is closed.
    pub handshake_timeout_ms: u32,
    /// The longest keep-alive interval granted to a client, and the one it gets when it asks
    /// for none (at least [`MIN_KEEPALIVE_MS`]). A session silent for 1.5 intervals is closed.
    pub keepalive_ms: u32,
    /// Most connections from one IP address at a time (0: no limit); the next one gets
    /// `ServerFull`.
    pub max_connections_per_address: u32,
    /// New client names one IP address may register per second, in bursts of up to ten
    /// seconds' worth (0: no limit); a connect over it gets `LimitExceeded`.
    pub max_new_clients_per_sec: u32,
    /// The broker-wide memory budget in bytes (see [`crate::memory`]); by default half the
    /// machine's memory (or its control group's limit).
    pub max_memory: u64,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: DEFAULT_LISTEN.to_owned(),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            fsync: FsyncPolicy::Always,
            limits: Limits::DEFAULT,
            max_pipelined: 4096,
            shutdown_grace: Duration::from_secs(10),
            store: StoreSetting::Embedded,
            store_pool_size: 16,
            store_batch_max: 1024,
            spare_segments: ferry_store::embedded::DEFAULT_SPARE_SEGMENTS as u32,
            segment_bytes: ferry_store::embedded::DEFAULT_SEGMENT_BYTES,
            client_expiry: Some(DEFAULT_CLIENT_EXPIRY),
            node: None,
            node_timeout_ms: 10_000,
            workers: None,
            http_listen: DEFAULT_HTTP_LISTEN.to_owned(),
            http_allow_remote: false,
            metrics_per_object: true,
            max_outbound_bytes: 8 << 20,
            max_pending_bytes: 16 << 20,
            write_timeout_ms: 30_000,
            read_timeout_ms: 30_000,
            handshake_timeout_ms: 10_000,
            keepalive_ms: 60_000,
            max_connections_per_address: 0,
            max_new_clients_per_sec: 100,
            max_memory: crate::memory::default_max_memory(),
        }
    }
}

impl BrokerConfig {
    /// Applies the layers in order (file, environment, flags) over the defaults and validates.
    pub fn resolve(
        file: Option<&ConfigLayer>,
        env: &ConfigLayer,
        flags: &ConfigLayer,
    ) -> Result<BrokerConfig, ConfigError> {
        let mut cfg = BrokerConfig::default();
        if let Some(f) = file {
            f.apply(&mut cfg, "config file")?;
        }
        env.apply(&mut cfg, "environment")?;
        flags.apply(&mut cfg, "command line")?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks ranges and relations between settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, value: String, reason: &str| ConfigError::Invalid {
            key,
            value,
            origin: "resolved configuration",
            reason: reason.to_owned(),
        };
        if self.listen.parse::<std::net::SocketAddr>().is_err() && !self.listen.contains(':') {
            return Err(invalid("listen", self.listen.clone(), "expected HOST:PORT"));
        }
        let l = &self.limits;
        if l.max_connections == 0 {
            return Err(invalid("max_connections", "0".into(), "must be at least 1"));
        }
        if l.max_body_bytes == 0 {
            return Err(invalid("max_body_bytes", "0".into(), "must be at least 1"));
        }
        // A frame must be able to carry one maximal message with its header and names.
        let min_frame = u64::from(l.max_body_bytes) + 64 * 1024;
        if u64::from(l.max_frame_bytes) < min_frame {
            return Err(invalid(
                "max_frame_bytes",
                l.max_frame_bytes.to_string(),
                &format!("must be at least max_body_bytes + 65536 = {min_frame}"),
            ));
        }
        if l.lease_ms == 0 {
            return Err(invalid("lease_ms", "0".into(), "must be at least 1"));
        }
        for (key, v) in [
            ("max_queues", l.max_queues),
            ("max_in_flight_per_session", l.max_in_flight_per_session),
            ("max_prefetch", l.max_prefetch),
            ("max_batch", l.max_batch),
            ("max_pipelined", self.max_pipelined),
            ("store_pool_size", self.store_pool_size),
            ("store_batch_max", self.store_batch_max),
            ("node_timeout_ms", self.node_timeout_ms),
            ("workers", self.workers.unwrap_or(1)),
            ("write_timeout_ms", self.write_timeout_ms),
            ("read_timeout_ms", self.read_timeout_ms),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
        ] {
            if v == 0 {
                return Err(invalid(key, "0".into(), "must be at least 1"));
            }
        }
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return Err(invalid(
                "segment_bytes",
                self.segment_bytes.to_string(),
                &format!("must be between {MIN_SEGMENT_BYTES} and {MAX_SEGMENT_BYTES}"),
            ));
        }
        if self.http_listen != HTTP_OFF {
            let Some((host, port)) = self.http_listen.rsplit_once(':') else {
                return Err(invalid(
                    "http_listen",
                    self.http_listen.clone(),
                    "expected HOST:PORT or off",
                ));
            };
            if port.parse::<u16>().is_err() {
                return Err(invalid(
                    "http_listen",
                    self.http_listen.clone(),
                    "expected HOST:PORT or off",
                ));
            }
            if !self.http_allow_remote && !is_loopback_host(host) {
                return Err(invalid(
                    "http_listen",
                    self.http_listen.clone(),
                    "not a loopback address, and the HTTP API has no authentication yet; \
                     set http_allow_remote (--http-allow-remote) to expose it anyway",
                ));
            }
        }
        for (key, v) in [
            ("max_outbound_bytes", self.max_outbound_bytes),
            ("max_pending_bytes", self.max_pending_bytes),
        ] {
            if v < MIN_CONNECTION_BUDGET {
                return Err(invalid(
                    key,
                    v.to_string(),
                    &format!("must be at least {MIN_CONNECTION_BUDGET}"),
                ));
            }
        }
        if self.keepalive_ms < MIN_KEEPALIVE_MS {
            return Err(invalid(
                "keepalive_ms",
                self.keepalive_ms.to_string(),
                &format!("must be at least {MIN_KEEPALIVE_MS}"),
            ));
        }
        if self.max_memory < MIN_MAX_MEMORY {
            return Err(invalid(
                "max_memory",
                self.max_memory.to_string(),
                &format!("must be at least {MIN_MAX_MEMORY}"),
            ));
        }
        if let Some(node) = &self.node {
            if !crate::node::is_valid_name(node) {
                return Err(invalid(
                    "node",
                    node.clone(),
                    "use 1 to 200 characters of A-Z a-z 0-9 . _ -",
                ));
            }
        }
        Ok(())
    }

    /// The HTTP address to bind, `None` when the listener is off.
    pub fn http_addr(&self) -> Option<&str> {
        (self.http_listen != HTTP_OFF).then_some(self.http_listen.as_str())
    }

    /// The configuration as TOML, for `--check-config` and the logs.
    pub fn to_toml(&self) -> String {
        let l = &self.limits;
        format!(
            "listen = \"{}\"\ndata_dir = \"{}\"\nfsync = \"{}\"\nmax_connections = {}\nmax_body_bytes = {}\n\
             max_frame_bytes = {}\nmax_queues = {}\nmax_in_flight_per_session = {}\nmax_prefetch = {}\n\
             max_batch = {}\nlease_ms = {}\nmax_pipelined = {}\nshutdown_grace_secs = {}\n\
             store = \"{}\"\nstore_pool_size = {}\nstore_batch_max = {}\nspare_segments = {}\n\
             segment_bytes = {}\nclient_expiry_secs = {}\n{}node_timeout_ms = {}\n{}max_outbound_bytes = {}\n\
             max_pending_bytes = {}\nwrite_timeout_ms = {}\nread_timeout_ms = {}\n\
             handshake_timeout_ms = {}\nkeepalive_ms = {}\nmax_connections_per_address = {}\n\
             max_new_clients_per_sec = {}\nmax_memory = {}\n",
            self.listen,
            self.data_dir.display(),
            self.fsync,
            l.max_connections,
            l.max_body_bytes,
            l.max_frame_bytes,
            l.max_queues,
            l.max_in_flight_per_session,
            l.max_prefetch,
            l.max_batch,
            l.lease_ms,
            self.max_pipelined,
            self.shutdown_grace.as_secs(),
            self.store.redacted(),
            self.store_pool_size,
            self.store_batch_max,
            self.spare_segments,
            self.segment_bytes,
            self.client_expiry.map_or(0, |d| d.as_secs()),
            match &self.node {
                Some(n) => format!("node = \"{n}\"\n"),
                None => "# node: generated at start\n".to_owned(),
            },
            self.node_timeout_ms,
            match self.workers {
                Some(n) => format!("workers = {n}\n"),
                None => "# workers: one per core\n".to_owned(),
            },
            self.max_outbound_bytes,
            self.max_pending_bytes,
            self.write_timeout_ms,
            self.read_timeout_ms,
            self.handshake_timeout_ms,
            self.keepalive_ms,
            self.max_connections_per_address,
            self.max_new_clients_per_sec,
            self.max_memory,
        ) + &format!(
            "http_listen = \"{}\"\nhttp_allow_remote = {}\nmetrics_per_object = {}\n",
            self.http_listen, self.http_allow_remote, self.metrics_per_object
        )
    }
}

/// Whether `host` (an IP address, possibly in brackets, or a name) is loopback.
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host == "localhost",
    }
}

#[cfg(test)]
mod tests;
