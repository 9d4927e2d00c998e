//! The cache of recently written message bodies.
//!
//! A persistent message's body lives in its log record; the state keeps only where that record
//! is. So that consumers that keep up never touch the disk, every body sent is also kept here,
//! by message id, until it is delivered and gone, or until newer bodies push it out: the cache
//! holds at most its capacity in bytes and evicts the *oldest* message first (ids grow with
//! time), the one least likely to be wanted soon by consumers that keep up. A body that was
//! evicted is read back from the log (see [`crate::embedded`]'s `bodies`).
//!
//! Its cost is on every persistent send, so it is laid out for that. Ids only grow, so the
//! entries are a ring in id order: a send appends, eviction pops the front, and a lookup is a
//! binary search. A removed body leaves its entry behind, empty, until it reaches the front (or
//! empty entries outnumber the others and are swept out), which keeps removal free of shifting.
//! Small bodies are copied into shared chunks rather than one allocation each: a chunk is
//! freed when the last body in it is dropped, and one that is no longer shared is reused
//! in place. Bodies are copied, not kept as sent, so that a body sliced out of a large network
//! buffer does not keep that whole buffer alive.
//!
//! The byte count is what the cache really holds: every entry, every body in its own
//! allocation, and the whole of each chunk that still holds a cached body (so a body kept while
//! its neighbours were taken costs its chunk). Its figures are shared atomics, read without the
//! state lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferry_protocol::MessageId;

/// Bytes of a chunk that small bodies share (less in a small cache: see [`BodyCache::new`]).
const CHUNK_BYTES: u64 = 64 * 1024;

/// Bodies up to this fraction of a chunk go into one; larger ones get their own allocation
/// (so the room a chunk wastes at its end is at most this fraction).
const CHUNK_FRACTION: u64 = 8;

/// The `chunk` of a body in an allocation of its own.
const OWN: u64 = u64::MAX;

/// One message's place in the ring; `body` is `None` once it was removed.
#[derive(Debug)]
struct Entry {
    id: MessageId,
    body: Option<Bytes>,
    /// The sequence number of the chunk the body is in, or [`OWN`].
    chunk: u64,
}

/// Bytes an entry costs besides its body.
const ENTRY_BYTES: u64 = std::mem::size_of::<Entry>() as u64;

/// A chunk's bookkeeping: how many cached bodies are in it. Its bytes count while any is.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    live: u32,
}

/// The cache's figures, readable without the state lock.
#[derive(Debug, Default)]
pub struct CacheFigures {
    /// Bytes held (entries, bodies and the chunks they are in).
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
    /// Entries in ascending id order, the oldest first.
    entries: VecDeque<Entry>,
    /// Entries whose body was removed.
    emptied: usize,
    /// Chunks from `first_chunk` on; the last is the one being filled.
    chunks: VecDeque<Chunk>,
    first_chunk: u64,
    /// The free room of the chunk being filled.
    open: BytesMut,
    /// Bytes of a chunk in this cache.
    chunk_bytes: u64,
    bytes: u64,
    /// The configured capacity.
    configured: u64,
    /// The capacity now: the configured one, or less while memory is short.
    capacity: u64,
    figures: Arc<CacheFigures>,
}

impl BodyCache {
    /// An empty cache of at most `capacity` bytes. Its chunks are at most a sixteenth of it,
    /// so that a small cache still holds several.
    pub fn new(capacity: u64) -> Self {
        let figures = Arc::new(CacheFigures::default());
        figures.capacity.store(capacity, Ordering::Relaxed);
        BodyCache {
            entries: VecDeque::new(),
            emptied: 0,
            chunks: VecDeque::new(),
            first_chunk: 0,
            open: BytesMut::new(),
            chunk_bytes: CHUNK_BYTES.min(capacity / 16),
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

    /// Keeps a copy of `body` for message `id`, evicting the oldest bodies to make room. A
    /// body larger than the whole cache is not kept.
    pub fn insert(&mut self, id: MessageId, body: &[u8]) {
        if self.entries.back().is_some_and(|e| e.id >= id) {
            self.remove(id);
        }
        let len = body.len() as u64;
        let (body, chunk) = if let Some(chunk) = self.room_for(len) {
            self.open.extend_from_slice(body);
            if let Some(c) = self.chunks.get_mut((chunk - self.first_chunk) as usize) {
                c.live += 1;
                if c.live == 1 {
                    self.bytes += self.chunk_bytes;
                }
            }
            (self.open.split().freeze(), chunk)
        } else if len + ENTRY_BYTES <= self.capacity {
            self.bytes += len;
            (Bytes::copy_from_slice(body), OWN)
        } else {
            return;
        };
        self.bytes += ENTRY_BYTES;
        let entry = Entry {
            id,
            body: Some(body),
            chunk,
        };
        if self.entries.back().is_none_or(|e| e.id < id) {
            self.entries.push_back(entry);
        } else {
            // Ids only grow; kept correct all the same. An emptied entry of this id is reused.
            match self.entries.binary_search_by_key(&id, |e| e.id) {
                Ok(at) => {
                    if let Some(emptied) = self.entries.get_mut(at) {
                        *emptied = entry;
                        self.emptied -= 1;
                        self.bytes -= ENTRY_BYTES;
                    }
                }
                Err(at) => self.entries.insert(at, entry),
            }
        }
        self.shrink_to(self.capacity);
    }

    /// The chunk a body of `len` bytes goes into, with room for it made, if it goes into one.
    fn room_for(&mut self, len: u64) -> Option<u64> {
        if len == 0 || len > self.chunk_bytes / CHUNK_FRACTION {
            return None;
        }
        let open_chunk = self.first_chunk + self.chunks.len() as u64;
        let filling = self
            .chunks
            .back()
            .filter(|_| self.open.capacity() as u64 >= len);
        if let Some(c) = filling {
            // A chunk that holds no cached body is not counted: it will be.
            let grows = if c.live == 0 { self.chunk_bytes } else { 0 };
            return (grows + ENTRY_BYTES <= self.capacity).then_some(open_chunk - 1);
        }
        if self.chunk_bytes + ENTRY_BYTES > self.capacity {
            return None;
        }
        // A new chunk; the last one's memory, if nothing uses it any more, is reused.
        if !self.open.try_reclaim(self.chunk_bytes as usize) {
            self.open = BytesMut::with_capacity(self.chunk_bytes as usize);
        }
        self.chunks.push_back(Chunk { live: 0 });
        self.drop_dead_chunks();
        Some(open_chunk)
    }

    /// The body of message `id`, if cached; counts a hit or a miss.
    pub fn get(&self, id: MessageId) -> Option<Bytes> {
        let got = self.peek(id);
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
        let at = self.position(id)?;
        self.entries.get(at)?.body.clone()
    }

    /// Where message `id`'s entry is. Ids are unique and ascending, so it is at most as far
    /// from the front as its id is from the front's; with no gaps (consumers keeping up), there.
    fn position(&self, id: MessageId) -> Option<usize> {
        let front = self.entries.front()?.id;
        let gap = usize::try_from(id.checked_sub(front)?).unwrap_or(usize::MAX);
        let (mut low, mut high) = (0, self.entries.len().min(gap.saturating_add(1)));
        if self.entries.get(gap).is_some_and(|e| e.id == id) {
            return Some(gap);
        }
        while low < high {
            let mid = low + (high - low) / 2;
            match self.entries.get(mid)?.id.cmp(&id) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Forgets message `id` (it is gone).
    pub fn remove(&mut self, id: MessageId) {
        let Some(at) = self.position(id) else {
            return;
        };
        let Some(entry) = self.entries.get_mut(at) else {
            return;
        };
        let Some(body) = entry.body.take() else {
            return;
        };
        let chunk = entry.chunk;
        self.emptied += 1;
        self.release(&body, chunk);
        // Emptied entries leave from the front, or all at once when they are the majority.
        while self.entries.front().is_some_and(|e| e.body.is_none()) {
            self.entries.pop_front();
            self.emptied -= 1;
            self.bytes -= ENTRY_BYTES;
        }
        if self.emptied >= 32 && self.emptied * 2 > self.entries.len() {
            self.entries.retain(|e| e.body.is_some());
            self.bytes -= self.emptied as u64 * ENTRY_BYTES;
            self.emptied = 0;
        }
        self.publish();
    }

    /// Stops counting `body`, which was in `chunk`.
    fn release(&mut self, body: &Bytes, chunk: u64) {
        if chunk == OWN {
            self.bytes -= body.len() as u64;
            return;
        }
        let Some(c) = self.chunks.get_mut((chunk - self.first_chunk) as usize) else {
            return;
        };
        c.live -= 1;
        if c.live == 0 {
            self.bytes -= self.chunk_bytes;
            self.drop_dead_chunks();
        }
    }

    /// Forgets the oldest chunks that hold no cached body, except the one being filled.
    fn drop_dead_chunks(&mut self) {
        while self.chunks.len() > 1 && self.chunks.front().is_some_and(|c| c.live == 0) {
            self.chunks.pop_front();
            self.first_chunk += 1;
        }
    }

    /// Evicts the oldest bodies until at most `limit` bytes are held.
    fn shrink_to(&mut self, limit: u64) {
        while self.bytes > limit {
            let Some(entry) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= ENTRY_BYTES;
            match entry.body {
                Some(body) => self.release(&body, entry.chunk),
                None => self.emptied -= 1,
            }
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
        // The chunk being filled is memory too, counted or not: let it go if it is idle.
        if self.chunk_bytes > self.capacity && self.chunks.back().is_none_or(|c| c.live == 0) {
            self.open = BytesMut::new();
        }
    }

    fn publish(&self) {
        self.figures.bytes.store(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache's own count, recomputed from what it holds, and every chunk's count of bodies.
    fn check(c: &BodyCache) {
        let mut bytes = c.entries.len() as u64 * ENTRY_BYTES;
        let mut live = vec![0u32; c.chunks.len()];
        let mut emptied = 0;
        for e in &c.entries {
            match (&e.body, e.chunk) {
                (None, _) => emptied += 1,
                (Some(b), OWN) => bytes += b.len() as u64,
                (Some(_), chunk) => live[(chunk - c.first_chunk) as usize] += 1,
            }
        }
        for (i, chunk) in c.chunks.iter().enumerate() {
            assert_eq!(chunk.live, live[i], "chunk {i}'s count of bodies");
            if chunk.live > 0 {
                bytes += c.chunk_bytes;
            }
        }
        assert_eq!(c.emptied, emptied, "emptied entries");
        assert_eq!(c.bytes, bytes, "bytes held");
        assert_eq!(
            c.figures.bytes.load(Ordering::Relaxed),
            bytes,
            "published bytes"
        );
        assert!(
            c.bytes <= c.capacity,
            "{} bytes over a capacity of {}",
            c.bytes,
            c.capacity
        );
        assert!(c
            .entries
            .iter()
            .zip(c.entries.iter().skip(1))
            .all(|(a, b)| a.id < b.id));
    }

    fn body(id: MessageId, len: usize) -> Vec<u8> {
        (0..len).map(|i| (id as usize * 31 + i) as u8).collect()
    }

    fn has(c: &BodyCache, id: MessageId, len: usize) -> bool {
        c.peek(id).is_some_and(|b| b[..] == body(id, len)[..])
    }

    #[test]
    fn the_oldest_bodies_are_evicted_first_and_bytes_stay_under_the_capacity() {
        // Bodies of their own: 100 bytes against chunks of 444 / 16 = 27 bytes.
        let cost = 100 + ENTRY_BYTES;
        let mut c = BodyCache::new(3 * cost);
        for id in 1..=5 {
            c.insert(id, &body(id, 100));
            check(&c);
        }
        assert!(c.peek(1).is_none() && c.peek(2).is_none());
        assert!((3..=5).all(|id| has(&c, id, 100)));
        c.remove(5);
        check(&c);
        // Its entry stays, emptied, until it reaches the front.
        assert_eq!(c.bytes, 2 * cost + ENTRY_BYTES);
        c.remove(3);
        c.remove(4);
        check(&c);
        assert_eq!((c.bytes, c.entries.len()), (0, 0));
    }

    #[test]
    fn small_bodies_share_chunks_and_the_oldest_go_first() {
        let mut c = BodyCache::new(4 * CHUNK_BYTES);
        assert_eq!(c.chunk_bytes, CHUNK_BYTES / 4);
        // About 130 bodies a chunk, 1,000 of them: the cache keeps what four chunks hold.
        for id in 1..=1000 {
            c.insert(id, &body(id, 100));
            check(&c);
        }
        let kept: Vec<MessageId> = (1..=1000).filter(|&id| c.peek(id).is_some()).collect();
        let first = kept[0];
        assert!(kept.len() > 200, "{} kept", kept.len());
        assert_eq!(
            kept,
            (first..=1000).collect::<Vec<_>>(),
            "the newest are kept"
        );
        assert!((first..=1000).all(|id| has(&c, id, 100)));
        assert!(c.chunks.len() as u64 <= c.capacity / c.chunk_bytes + 1);
    }

    #[test]
    fn a_removed_body_in_the_middle_is_gone_and_its_neighbours_stay() {
        let mut c = BodyCache::new(1 << 20);
        for id in 1..=10 {
            c.insert(id, &body(id, 50));
        }
        let before = c.bytes;
        c.remove(5);
        check(&c);
        assert!(c.peek(5).is_none());
        assert!((1..=10).filter(|&id| id != 5).all(|id| has(&c, id, 50)));
        assert_eq!(
            c.bytes, before,
            "the chunk still holds others; the entry waits its turn"
        );
        c.remove(5);
        check(&c);
        // Taking the rest in order leaves nothing counted: entries, chunk and all.
        for id in (1..=10).filter(|&id| id != 5) {
            c.remove(id);
            check(&c);
        }
        assert_eq!((c.bytes, c.entries.len()), (0, 0));
    }

    #[test]
    fn emptied_entries_are_swept_when_they_are_the_majority() {
        let mut c = BodyCache::new(1 << 20);
        for id in 1..=200 {
            c.insert(id, &body(id, 10));
        }
        // The oldest stays (a backlog's message), the rest are taken.
        for id in 2..=200 {
            c.remove(id);
            check(&c);
        }
        assert!(c.entries.len() < 100, "{} entries", c.entries.len());
        assert!(has(&c, 1, 10));
    }

    #[test]
    fn a_body_kept_alone_costs_its_whole_chunk() {
        let mut c = BodyCache::new(1 << 20);
        let chunk = c.chunk_bytes;
        for id in 1..=20 {
            c.insert(id, &body(id, 100));
        }
        for id in 2..=20 {
            c.remove(id);
        }
        check(&c);
        assert_eq!(c.bytes, chunk + c.entries.len() as u64 * ENTRY_BYTES);
        c.remove(1);
        check(&c);
        assert_eq!(c.bytes, 0);
    }

    #[test]
    fn a_limit_evicts_down_to_it_and_lifting_it_restores_the_capacity() {
        let mut c = BodyCache::new(1 << 20);
        for id in 1..=1000 {
            c.insert(id, &body(id, 500));
        }
        check(&c);
        c.limit(Some(100_000));
        check(&c);
        assert!(c.bytes <= 100_000 && c.peek(1000).is_some() && c.peek(1).is_none());
        assert_eq!(c.figures.capacity.load(Ordering::Relaxed), 100_000);
        c.limit(Some(0));
        check(&c);
        assert_eq!((c.bytes, c.entries.len(), c.open.capacity()), (0, 0, 0));
        c.insert(1001, &body(1001, 500));
        assert!(
            c.peek(1001).is_none(),
            "nothing is kept while limited to nothing"
        );
        c.limit(None);
        c.insert(1002, &body(1002, 500));
        check(&c);
        assert!(has(&c, 1002, 500), "the configured capacity is back");
        assert_eq!(c.figures.capacity.load(Ordering::Relaxed), 1 << 20);
    }

    #[test]
    fn a_body_larger_than_the_cache_is_not_kept_and_hits_are_counted() {
        let mut c = BodyCache::new(1000);
        c.insert(1, &[1; 10]);
        let held = c.bytes;
        c.insert(2, &[0; 2000]);
        assert_eq!(c.bytes, held, "nothing was evicted for it");
        assert!(c.get(2).is_none());
        assert!(c.get(1).is_some());
        let f = c.figures();
        assert_eq!(f.hits.load(Ordering::Relaxed), 1);
        assert_eq!(f.misses.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_body_handed_out_outlives_its_chunk_being_reused() {
        let mut c = BodyCache::new(1 << 20);
        c.insert(1, &body(1, 100));
        let out = c.get(1).unwrap();
        c.remove(1);
        // Enough bodies to fill several chunks, taken as they come, as consumers that keep up do.
        for id in 2..=2000 {
            c.insert(id, &body(id, 100));
            assert!(has(&c, id, 100));
            c.remove(id);
        }
        check(&c);
        assert_eq!(
            out[..],
            body(1, 100)[..],
            "a body handed out is never overwritten"
        );
    }

    #[test]
    fn a_chunk_nobody_uses_any_more_is_reused_in_place() {
        let mut c = BodyCache::new(1 << 20);
        let at = |c: &BodyCache, id| c.peek(id).unwrap().as_ptr() as usize;
        c.insert(1, &body(1, 100));
        let first = at(&c, 1);
        c.remove(1);
        for id in 2..=2000 {
            c.insert(id, &body(id, 100));
            c.remove(id);
        }
        c.insert(2001, &body(2001, 100));
        let chunk = c.chunk_bytes as usize;
        let now = at(&c, 2001);
        assert!(now >= first && now < first + chunk, "a fresh allocation");
    }

    #[test]
    fn sending_an_id_again_replaces_its_body() {
        let mut c = BodyCache::new(1 << 20);
        for id in 1..=3 {
            c.insert(id, &body(id, 10));
        }
        c.insert(2, b"again");
        c.insert(3, &[7; 5000]);
        check(&c);
        assert_eq!(&c.peek(2).unwrap()[..], b"again");
        assert_eq!(&c.peek(3).unwrap()[..], &[7; 5000][..]);
        assert!(has(&c, 1, 10));
    }
}
