//! The PostgreSQL engine: every node's state lives in one database, shared by all the nodes.
//!
//! Modules:
//! - [`config`]: [`PostgresConfig`] and [`is_postgres_url`];
//! - `migrate`: the versioned schema (`migrations/*.sql`), applied on open under an advisory
//!   lock;
//! - `store`: [`PostgresStore`] and the pool; its `Store` accessors hand out the part that
//!   plays each role, where that role's work lives: the engine itself for queues (`queues`),
//!   `Inner` (`inner`) for topics (`topics`), transactions (`commit`), sessions
//!   (`nodes`), upkeep (`upkeep`), admin (`admin`) and users (`users`);
//! - `inner`: what the operations share (pool, node name, caches, flows, change reports);
//!   `flows`: counting them and writing them to `queue_counters`;
//! - `batcher`, `batch`: sends and acks gathered into one transaction per batch;
//! - `receive`, `gather`: receives; concurrent client-ack takes on one source are served by one
//!   scan (`gather`);
//! - `select`: receives with a selector, evaluated in Rust over the ready rows in order;
//! - `queues`: the queues role; `settle`: nacks and the returns of released sessions and
//!   ended leases; `clients`: caches of client and queue ids;
//! - `upkeep`: ended leases, due delays, expired messages, idle client names;
//! - `topics`, `publish`: topics and subscriptions (each backed by a queue named `topic:name`)
//!   and who consumes each on every node, and where a published message goes;
//! - `commit`: transactions of sends, publishes and acks, all or nothing;
//! - `nodes`: the sessions role: client names, session claims, heartbeats, reaping dead nodes;
//! - `notify`, `listen`: `NOTIFY` in the transactions that make messages ready, and the
//!   per-node `LISTEN` connection that turns them into change reports;
//! - `props`, `names`, `errors`, `tx`: encoding, checks, error mapping, transaction helpers.
//!
//! Every retrieval is one index scan of `message_queue`, which repeats each message's priority,
//! sender and receiver. Takes lock rows with `FOR UPDATE SKIP LOCKED`; a lease is columns of
//! the row (node, session, deadline, delivery id from a sequence).

pub mod config;

mod admin;
mod batch;
mod batcher;
mod clients;
mod commit;
mod dead_letter;
mod errors;
mod flows;
mod gather;
mod inner;
mod listen;
mod migrate;
mod names;
mod nodes;
mod notify;
mod props;
mod publish;
mod queues;
mod receive;
mod select;
mod settle;
mod store;
mod tally;
mod topics;
mod tx;
mod upkeep;
mod users;

pub use config::{is_postgres_url, PostgresConfig};
pub use store::PostgresStore;
