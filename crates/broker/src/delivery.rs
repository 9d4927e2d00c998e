//! Waking: long-poll receivers and push subscriptions wait here for queues to change.
//!
//! Waiters create their `Notified` future *before* they look at the store and await it only if
//! the store had nothing, so an arrival between the look and the wait is never missed (tokio's
//! `Notify::notify_waiters` wakes every `Notified` created before the call, enabled or polled).
//!
//! A waiter holds a [`Watch`] while it may wait, and the watches are counted. A change with no
//! watch anywhere wakes nobody, so it skips the map lock and the notifiers' own locks, which
//! every sending connection would otherwise take on every message (they are shared across the
//! runtime's threads, so they are contended). Skipping is safe: a watch is counted before its
//! holder looks at the store, and a change is published (under the store's lock) before its
//! sender reads the count, so either the look sees the change or the count shows the watch.
//!
//! A publish to a topic also wakes the subscriptions of the patterns the topic matches: their
//! notifiers (keyed `pattern:`) are indexed by word as well, so a publish finds them without
//! looking at the notifiers of patterns it does not match.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferry_store::PatternIndex;
use tokio::sync::futures::Notified;
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

/// The notifiers of queues (and of topics' and patterns' subscriptions).
#[derive(Default)]
struct Notifiers {
    by_key: HashMap<String, Arc<Notify>>,
    /// The notifiers of patterns' subscriptions among `by_key`, by pattern.
    patterns: PatternIndex<Arc<Notify>>,
}

/// One `Notify` per queue with waiters, plus one for waiters by sender (any queue).
#[derive(Default)]
pub struct Wakers {
    // std mutex: held only to look up or insert an entry, never across an await.
    queues: Mutex<Notifiers>,
    any: Arc<Notify>,
    /// Live watches of queue notifiers.
    queue_watches: Arc<AtomicUsize>,
    /// Live watches of `any`.
    sender_watches: Arc<AtomicUsize>,
}

/// A waiter's hold on one notifier; counted while it lives (see the module docs).
pub struct Watch {
    notify: Arc<Notify>,
    count: Arc<AtomicUsize>,
}

impl Watch {
    fn new(notify: Arc<Notify>, count: &Arc<AtomicUsize>) -> Watch {
        count.fetch_add(1, Ordering::SeqCst);
        Watch {
            notify,
            count: count.clone(),
        }
    }

    /// A future for the next change; create (and enable) it before looking at the store.
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Wakers {
    /// A watch of `queue`'s notifier, created on first use.
    pub fn queue(&self, queue: &str) -> Watch {
        let queue = key(queue);
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let n = match map.by_key.get(queue) {
            Some(n) => n.clone(),
            None => {
                let n = Arc::new(Notify::new());
                map.by_key.insert(queue.to_owned(), n.clone());
                if let Some(pattern) = queue
                    .strip_suffix(ferry_protocol::SUBSCRIPTION_SEPARATOR)
                    .filter(|t| ferry_protocol::topic::is_pattern(t))
                {
                    map.patterns.insert(pattern, n.clone());
                }
                n
            }
        };
        Watch::new(n, &self.queue_watches)
    }

    /// A watch of the notifier of every queue (receive by sender).
    pub fn any(&self) -> Watch {
        Watch::new(self.any.clone(), &self.sender_watches)
    }

    /// Wakes everybody waiting on any of `queues`, and every by-sender waiter.
    pub fn notify<S: AsRef<str>>(&self, queues: &[S]) {
        if queues.is_empty() {
            return;
        }
        if self.queue_watches.load(Ordering::SeqCst) > 0 {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            for q in queues {
                if let Some(n) = map.by_key.get(key(q.as_ref())) {
                    n.notify_waiters();
                }
            }
        }
        if self.sender_watches.load(Ordering::SeqCst) > 0 {
            self.any.notify_waiters();
        }
    }

    /// Wakes the waiters of every subscription of `topic` and of the patterns it matches (a
    /// publish).
    pub fn notify_topic(&self, topic: &str) {
        if self.queue_watches.load(Ordering::SeqCst) == 0 {
            return;
        }
        let key = ferry_protocol::subscription_queue(topic, "");
        let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.by_key.get(&key) {
            n.notify_waiters();
        }
        map.patterns
            .for_each_match(topic, |_, n| n.notify_waiters());
    }

    /// Wakes every waiter of every queue (when what changed is not known).
    pub fn notify_all(&self) {
        {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            for n in map.by_key.values() {
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
            map.by_key.remove(k)
        } else {
            map.by_key.get(k).cloned()
        };
        drop(map);
        if let Some(n) = removed {
            n.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_watch_of_a_queue_is_woken_by_its_change_and_by_no_other() {
        let wakers = Wakers::default();
        let watch = wakers.queue("orders");
        let arrived = watch.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        wakers.notify(&["invoices"]);
        assert!(
            futures::poll!(arrived.as_mut()).is_pending(),
            "another queue's change woke the watch"
        );
        wakers.notify(&["orders"]);
        assert!(futures::poll!(arrived.as_mut()).is_ready());
    }

    #[tokio::test]
    async fn a_publish_wakes_its_topic_and_the_patterns_it_matches_only() {
        let wakers = Wakers::default();
        let watches = [
            wakers.queue("prices.eu:a"),
            wakers.queue("prices.*:b"),
            wakers.queue("prices.>:c"),
            wakers.queue("prices.us:d"),
            wakers.queue("news.>:e"),
        ];
        let mut arrived: Vec<_> = watches.iter().map(|w| Box::pin(w.notified())).collect();
        for a in &mut arrived {
            a.as_mut().enable();
        }
        wakers.notify_topic("prices.eu");
        let mut woken = Vec::new();
        for a in &mut arrived {
            woken.push(futures::poll!(a.as_mut()).is_ready());
        }
        assert_eq!(woken, vec![true, true, true, false, false]);
    }

    #[tokio::test]
    async fn a_watch_by_sender_is_woken_by_every_queue() {
        let wakers = Wakers::default();
        let watch = wakers.any();
        let arrived = watch.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        wakers.notify(&["anything"]);
        assert!(futures::poll!(arrived.as_mut()).is_ready());
    }

    #[test]
    fn watches_are_counted_while_they_live() {
        let wakers = Wakers::default();
        let a = wakers.queue("a");
        let b = wakers.queue("topic:sub");
        let s = wakers.any();
        assert_eq!(wakers.queue_watches.load(Ordering::SeqCst), 2);
        assert_eq!(wakers.sender_watches.load(Ordering::SeqCst), 1);
        drop((a, b, s));
        assert_eq!(wakers.queue_watches.load(Ordering::SeqCst), 0);
        assert_eq!(wakers.sender_watches.load(Ordering::SeqCst), 0);
    }

    /// The race the watch count must not lose: a change published while a waiter starts to
    /// watch either is seen by the waiter's look or wakes it. Each round a waiter watches,
    /// looks and waits, while a sender publishes and notifies at the same moment on another
    /// thread; a lost wake-up leaves the waiter asleep until the timeout, which ends the test.
    #[test]
    fn a_change_racing_a_new_watch_is_never_lost() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let wakers = Arc::new(Wakers::default());
            let store = Arc::new(Mutex::new(0u64));
            let lost = Arc::new(AtomicU64::new(0));
            for round in 1..=2_000u64 {
                let waiter = {
                    let (wakers, store, lost) = (wakers.clone(), store.clone(), lost.clone());
                    tokio::spawn(async move {
                        let watch = wakers.queue("q");
                        loop {
                            let arrived = watch.notified();
                            tokio::pin!(arrived);
                            arrived.as_mut().enable();
                            if *store.lock().expect("store") >= round {
                                return;
                            }
                            if tokio::time::timeout(Duration::from_secs(1), arrived)
                                .await
                                .is_err()
                            {
                                lost.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        }
                    })
                };
                let sender = {
                    let (wakers, store) = (wakers.clone(), store.clone());
                    tokio::spawn(async move {
                        *store.lock().expect("store") = round;
                        wakers.notify(&["q"]);
                    })
                };
                sender.await.expect("sender");
                waiter.await.expect("waiter");
                if lost.load(Ordering::SeqCst) > 0 {
                    break;
                }
            }
            assert_eq!(lost.load(Ordering::SeqCst), 0, "wake-ups were lost");
        });
    }
}
