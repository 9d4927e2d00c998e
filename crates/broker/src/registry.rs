//! The live sessions of this node, as operators see them: client, protocol, peer address, when
//! it connected, and a way to close it (the management API's force-disconnect).
//!
//! A native connection registers its session once the connect is accepted and the returned
//! [`Registered`] guard removes it when the connection ends; a gateway's session
//! ([`crate::local::LocalSession`]) registers with [`Registry::insert`] and removes itself with
//! [`Registry::remove`] when it ends. So the registry never names a session that is gone. A std
//! mutex: held only to insert, remove or copy entries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ferry_store::SessionId;
use tokio_util::sync::CancellationToken;

use crate::session::Session;

/// One live session.
#[derive(Clone)]
pub struct SessionEntry {
    /// The session's id.
    pub id: SessionId,
    /// The client name.
    pub client: String,
    /// The protocol its client speaks (`ferry` for the native protocol, `stomp`).
    pub protocol: &'static str,
    /// The peer's address (`IP:PORT`).
    pub peer: String,
    /// When the connect was accepted, ms since the Unix epoch.
    pub connected_at_ms: u64,
    /// Cancelled to close the session.
    close: CancellationToken,
    session: Weak<Session>,
}

impl SessionEntry {
    /// The session, while it lives.
    pub fn session(&self) -> Option<Arc<Session>> {
        self.session.upgrade()
    }
}

/// The live sessions of this node, by id.
#[derive(Default)]
pub struct Registry {
    map: Mutex<HashMap<SessionId, SessionEntry>>,
}

/// Removes its session from the registry when dropped (the connection ended).
pub struct Registered<'a> {
    registry: &'a Registry,
    id: SessionId,
    close: CancellationToken,
}

impl Registered<'_> {
    /// Cancelled when an operator closes the session.
    pub fn closed_by_operator(&self) -> &CancellationToken {
        &self.close
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.registry.map().remove(&self.id);
    }
}

impl Registry {
    fn map(&self) -> MutexGuard<'_, HashMap<SessionId, SessionEntry>> {
        // Every update is one insert or remove: a poisoned map is still consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a native session that just connected from `peer`.
    pub fn register(&self, session: &Arc<Session>, peer: &str, now_ms: u64) -> Registered<'_> {
        let close = self.insert(session, "ferry", peer, now_ms);
        Registered {
            registry: self,
            id: session.id,
            close,
        }
    }

    /// Registers a session of `protocol` from `peer`; the token is cancelled when an
    /// operator closes it. The caller removes it with [`Registry::remove`] when it ends.
    pub fn insert(
        &self,
        session: &Arc<Session>,
        protocol: &'static str,
        peer: &str,
        now_ms: u64,
    ) -> CancellationToken {
        let close = CancellationToken::new();
        self.map().insert(
            session.id,
            SessionEntry {
                id: session.id,
                client: session.client.clone(),
                protocol,
                peer: peer.to_owned(),
                connected_at_ms: now_ms,
                close: close.clone(),
                session: Arc::downgrade(session),
            },
        );
        close
    }

    /// Removes session `id` (it ended).
    pub fn remove(&self, id: SessionId) {
        self.map().remove(&id);
    }

    /// Every live session, sorted by client name.
    pub fn list(&self) -> Vec<SessionEntry> {
        let mut v: Vec<SessionEntry> = self.map().values().cloned().collect();
        v.sort_by(|a, b| a.client.cmp(&b.client));
        v
    }

    /// The live session of `client`, if it is on this node.
    pub fn find(&self, client: &str) -> Option<SessionEntry> {
        self.map().values().find(|e| e.client == client).cloned()
    }

    /// Closes the session of `client` on this node; whether there was one. The connection
    /// ends as on a disconnect: unsettled deliveries return to their queues.
    pub fn close(&self, client: &str) -> bool {
        match self.find(client) {
            Some(e) => {
                e.close.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancelled when an operator closes session `id` (a session not registered yet or any
    /// more gets one that never is): long polls end with it, so the connection can close.
    pub fn closed_token(&self, id: SessionId) -> CancellationToken {
        self.map()
            .get(&id)
            .map(|e| e.close.clone())
            .unwrap_or_default()
    }

    /// Number of live sessions.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }
}
