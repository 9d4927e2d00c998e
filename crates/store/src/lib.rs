//! Ferry's storage: the [`Store`] trait, spoken in queue operations, and its engines.
//!
//! Modules:
//! - [`api`]: the trait and its roles, their argument and result types;
//! - [`admin`]: the operator's role of a store (figures, browse, purge, move, settings);
//! - [`error`]: [`StoreError`] and its mapping to the wire's error codes;
//! - [`dead_letter`]: the history a dead-lettered message carries as properties;
//! - [`clock`]: the store's own wall clock (when sessions ended);
//! - [`select`]: what a selector reads of a message, for every engine;
//! - [`patterns`]: [`PatternIndex`], the word trie that finds the wildcard patterns a topic matches;
//! - [`direct`]: direct delivery of non-persistent publishes to an idle push consumer;
//! - [`embedded`]: the default engine, a segmented append-only log with in-memory indexes;
//! - [`postgres`]: the engine that keeps everything in a PostgreSQL database shared by nodes;
//! - [`users`]: the users' role of a store (credentials and grants, kept as text);
//! - [`conformance`]: the suite every engine must pass, written against the trait only (with
//!   the `testing` feature, as the fault-injecting `FaultyBackend` is).
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod admin;
pub mod api;
pub mod clock;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod dead_letter;
pub mod direct;
pub mod embedded;
pub mod error;
pub mod id_hash;
pub mod id_slab;
pub mod patterns;
pub mod postgres;
pub mod select;
pub mod users;

pub use admin::{
    Admin, BrowseCursor, BrowsePage, BrowseSpec, BrowsedMessage, ClientRecord, EngineStats,
    Histogram, MessageCounters, MoveReport, MoveTarget, QueueDetails,
};
pub use api::*;
pub use direct::{DirectBatch, DirectConsumer};
pub use embedded::{EmbeddedConfig, EmbeddedStore, FsyncPolicy};
pub use error::StoreError;
pub use id_hash::{IdHasher, IdMap};
pub use patterns::PatternIndex;
pub use postgres::{PostgresConfig, PostgresStore};
pub use users::{UserRecord, Users};
