//! Waking: long-poll receivers and push subscriptions wait here for queues to change.
//!
//! Waiters create their `Notified` future *before* they look at the store and await it only if
//! the store had nothing, so an arrival between the look and the wait is never missed (tokio's
//! `Notify::notify_waiters` wakes every `Notified` created before the call, enabled or polled).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The notifier key of a queue: the queues of a topic's subscriptions (`topic:name`) share one
/// notifier, keyed `topic:`, so that a publish wakes them all with one lookup (a subscription
/// woken by another one's message looks, finds nothing and waits again).
fn key(queue: &str) -> &str {
    match queue.find(ferry_protocol::SUBSCRIPTION_SEPARATOR) {
        Some(i) => queue.get(..=i).unwrap_or(queue),
        None => queue,
    }
}

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
        let queue = key(queue);
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
                if let Some(n) = map.get(key(q.as_ref())) {
                    n.notify_waiters();
                }
            }
        }
        self.any.notify_waiters();
    }

    /// Wakes the waiters of every subscription of `topic` (a publish).
    pub fn notify_topic(&self, topic: &str) {
        let key = ferry_protocol::subscription_queue(topic, "");
        let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get(&key) {
            n.notify_waiters();
        }
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

    /// Wakes every waiter of `queue` (deleted) and forgets its notifier. A subscription queue's
    /// notifier is shared with the topic's other subscriptions, so it is only woken.
    pub fn remove(&self, queue: &str) {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let k = key(queue);
        let removed = if k == queue {
            map.remove(k)
        } else {
            map.get(k).cloned()
        };
        drop(map);
        if let Some(n) = removed {
            n.notify_waiters();
        }
    }
}
