//! Ferry's broker as a library: the `ferry serve` binary and the tests run it the same way.
//!
//! Modules, in the order a request flows through them:
//! - [`server`]: the listener (connection limit, `ServerFull`) and the broker's life cycle;
//!   [`admission`] the limits per address;
//! - [`connection`]: frames in of one connection, pipelined request execution, budgets and
//!   the session's end ([`close_reason`] why it ended); [`handshake`] its start,
//!   [`liveness`] its keep-alive and read timeout, [`outbound`] frames out (the writer, which
//!   settles held auto-ack deliveries);
//! - [`session`]: one client's session, its unsettled deliveries and subscriptions;
//! - [`authenticate`]: SCRAM inside the connect handshake; [`access`] users' grants, the
//!   anonymous policy and the failed-authentication limiter;
//! - [`dispatch`]: the `match` from request to handler, after [`authorize`]'s permission check;
//! - [`handlers`]: one handler per operation;
//! - [`delivery`]: wakers for long-poll receivers and subscriptions;
//! - [`subscription`]: push subscriptions, [`credit`] their prefetch window, [`direct`] their
//!   direct delivery of non-persistent publishes;
//! - [`consumers`]: consumers of topic subscriptions (exclusive or shared);
//! - [`txn`]: a session's open transaction;
//! - [`local`]: in-process sessions for protocol gateways (the datagram ingest, STOMP), and
//!   [`push`] how a session's pushes are encoded (native frames, or a gateway's);
//! - [`jobs`]: lease expiry, store upkeep, heartbeats and other nodes' change reports;
//! - [`node`]: the node's name among the nodes sharing a database;
//! - [`config`]: defaults, TOML file, `FERRY_*` environment, flags;
//! - [`shutdown`]: SIGTERM/SIGINT; [`runtime_file`]: the bound addresses for tools and tests;
//! - [`shared`], [`stats`]: state and counters shared by all connections; [`memory`] the
//!   broker-wide memory budget;
//! - [`registry`]: the live sessions with their peers; [`manage`]: the management facade the
//!   HTTP API (its own crate) reads and acts through;
//! - [`clock`]: where the broker's time comes from (tests move it by hand).

pub mod access;
pub mod admission;
pub mod authenticate;
pub mod authorize;
pub mod clock;
pub mod close_reason;
pub mod config;
pub mod connection;
pub mod consumers;
pub mod credit;
pub mod delivery;
pub mod direct;
pub mod dispatch;
pub mod handlers;
pub mod handshake;
pub mod jobs;
pub mod liveness;
pub mod local;
pub mod log_limit;
pub mod manage;
pub mod memory;
pub mod node;
pub mod outbound;
pub mod push;
pub mod registry;
pub mod runtime_file;
pub mod server;
pub mod session;
pub mod shared;
pub mod shutdown;
pub mod stats;
pub mod subscription;
pub mod txn;
pub mod wire;

pub use clock::{Clock, SystemClock};
pub use config::{BrokerConfig, ConfigError, ConfigLayer, StoreSetting};
pub use server::{Broker, BrokerError, RunningBroker};
