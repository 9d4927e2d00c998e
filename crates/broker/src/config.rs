//! Broker configuration: defaults in code, then a TOML file, then `FERRY_*` environment
//! variables, then command-line flags. Each layer is a [`ConfigLayer`] of optional values;
//! [`BrokerConfig::resolve`] applies them in that order and validates the result.
//!
//! Each setting is declared once, in [`settings`] (which says how to add one); the file schema,
//! the environment, the flags, `--check-config` and the docs' settings table follow from it.
//! This file holds the resolved [`BrokerConfig`], its defaults and its validation.

#[macro_use]
pub mod declare;
pub mod http;
pub mod settings;
pub mod text_list;

pub use http::HttpBounds;
pub use settings::{ConfigLayer, SETTINGS};

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_protocol::Limits;
use ferry_store::postgres::is_postgres_url;
use ferry_store::FsyncPolicy;
use thiserror::Error;

/// Default native protocol address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6730";
/// Default HTTP address (management API, metrics, health checks, console).
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:6731";
/// The `http_listen` value that turns the HTTP listener off.
pub const HTTP_OFF: &str = "off";
/// Default STOMP listen address (the port STOMP brokers use).
pub const DEFAULT_STOMP_LISTEN: &str = "127.0.0.1:61613";
/// The `stomp_listen` value that turns the STOMP listener off.
pub const STOMP_OFF: &str = "off";
/// Default data directory, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "ferry-data";
/// Default `client_expiry_secs`: a day.
pub const DEFAULT_CLIENT_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// A configuration problem, naming the setting and where it came from.
#[derive(Debug, Error)]
#[non_exhaustive]
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
    #[error("invalid config file {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error (names the key and line).
        source: toml::de::Error,
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

/// Smallest `segment_bytes`: 64 KiB.
pub const MIN_SEGMENT_BYTES: u64 = 64 * 1024;

/// Largest `segment_bytes`: 16 GiB (a segment is read whole at recovery).
pub const MAX_SEGMENT_BYTES: u64 = 16 * 1024 * 1024 * 1024;

/// Smallest `max_outbound_bytes` and `max_pending_bytes`: 64 KiB.
pub const MIN_CONNECTION_BUDGET: u64 = 64 * 1024;

/// Default `udp_receive_buffer`: 32 MiB (about 14 000 full-size datagrams: half a second of
/// a fast sender while the ingest's reader is not scheduled).
pub const DEFAULT_UDP_RECEIVE_BUFFER: u64 = 32 << 20;

/// Smallest `max_memory`: 16 MiB.
pub const MIN_MAX_MEMORY: u64 = 16 * 1024 * 1024;

/// Shortest keep-alive interval granted, whatever a client asks for (ms).
pub const MIN_KEEPALIVE_MS: u32 = 100;

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

impl ConfigLayer {
    /// Reads a TOML config file.
    pub fn from_file(path: &Path) -> Result<ConfigLayer, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
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
    /// Most bytes of recently sent message bodies the embedded engine keeps in memory (older
    /// bodies are read back from the log).
    pub body_cache_bytes: u64,
    /// Most bytes of persistent messages' properties the embedded engine keeps in memory
    /// (the others are read back from the log when needed).
    pub properties_memory_bytes: u64,
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
    /// Allow `http_listen` on an address that is not loopback. Basic credentials cross the wire
    /// in clear, so exposing the API is an explicit choice.
    pub http_allow_remote: bool,
    /// The HTTP listener's bounds: connections and requests at once, per client address too,
    /// timeouts, body and page sizes.
    pub http: HttpBounds,
    /// Per-queue and per-subscription series in `/metrics`; off for brokers with very many
    /// queues (the global series stay).
    pub metrics_per_object: bool,
    /// STOMP address (`HOST:PORT`, port 0 picks a free port), or [`STOMP_OFF`]. The broker
    /// binds it and records it in the runtime file; the `ferry` binary serves it (see the
    /// `ferry-stomp` crate).
    pub stomp_listen: String,
    /// A STOMP SEND or SUBSCRIBE to a queue or topic that does not exist creates it (as STOMP
    /// clients expect), for sessions allowed to manage that name; the native protocol always
    /// needs explicit creation.
    pub stomp_auto_create: bool,
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
    /// Datagram ingest address (`HOST:PORT`, see docs/udp.md); `None`: no datagram ingest.
    /// The ingest itself is the `ferry-udp` gateway, which `ferry serve` starts.
    pub udp_listen: Option<String>,
    /// The topic records of datagrams that name none are published to; created at start when
    /// missing. `None`: every datagram must name its topic.
    pub udp_topic: Option<String>,
    /// Records from datagrams are published persistent (`true`) or kept in memory only
    /// (`false`, the default: a monitoring stream values rate over durability).
    pub udp_persistent: bool,
    /// The user the datagram ingest publishes as (its grants confine it); `None`: the
    /// broker's operator, with every permission.
    pub udp_user: Option<String>,
    /// The datagram ingest's socket receive buffer in bytes, which holds datagrams while its
    /// reader is not scheduled; forced past `net.core.rmem_max` when the broker may.
    pub udp_receive_buffer: u64,
    /// Accept unauthenticated sessions from any address while no user exists; without it they
    /// are accepted from loopback only, and a non-loopback `listen` without users refuses to
    /// start (see `docs/security.md`).
    pub allow_anonymous: bool,
    /// What unauthenticated sessions may do once users exist, as grant lines (empty: nothing,
    /// every session must authenticate).
    pub anonymous_grants: Vec<String>,
    /// How long a failed authentication waits before its answer, in ms.
    pub auth_failure_delay_ms: u32,
    /// Failed authentications one IP address may make per minute before its connects are
    /// refused with `LimitExceeded` (0: no limit).
    pub max_auth_failures_per_min: u32,
    /// PBKDF2 iterations of the credentials the broker creates (HTTP API; at least 4096).
    pub scram_iterations: u32,
    /// PEM certificate chain of the native and HTTP listeners; with [`Self::tls_key`] they
    /// speak TLS only (see [`BrokerConfig::tls_files`]).
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of [`Self::tls_cert`].
    pub tls_key: Option<std::path::PathBuf>,
    /// PEM CA certificates whose client certificates are required (mutual TLS).
    pub tls_client_ca: Option<std::path::PathBuf>,
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
            body_cache_bytes: ferry_store::embedded::DEFAULT_CACHE_BYTES,
            properties_memory_bytes: ferry_store::embedded::DEFAULT_PROPERTIES_BYTES,
            client_expiry: Some(DEFAULT_CLIENT_EXPIRY),
            node: None,
            node_timeout_ms: 10_000,
            workers: None,
            http_listen: DEFAULT_HTTP_LISTEN.to_owned(),
            http_allow_remote: false,
            http: HttpBounds::default(),
            stomp_listen: DEFAULT_STOMP_LISTEN.to_owned(),
            stomp_auto_create: true,
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
            udp_listen: None,
            udp_topic: None,
            udp_persistent: false,
            udp_user: None,
            udp_receive_buffer: DEFAULT_UDP_RECEIVE_BUFFER,
            allow_anonymous: false,
            anonymous_grants: Vec::new(),
            auth_failure_delay_ms: 1_000,
            max_auth_failures_per_min: 20,
            scram_iterations: ferry_auth::DEFAULT_ITERATIONS,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
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
        // A value out of range is named with the layer that set it last: the operator then
        // knows which flag, variable or line to change.
        cfg.validate().map_err(|e| match e {
            ConfigError::Invalid {
                key, value, reason, ..
            } => {
                let origin = if flags.sets(key) {
                    "command line"
                } else if env.sets(key) {
                    "environment"
                } else if file.is_some_and(|f| f.sets(key)) {
                    "config file"
                } else {
                    "default"
                };
                ConfigError::Invalid {
                    key,
                    value,
                    origin,
                    reason,
                }
            }
            other => other,
        })?;
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
        self.http.validate()?;
        if self.stomp_listen != STOMP_OFF
            && self
                .stomp_listen
                .rsplit_once(':')
                .is_none_or(|(_, port)| port.parse::<u16>().is_err())
        {
            return Err(invalid(
                "stomp_listen",
                self.stomp_listen.clone(),
                "expected HOST:PORT or off",
            ));
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
        if let Some(addr) = &self.udp_listen {
            if addr.parse::<std::net::SocketAddr>().is_err() && !addr.contains(':') {
                return Err(invalid("udp_listen", addr.clone(), "expected HOST:PORT"));
            }
        }
        if let Some(topic) = &self.udp_topic {
            if !ferry_protocol::limits::is_valid_name(topic, self.limits.max_name_len) {
                return Err(invalid(
                    "udp_topic",
                    topic.clone(),
                    "a topic name: 1 to 200 characters of A-Z a-z 0-9 . _ -",
                ));
            }
        }
        if self.scram_iterations < ferry_auth::MIN_ITERATIONS {
            return Err(invalid(
                "scram_iterations",
                self.scram_iterations.to_string(),
                &format!("must be at least {}", ferry_auth::MIN_ITERATIONS),
            ));
        }
        if let Err(e) = ferry_auth::Grants::parse(&self.anonymous_grants) {
            return Err(invalid(
                "anonymous_grants",
                self.anonymous_grants.join(", "),
                &e.to_string(),
            ));
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => {
                return Err(invalid(
                    "tls_cert",
                    "set".into(),
                    "tls_key must be set with it",
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "tls_key",
                    "set".into(),
                    "tls_cert must be set with it",
                ))
            }
            (None, None) if self.tls_client_ca.is_some() => {
                return Err(invalid(
                    "tls_client_ca",
                    "set".into(),
                    "client certificates need TLS: set tls_cert and tls_key",
                ))
            }
            _ => {}
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

    /// Whether the native listener is on a loopback address only.
    pub fn listen_is_loopback(&self) -> bool {
        let host = self
            .listen
            .rsplit_once(':')
            .map_or(self.listen.as_str(), |(h, _)| h);
        is_loopback_host(host)
    }

    /// The TLS files of the listeners, `None` when they speak plain TCP.
    pub fn tls_files(&self) -> Option<ferry_tls::ServerFiles> {
        Some(ferry_tls::ServerFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
            client_ca: self.tls_client_ca.clone(),
        })
    }

    /// The STOMP address to bind, `None` when the listener is off.
    pub fn stomp_addr(&self) -> Option<&str> {
        (self.stomp_listen != STOMP_OFF).then_some(self.stomp_listen.as_str())
    }

    /// The HTTP address to bind, `None` when the listener is off.
    pub fn http_addr(&self) -> Option<&str> {
        (self.http_listen != HTTP_OFF).then_some(self.http_listen.as_str())
    }

    /// The configuration as TOML, for `--check-config` and the logs.
    pub fn to_toml(&self) -> String {
        declare::to_toml(self)
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
