//! [`Inner`]: what the PostgreSQL engine's operations share with its batcher and background
//! tasks (the pool, this node's name, the caches of ids and selectors, the node's flows).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use deadpool_postgres::{Object, Pool};
use tokio::sync::broadcast;

use super::clients::{ClientIds, QueueNames};
use super::publish::Selectors;
use super::tally::Flows;
use super::tx::{TxError, TxResult};

/// What the store's operations share with the batcher task.
#[derive(Debug)]
pub struct Inner {
    pub(super) pool: Pool,
    /// This node's name, stored with its leases.
    pub(super) node: String,
    pub(super) clients: ClientIds,
    pub(super) queue_names: QueueNames,
    /// Set by the first heartbeat (a later one that finds no row was taken for dead).
    pub(super) beating: AtomicBool,
    /// Since when this node has reached the database without a break (see `nodes`).
    pub(super) contact: std::sync::Mutex<Option<Contact>>,
    /// Parsed subscription selectors, by their text.
    pub(super) selectors: Selectors,
    /// Messages in and out of each queue, dead letters, expiries and drops (see `tally`).
    pub(super) flows: Flows,
    /// What the listener hears from other nodes, for [`crate::Sessions::subscribe_changes`].
    pub(super) changes: broadcast::Sender<Vec<String>>,
}

impl Inner {
    /// A pooled connection, or `Unavailable`.
    pub(super) async fn conn(&self) -> TxResult<Object> {
        self.pool
            .get()
            .await
            .map_err(|e| TxError::Store(super::errors::pool(e)))
    }
}

/// An unbroken stretch of heartbeats that reached the database.
#[derive(Debug, Clone, Copy)]
pub(super) struct Contact {
    /// The first beat of the stretch.
    pub(super) since: Instant,
    /// The latest beat.
    pub(super) last: Instant,
}
