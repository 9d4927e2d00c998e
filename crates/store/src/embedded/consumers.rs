//! [`ConsumerClaims`]: which sessions consume each topic subscription, in memory (one process
//! owns an embedded store, so this is the whole truth; it starts empty on every open, when no
//! session exists yet).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::api::SessionId;
use crate::error::StoreError;

/// One session's consumers of one subscription.
#[derive(Debug, Clone, Copy)]
struct Attached {
    session: SessionId,
    shared: bool,
    count: u32,
}

/// Subscription queue (`topic:name`) to the sessions consuming it.
#[derive(Debug, Default)]
pub struct ConsumerClaims {
    /// Never held across an `.await`.
    by_queue: Mutex<HashMap<String, Vec<Attached>>>,
}

impl ConsumerClaims {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Vec<Attached>>> {
        // Every update leaves the map consistent, so a poisoned one can be used.
        self.by_queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a consumer of `queue` by `session`; `SubscriptionInUse` unless every consumer,
    /// this one included, is shared.
    pub fn attach(&self, queue: &str, session: SessionId, shared: bool) -> Result<(), StoreError> {
        let mut map = self.map();
        let list = map.entry(queue.to_owned()).or_default();
        if list.iter().any(|a| !(a.shared && shared)) {
            return Err(StoreError::SubscriptionInUse(queue.to_owned()));
        }
        match list.iter_mut().find(|a| a.session == session) {
            Some(a) => a.count = a.count.saturating_add(1),
            None => list.push(Attached {
                session,
                shared,
                count: 1,
            }),
        }
        Ok(())
    }

    /// Ends one consumer of `queue` by `session`, if it has one.
    pub fn detach(&self, queue: &str, session: SessionId) {
        let mut map = self.map();
        let Some(list) = map.get_mut(queue) else {
            return;
        };
        if let Some(a) = list.iter_mut().find(|a| a.session == session) {
            a.count = a.count.saturating_sub(1);
        }
        list.retain(|a| a.count > 0);
        if list.is_empty() {
            map.remove(queue);
        }
    }

    /// Whether some session consumes `queue`.
    pub fn in_use(&self, queue: &str) -> bool {
        self.map().contains_key(queue)
    }

    /// Ends every consumer of `session`; returns the queues it consumed.
    pub fn release(&self, session: SessionId) -> Vec<String> {
        let mut left = Vec::new();
        self.map().retain(|queue, list| {
            let before = list.len();
            list.retain(|a| a.session != session);
            if list.len() != before {
                left.push(queue.clone());
            }
            !list.is_empty()
        });
        left
    }
}
