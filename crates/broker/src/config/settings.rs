//! Every broker setting, declared once. From this list come the TOML file's schema
//! ([`ConfigLayer`], unknown keys refused), the `FERRY_*` environment variables
//! ([`ConfigLayer::from_env`]), the `ferry serve` flags (`ConfigLayer` is also the flags' clap
//! `Args`), `--check-config` ([`BrokerConfig::to_toml`]) and the settings table of
//! docs/operations.md (a test compares it with [`super::declare::settings_table`]).
//!
//! # Adding a setting
//!
//! 1. Declare it here, where it belongs in the docs' table:
//!
//!    ```text
//!    /// What it does, in Markdown: this is the docs' "meaning" column and the flag's help.
//!    max_widgets: u32, "N" => field(max_widgets);
//!    ```
//!
//!    `name: Type, "VALUE_NAME"`: the name is the file key; the variable is `FERRY_MAX_WIDGETS`
//!    and the flag `--max-widgets VALUE_NAME`. `Type` is what the file, the variable and the flag
//!    hold (`u32`, `u64`, `bool`, `String`, `PathBuf`; another type implements
//!    [`super::declare::SettingValue`]). `=> field(a.b)` stores the value in
//!    `BrokerConfig::a.b` as it is; a value that needs converting or checking while it is read
//!    uses `=> custom { get: |c| ..., set: |c, v, origin| ... }` (see `fsync`), the getter
//!    giving back `Option<Type>` (`None`: unset, chosen at start). `#[default = "..."]` gives
//!    the docs' default when it depends on the machine or needs a gloss (a number it starts
//!    with must be the real default: a test checks). A `bool` takes
//!    `#[arg(num_args = 0..=1, default_missing_value = "true")]` so `--flag` alone means true.
//! 2. Add its field to [`BrokerConfig`] with its default in `BrokerConfig::default`, and any
//!    check between settings to `BrokerConfig::validate` (config.rs).
//!
//! Then regenerate the docs' table: `cargo test -p ferry-broker docs_settings_table` fails
//! and prints the table to paste into docs/operations.md.

use ferry_store::FsyncPolicy;

use super::text_list::TextList;
use super::{BrokerConfig, ConfigError, StoreSetting};

settings! {
    /// native protocol address; port 0 picks a free port
    listen: String, "ADDR" => field(listen);

    /// store files, lock, runtime.toml
    data_dir: std::path::PathBuf, "DIR" => field(data_dir);

    /// `always`, `interval:<ms>` or `never` (see [durability settings](#durability-settings))
    fsync: String, "POLICY" => custom {
        get: |c| Some(c.fsync.to_string()),
        set: |c, v, origin| c.fsync = v.parse::<FsyncPolicy>().map_err(|e| ConfigError::Invalid {
            key: "fsync",
            value: v.clone(),
            origin,
            reason: e.to_string(),
        })?,
    };

    /// connections beyond get `ServerFull`
    max_connections: u32, "N" => field(limits.max_connections);

    /// largest message body
    max_body_bytes: u32, "BYTES" => field(limits.max_body_bytes);

    /// largest frame; at least body + 64 KiB
    max_frame_bytes: u32, "BYTES" => field(limits.max_frame_bytes);

    /// most queues
    max_queues: u32, "N" => field(limits.max_queues);

    /// unsettled client-ack deliveries per session
    max_in_flight_per_session: u32, "N" => field(limits.max_in_flight_per_session);

    /// largest subscription prefetch
    max_prefetch: u32, "N" => field(limits.max_prefetch);

    /// messages per batch send
    max_batch: u32, "N" => field(limits.max_batch);

    /// client-ack lease
    lease_ms: u32, "MS" => field(limits.lease_ms);

    /// requests executed at once per connection; reading pauses beyond
    max_pipelined: u32, "N" => field(max_pipelined);

    /// threads serving connections and running the broker's jobs (the start-up log line says
    /// how many); fewer leaves cores to other programs on the machine, see
    /// [benchmarks.md](benchmarks/log.md#worker-threads-on-a-machine-shared-with-the-load-generator)
    #[default = "one per core"]
    workers: u32, "N" => custom {
        get: |c| c.workers,
        set: |c, v, origin| c.workers = Some(v),
    };

    /// time to drain on shutdown
    shutdown_grace_secs: u64, "SECS" => custom {
        get: |c| Some(c.shutdown_grace.as_secs()),
        set: |c, v, origin| c.shutdown_grace = std::time::Duration::from_secs(v),
    };

    /// storage engine: `embedded` or a `postgres://` URL (see [PostgreSQL engine](#postgresql-engine))
    store: String, "ENGINE" => custom {
        get: |c| Some(c.store.redacted()),
        set: |c, v, origin| c.store = v.parse().map_err(|reason| ConfigError::Invalid {
            key: "store",
            value: StoreSetting::Postgres(v.clone()).redacted(),
            origin,
            reason,
        })?,
    };

    /// most database connections (postgres engine)
    store_pool_size: u32, "N" => field(store_pool_size);

    /// most messages and acks per database transaction (postgres engine)
    store_batch_max: u32, "N" => field(store_batch_max);

    /// compacted log segment files kept to be reused as new segments, which makes commits
    /// cheaper; 0 deletes them (embedded engine, see [the data directory](#the-data-directory))
    spare_segments: u32, "N" => field(spare_segments);

    /// size at which a log segment is sealed and the next started, 65536 to 17179869184
    /// (embedded engine); the unit of compaction, of the spares' disk use and of the space
    /// reserve
    #[default = "67108864 (64 MiB)"]
    segment_bytes: u64, "BYTES" => field(segment_bytes);

    /// most bytes of recently sent message bodies kept in memory so that consumers that keep
    /// up never read the disk; older bodies are read back from the log (embedded engine; it
    /// counts against `max_memory`, see [limits](#limits-and-protection)); 0 reads every body
    /// from the log
    #[default = "67108864 (64 MiB)"]
    body_cache_bytes: u64, "BYTES" => field(body_cache_bytes);

    /// most bytes of persistent messages' properties kept in memory; the properties of the
    /// messages stored beyond it stay in the log, read back when a selector or a delivery
    /// needs them (embedded engine; see [selectors over a backlog](storage-format.md#selectors-over-a-backlog))
    #[default = "67108864 (64 MiB)"]
    properties_memory_bytes: u64, "BYTES" => field(properties_memory_bytes);

    /// a client name that holds nothing (no session, no message it sent or that is addressed
    /// to it, no durable subscription of its own) is forgotten this long after its last
    /// session; 0 keeps names forever (see [client names](#client-names))
    #[default = "86400 (a day)"]
    client_expiry_secs: u64, "SECS" => custom {
        get: |c| Some(c.client_expiry.map_or(0, |d| d.as_secs())),
        set: |c, v, origin| c.client_expiry = (v > 0).then(|| std::time::Duration::from_secs(v)),
    };

    /// this node's name among the nodes sharing a database; unique among live nodes (postgres
    /// engine)
    #[default = "generated: `<hostname>-<pid>-<random>`"]
    node: String, "NAME" => custom {
        get: |c| c.node.clone(),
        set: |c, v, origin| c.node = Some(v),
    };

    /// a node without a heartbeat for this long is taken for dead (postgres engine)
    node_timeout_ms: u32, "MS" => field(node_timeout_ms);

    /// HTTP address of the management API, `/metrics`, `/healthz`, `/readyz` and the web
    /// console; `off` disables it; port 0 picks a free port (named in `runtime.toml`)
    http_listen: String, "ADDR" => custom {
        get: |c| Some(c.http_listen.clone()),
        set: |c, v, origin| c.http_listen = v.trim().to_owned(),
    };

    /// serve HTTP on an address that is not loopback, and to host names that are not loopback
    /// ones; once users exist the API needs their basic credentials, which cross the wire in
    /// clear unless `tls_cert` is set
    #[arg(num_args = 0..=1, default_missing_value = "true")]
    http_allow_remote: bool, "BOOL" => field(http_allow_remote);

    /// HTTP connections served at once; one more is closed at once (1 to 100000)
    http_max_connections: u32, "N" => field(http.max_connections);

    /// time to send an HTTP request's headers; then the connection is closed (100 to 3600000)
    http_header_timeout_ms: u32, "MS" => field(http.header_timeout_ms);

    /// largest HTTP request body; a larger one gets 413 `TooLarge` (65536 to 1073741824)
    #[default = "4194304 (4 MiB)"]
    http_max_body_bytes: u32, "BYTES" => field(http.max_body_bytes);

    /// HTTP API requests served at once, across connections and clients, each until its
    /// answer is sent (the health checks are not counted); one more gets 429 `ServerFull`
    /// (1 to 100000; see [HTTP bounds](http-api.md#bounds))
    http_max_requests: u32, "N" => field(http.max_requests);

    /// of those, the most one client IP address may have at once; one more from it gets 429
    /// `ServerFull` while other addresses are still served. Clients behind one proxy, or all on
    /// loopback, share one address: set it to `http_max_requests` to let one address use every
    /// slot (1 to `http_max_requests`)
    #[default = "half of `http_max_requests`, at least 1 (16 by default)"]
    http_max_requests_per_address: u32, "N" => custom {
        get: |c| c.http.max_requests_per_address,
        set: |c, v, origin| c.http.max_requests_per_address = Some(v),
    };

    /// time to send an HTTP request's body, from its admission; then 408 `LimitExceeded` and
    /// the connection is closed, nothing done (100 to 3600000)
    http_body_timeout_ms: u32, "MS" => field(http.body_timeout_ms);

    /// an HTTP connection whose client takes none of its answer for this long is closed, and
    /// the answer freed (100 to 3600000)
    http_write_timeout_ms: u32, "MS" => field(http.write_timeout_ms);

    /// most bytes of JSON in a page of browsed messages over HTTP; a page stops short of it,
    /// with a `next` (65536 to 1073741824)
    #[default = "4194304 (4 MiB)"]
    http_max_page_bytes: u32, "BYTES" => field(http.max_page_bytes);

    /// per-queue and per-subscription series in `/metrics`; turn off for brokers with very
    /// many queues (the global series stay)
    #[arg(num_args = 0..=1, default_missing_value = "true")]
    metrics_per_object: bool, "BOOL" => field(metrics_per_object);

    /// STOMP address (STOMP 1.0 to 1.2 over TCP; over WebSocket it is at `/stomp` on the HTTP
    /// listener, see [STOMP](stomp.md)); `off` disables it; port 0 picks a free port (named
    /// in `runtime.toml`)
    stomp_listen: String, "ADDR" => custom {
        get: |c| Some(c.stomp_listen.clone()),
        set: |c, v, origin| c.stomp_listen = v.trim().to_owned(),
    };

    /// a STOMP SEND or SUBSCRIBE creates a queue or topic that does not exist, for sessions
    /// allowed to manage its name (the native protocol always creates explicitly)
    #[arg(num_args = 0..=1, default_missing_value = "true")]
    stomp_auto_create: bool, "BOOL" => field(stomp_auto_create);

    /// replies and pushes queued for one client and not yet written; past it the connection's
    /// requests are no longer read and its subscriptions stop taking (at least 65536)
    #[default = "8388608 (8 MiB)"]
    max_outbound_bytes: u64, "BYTES" => field(max_outbound_bytes);

    /// bytes one connection's requests in progress may hold (each is charged its frame plus
    /// four times its selector); past it its requests are no longer read (at least 65536)
    #[default = "16777216 (16 MiB)"]
    max_pending_bytes: u64, "BYTES" => field(max_pending_bytes);

    /// a connection whose socket takes none of its replies for this long is closed
    write_timeout_ms: u32, "MS" => field(write_timeout_ms);

    /// a connection is closed when a frame it started does not end within this, or when its
    /// requests wait this long behind its request budgets
    read_timeout_ms: u32, "MS" => field(read_timeout_ms);

    /// a new connection that has not connected within this is closed
    handshake_timeout_ms: u32, "MS" => field(handshake_timeout_ms);

    /// the longest keep-alive interval granted to a client, and the one it gets when it asks
    /// for none (at least 100); a session silent for 1.5 intervals is closed
    keepalive_ms: u32, "MS" => field(keepalive_ms);

    /// connections from one IP address at a time; the next gets `ServerFull`
    #[default = "0 (no limit)"]
    max_connections_per_address: u32, "N" => field(max_connections_per_address);

    /// client names not known yet that one IP address may register per second, in bursts of
    /// ten seconds' worth; a connect over it gets `LimitExceeded`; 0: no limit
    max_new_clients_per_sec: u32, "N" => field(max_new_clients_per_sec);

    /// the broker-wide memory budget in bytes (at least 16 MiB): above 80% sends are slowed,
    /// at 100% refused with `ResourceExhausted` (see [limits](#limits-and-protection))
    #[default = "half the memory available (the machine's, or its control group's limit when lower; 4 GiB when unknown)"]
    max_memory: u64, "BYTES" => field(max_memory);

    /// receive records in UDP datagrams on this address (`HOST:PORT`) and publish each to a
    /// topic (see [the datagram ingest](udp.md))
    #[default = "unset (no datagram ingest)"]
    udp_listen: String, "ADDR" => custom {
        get: |c| c.udp_listen.clone(),
        set: |c, v, origin| c.udp_listen = Some(v),
    };

    /// the topic for datagrams that name none; created at start when missing
    #[default = "unset (each datagram names its topic)"]
    udp_topic: String, "TOPIC" => custom {
        get: |c| c.udp_topic.clone(),
        set: |c, v, origin| c.udp_topic = Some(v),
    };

    /// publish the datagrams' records as persistent messages
    #[arg(num_args = 0..=1, default_missing_value = "true")]
    udp_persistent: bool, "BOOL" => field(udp_persistent);

    /// publish the datagrams' records as this user, with its grants: a datagram naming a topic
    /// it may not send to is dropped (see [security.md](security.md#not-protected-yet))
    #[default = "unset (the broker's own gateway, every permission)"]
    udp_user: String, "USER" => custom {
        get: |c| c.udp_user.clone(),
        set: |c, v, origin| c.udp_user = Some(v),
    };

    /// the datagram ingest's socket receive buffer in bytes: what arrives while its reader
    /// waits for a core (beyond it the kernel drops datagrams); past `net.core.rmem_max` it is
    /// forced when the broker has `CAP_NET_ADMIN`, and capped there otherwise (with a warning)
    udp_receive_buffer: u64, "BYTES" => field(udp_receive_buffer);

    /// while no user exists, accept unauthenticated sessions from any address, and start on a
    /// non-loopback `listen` without users (see [security.md](security.md))
    #[arg(num_args = 0..=1, default_missing_value = "true")]
    allow_anonymous: bool, "BOOL" => field(allow_anonymous);

    /// grants of unauthenticated sessions once users exist (none: every session
    /// authenticates); a TOML array in the file, comma-separated in the variable and the flag
    /// (e.g. `send queue public-*,receive queue public-*`)
    #[default = "none"]
    anonymous_grants: TextList, "GRANTS" => custom {
        get: |c| Some(TextList(c.anonymous_grants.clone())),
        set: |c, v, _origin| c.anonymous_grants = v.0,
    };

    /// wait before answering a failed authentication
    auth_failure_delay_ms: u32, "MS" => field(auth_failure_delay_ms);

    /// failed authentications per IP address and minute before its connects get
    /// `LimitExceeded`; 0: no limit
    max_auth_failures_per_min: u32, "N" => field(max_auth_failures_per_min);

    /// PBKDF2 iterations of the credentials the broker creates (at least 4096)
    scram_iterations: u32, "N" => field(scram_iterations);

    /// PEM certificate chain (leaf first): with `tls_key`, the native and HTTP listeners
    /// speak TLS only; reloaded on SIGHUP (see [security.md](security.md#tls))
    #[default = "unset (plain TCP)"]
    tls_cert: std::path::PathBuf, "FILE" => custom {
        get: |c| c.tls_cert.clone(),
        set: |c, v, origin| c.tls_cert = Some(v),
    };

    /// PEM private key of `tls_cert`
    #[default = "unset"]
    tls_key: std::path::PathBuf, "FILE" => custom {
        get: |c| c.tls_key.clone(),
        set: |c, v, origin| c.tls_key = Some(v),
    };

    /// PEM CA certificates: every client must present a certificate they signed (mutual
    /// TLS), which may authenticate it as the user its subject's CN names (`EXTERNAL`)
    #[default = "unset (no client certificates)"]
    tls_client_ca: std::path::PathBuf, "FILE" => custom {
        get: |c| c.tls_client_ca.clone(),
        set: |c, v, origin| c.tls_client_ca = Some(v),
    };
}
