//! Waking: long-poll receivers and push subscriptions wait here for queues to change.
//!
//! Waiters create their `Notified` future *before* they look at the store and await it only if
//! the store had nothing, so an arrival between the look and the wait is never missed (tokio's
//! `Notify::notify_waiters` wakes every `Notified` created before the call, enabled or polled).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// One `Notify` per queue with waiters, plus one for waiters by sender (any queue).
#[derive(Default)]
pub struct Wakers {
    // std mutex: held only to look up or insert an entry, never across an await.
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    any: Arc<Notify>,
}

impl Wakers {
    /// The notifier for `queue`, created on first use.
    pub fn queue(&self, queue: &str) -> Arc<Notify> {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get(queue) {
            return n.clone();
        }
        let n = Arc::new(Notify::new());
        map.insert(queue.to_owned(), n.clone());
        n
    }

    /// The notifier for waiters that watch every queue (receive by sender).
    pub fn any(&self) -> Arc<Notify> {
        self.any.clone()
    }

    /// Wakes everybody waiting on any of `queues`, and every by-sender waiter.
    pub fn notify<S: AsRef<str>>(&self, queues: &[S]) {
        if queues.is_empty() {
            return;
        }
        {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            for q in queues {
                if let Some(n) = map.get(q.as_ref()) {
                    n.notify_waiters();
                }
            }
        }
        self.any.notify_waiters();
    }

    /// Wakes every waiter of every queue (when what changed is not known).
    pub fn notify_all(&self) {
        {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            for n in map.values() {
                n.notify_waiters();
            }
        }
        self.any.notify_waiters();
    }

    /// Wakes every waiter of `queue` (deleted) and forgets its notifier.
    pub fn remove(&self, queue: &str) {
        let removed = self
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(queue);
        if let Some(n) = removed {
            n.notify_waiters();
        }
    }
}
