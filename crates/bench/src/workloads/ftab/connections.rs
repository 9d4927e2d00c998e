//! Which connection each client of a run gets: one of its own, or, with `--ferry-connections N`
//! against the `ferry` target, one of N connections that the clients not found by name (Alice,
//! Bob, Carl, Rick) take in turn, as the threads of an application share a client library's
//! connection. Each shared connection has a session name of its own, so the messages of those
//! clients carry it as their sender.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::drivers::{Connection, Driver};
use crate::workloads::setup;

use super::archetype::Archetype;

/// Hands out the clients' connections and remembers each once, to close them at the end.
pub struct Connections {
    /// How many connections the clients that may share take turns on; `None`: no sharing.
    shared_limit: Option<usize>,
    /// The shared connections opened so far.
    shared: Vec<Arc<dyn Connection>>,
    /// The next shared connection to hand out once all are open.
    next: usize,
    /// Every connection opened, each once.
    all: Vec<Arc<dyn Connection>>,
}

impl Connections {
    /// Clients not found by name share `shared_limit` connections when given.
    pub fn new(shared_limit: Option<u32>) -> Self {
        Connections {
            shared_limit: shared_limit.map(|n| n as usize),
            shared: Vec::new(),
            next: 0,
            all: Vec::new(),
        }
    }

    /// The connection of client `name`, an `archetype`; shared connections are named
    /// `<base>-shared-<k>`.
    pub async fn connect(
        &mut self,
        driver: &dyn Driver,
        base: &str,
        archetype: Archetype,
        name: &str,
    ) -> Result<Arc<dyn Connection>> {
        let limit = match self.shared_limit {
            Some(limit) if !archetype.found_by_name() => limit,
            _ => return Ok(self.remember(setup::connect(driver, name).await?)),
        };
        if self.shared.len() < limit {
            let name = format!("{base}-shared-{}", self.shared.len());
            let conn = self.remember(setup::connect(driver, &name).await?);
            self.shared.push(conn.clone());
            return Ok(conn);
        }
        let turn = self.next;
        self.next += 1;
        crate::round_robin::pick(&self.shared, turn)
            .cloned()
            .context("no shared connection to take a turn on")
    }

    /// Every connection handed out, each once.
    pub fn into_all(self) -> Vec<Arc<dyn Connection>> {
        self.all
    }

    fn remember(&mut self, conn: Arc<dyn Connection>) -> Arc<dyn Connection> {
        self.all.push(conn.clone());
        conn
    }
}
