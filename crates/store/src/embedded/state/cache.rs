//! The cache of recently written message bodies.
//!
//! A persistent message's body lives in its log record; the state keeps only where that record
//! is. So that consumers that keep up never touch the disk, every body sent is also kept here,
//! by message id, until it is delivered and gone, or until newer bodies push it out: the cache
//! holds at most its capacity in bytes and evicts the *oldest* message first (ids grow with
//! time), the one least likely to be wanted soon by consumers that keep up. A body that was
//! evicted is read back from the log (see [`crate::embedded`]'s `bodies`).
//!
//! Bodies are copied in at their exact size, so that a body sliced out of a large network
//! buffer does not keep that whole buffer alive, and the cache's byte count is what it really
//! holds. Its figures are shared atomics, read without the state lock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::MessageId;

/// Bytes a cached body costs besides its own: its map entry and allocation, about.
const ENTRY_OVERHEAD: u64 = 64;

/// The cache's figures, readable without the state lock.
#[derive(Debug, Default)]
pub struct CacheFigures {
    /// Bytes held (bodies and their entries).
    pub bytes: AtomicU64,
    /// Most bytes it may hold now (the configured capacity, or less under memory pressure).
    pub capacity: AtomicU64,
    /// Bodies found in it when a message was handed out.
    pub hits: AtomicU64,
    /// Bodies that had to be read from the log.
    pub misses: AtomicU64,
}

/// Recently written bodies by message id, bounded in bytes.
#[derive(Debug)]
pub struct BodyCache {
    bodies: BTreeMap<MessageId, Bytes>,
    bytes: u64,
    /// The configured capacity.
    configured: u64,
    /// The capacity now: the configured one, or less while memory is short.
    capacity: u64,
    figures: Arc<CacheFigures>,
}

impl BodyCache {
    /// An empty cache of at most `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        let figures = Arc::new(CacheFigures::default());
        figures.capacity.store(capacity, Ordering::Relaxed);
        BodyCache {
            bodies: BTreeMap::new(),
            bytes: 0,
            configured: capacity,
            capacity,
            figures,
        }
    }

    /// The figures, shared.
    pub fn figures(&self) -> Arc<CacheFigures> {
        self.figures.clone()
    }

    fn cost(body: &Bytes) -> u64 {
        body.len() as u64 + ENTRY_OVERHEAD
    }

    /// Keeps a copy of `body` for message `id`, evicting the oldest bodies to make room. A
    /// body larger than the whole cache is not kept.
    pub fn insert(&mut self, id: MessageId, body: &[u8]) {
        let cost = body.len() as u64 + ENTRY_OVERHEAD;
        if cost > self.capacity {
            return;
        }
        if let Some(old) = self.bodies.insert(id, Bytes::copy_from_slice(body)) {
            self.bytes -= Self::cost(&old);
        }
        self.bytes += cost;
        self.shrink_to(self.capacity);
    }

    /// The body of message `id`, if cached; counts a hit or a miss.
    pub fn get(&self, id: MessageId) -> Option<Bytes> {
        let got = self.bodies.get(&id).cloned();
        let counter = if got.is_some() {
            &self.figures.hits
        } else {
            &self.figures.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        got
    }

    /// The body of message `id`, if cached, without counting it.
    pub fn peek(&self, id: MessageId) -> Option<Bytes> {
        self.bodies.get(&id).cloned()
    }

    /// Forgets message `id` (it is gone).
    pub fn remove(&mut self, id: MessageId) {
        if let Some(old) = self.bodies.remove(&id) {
            self.bytes -= Self::cost(&old);
            self.publish();
        }
    }

    /// Evicts the oldest bodies until at most `limit` bytes are held.
    fn shrink_to(&mut self, limit: u64) {
        while self.bytes > limit {
            let Some((_, old)) = self.bodies.pop_first() else {
                break;
            };
            self.bytes -= Self::cost(&old);
        }
        self.publish();
    }

    /// Limits the cache to `bytes` (at most its configured capacity) under memory pressure,
    /// evicting what no longer fits; `None` gives it its configured capacity back.
    pub fn limit(&mut self, bytes: Option<u64>) {
        self.capacity = bytes.map_or(self.configured, |b| b.min(self.configured));
        self.figures
            .capacity
            .store(self.capacity, Ordering::Relaxed);
        self.shrink_to(self.capacity);
    }

    fn publish(&self) {
        self.figures.bytes.store(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_bodies_are_evicted_first_and_bytes_stay_under_the_capacity() {
        let mut c = BodyCache::new(3 * (100 + ENTRY_OVERHEAD));
        for id in 1..=5 {
            c.insert(id, &[id as u8; 100]);
            assert!(c.bytes <= 3 * (100 + ENTRY_OVERHEAD));
        }
        assert!(c.peek(1).is_none() && c.peek(2).is_none());
        assert_eq!(&c.peek(5).unwrap()[..], &[5u8; 100][..]);
        c.remove(5);
        assert_eq!(c.bytes, 2 * (100 + ENTRY_OVERHEAD));
        c.limit(Some(100 + ENTRY_OVERHEAD));
        assert!(c.peek(3).is_none() && c.peek(4).is_some());
        c.limit(None);
        c.insert(9, &[0; 10]);
        assert!(c.peek(4).is_some(), "the configured capacity is back");
    }

    #[test]
    fn a_body_larger_than_the_cache_is_not_kept_and_hits_are_counted() {
        let mut c = BodyCache::new(1000);
        c.insert(1, &[0; 2000]);
        assert_eq!(c.bytes, 0);
        assert!(c.get(1).is_none());
        c.insert(2, &[1; 10]);
        assert!(c.get(2).is_some());
        let f = c.figures();
        assert_eq!(f.hits.load(Ordering::Relaxed), 1);
        assert_eq!(f.misses.load(Ordering::Relaxed), 1);
    }
}
