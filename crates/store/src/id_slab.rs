//! [`IdSlab`]: a map from dense, mostly increasing ids (the message ids the store hands out, one
//! after the other) to values, kept in chunks of [`CHUNK`] values indexed by the id itself.
//!
//! Against a hash map of the same values it saves the key, the table's spare room (up to half
//! of it just after the table doubled) and the cache miss of a fresh bucket per new id: a new
//! id lands next to the previous one. Memory follows the ids still held, not the most ever held:
//!
//! - a chunk is freed as soon as its last value leaves, and empty chunks at the front are
//!   dropped, so a queue drained in order gives its memory back chunk by chunk;
//! - a chunk that is neither the oldest nor the newest and keeps only a few values (at most
//!   [`SPARSE`]: say one stuck message per thousand) moves them to a small overflow hash map
//!   and is freed, so stragglers never pin whole chunks. The oldest chunk is left alone (a
//!   queue drained in order empties it soon, and it is one chunk at most), and so is the
//!   newest, which ids are still arriving into.
//!
//! A chunk is only ever created above every chunk created before (`high`): an id that arrives
//! late for a chunk that is gone (recovery replays compacted messages with their old ids) goes
//! to the overflow. So an id is in a chunk or in the overflow, never in both, and a lookup
//! reads one chunk or, below `high` with no chunk, the overflow.

use std::collections::VecDeque;

use crate::id_hash::IdMap;

/// Values per chunk (a power of two).
pub const CHUNK: usize = 1 << SHIFT;
const SHIFT: u32 = 10;
const MASK: u64 = CHUNK as u64 - 1;
/// A chunk other than the oldest and the newest that keeps this many values or fewer is
/// emptied into the overflow (a chunk then pins at most `CHUNK / SPARSE` slots per value).
pub const SPARSE: u32 = 16;

/// Empty chunk places a new chunk may leave behind the last one; an id further ahead spills
/// every chunk into the overflow and starts afresh.
const MAX_GAP: u64 = 1024;

/// [`CHUNK`] slots, with a bit per slot telling which hold a value (the others hold
/// `V::default()`).
struct Chunk<V> {
    live: u32,
    occupied: [u64; CHUNK / 64],
    values: Box<[V]>,
}

impl<V: Default> Chunk<V> {
    fn new() -> Box<Self> {
        Box::new(Chunk {
            live: 0,
            occupied: [0; CHUNK / 64],
            values: std::iter::repeat_with(V::default).take(CHUNK).collect(),
        })
    }

    fn has(&self, slot: usize) -> bool {
        self.occupied
            .get(slot / 64)
            .is_some_and(|w| w & 1 << (slot % 64) != 0)
    }

    fn mark(&mut self, slot: usize, occupied: bool) {
        if let Some(w) = self.occupied.get_mut(slot / 64) {
            if occupied {
                *w |= 1 << (slot % 64);
            } else {
                *w &= !(1 << (slot % 64));
            }
        }
    }

    /// The slots that hold a value, in order.
    fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..CHUNK).filter(|&s| self.has(s))
    }
}

/// A map from `u64` ids to `V`, for ids handed out one after the other (see the module docs).
pub struct IdSlab<V> {
    /// The chunk number (`id >> SHIFT`) of `chunks[0]`.
    first: u64,
    /// Chunks `first..first + chunks.len()`; `None` where freed or never needed.
    chunks: VecDeque<Option<Box<Chunk<V>>>>,
    /// One past the highest chunk number ever created: chunks are only created from here up.
    high: u64,
    /// Values whose chunk is gone (below `high`).
    overflow: IdMap<u64, V>,
    len: usize,
}

impl<V> Default for IdSlab<V> {
    fn default() -> Self {
        IdSlab {
            first: 0,
            chunks: VecDeque::new(),
            high: 0,
            overflow: IdMap::default(),
            len: 0,
        }
    }
}

impl<V> std::fmt::Debug for IdSlab<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdSlab")
            .field("len", &self.len)
            .field("chunks", &self.chunks.iter().flatten().count())
            .field("overflow", &self.overflow.len())
            .finish()
    }
}

fn split(id: u64) -> (u64, usize) {
    (id >> SHIFT, (id & MASK) as usize)
}

impl<V: Default> IdSlab<V> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Chunks allocated (tests and diagnostics).
    pub fn chunk_count(&self) -> usize {
        self.chunks.iter().flatten().count()
    }

    /// Values in the overflow (tests and diagnostics).
    pub fn overflow_len(&self) -> usize {
        self.overflow.len()
    }

    fn chunk(&self, c: u64) -> Option<&Chunk<V>> {
        let i = usize::try_from(c.checked_sub(self.first)?).ok()?;
        self.chunks.get(i)?.as_deref()
    }

    fn chunk_mut(&mut self, c: u64) -> Option<&mut Chunk<V>> {
        let i = usize::try_from(c.checked_sub(self.first)?).ok()?;
        self.chunks.get_mut(i)?.as_deref_mut()
    }

    /// The value of `id`.
    pub fn get(&self, id: u64) -> Option<&V> {
        let (c, slot) = split(id);
        match self.chunk(c) {
            Some(chunk) => chunk.values.get(slot).filter(|_| chunk.has(slot)),
            None if c < self.high && !self.overflow.is_empty() => self.overflow.get(&id),
            None => None,
        }
    }

    /// The value of `id`, to change.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut V> {
        let (c, slot) = split(id);
        if self.chunk(c).is_some() {
            let chunk = self.chunk_mut(c)?;
            let has = chunk.has(slot);
            return chunk.values.get_mut(slot).filter(|_| has);
        }
        if c < self.high {
            return self.overflow.get_mut(&id);
        }
        None
    }

    /// Whether `id` has a value.
    pub fn contains_key(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Sets the value of `id`; returns the one it replaces.
    pub fn insert(&mut self, id: u64, value: V) -> Option<V> {
        let (c, slot) = split(id);
        if self.chunk(c).is_none() {
            if c < self.high {
                let old = self.overflow.insert(id, value);
                self.len += usize::from(old.is_none());
                return old;
            }
            self.create(c);
        }
        let chunk = self.chunk_mut(c)?;
        let old = std::mem::replace(chunk.values.get_mut(slot)?, value);
        if chunk.has(slot) {
            return Some(old);
        }
        chunk.mark(slot, true);
        chunk.live += 1;
        self.len += 1;
        None
    }

    /// Creates chunk `c` (at or above `high`).
    fn create(&mut self, c: u64) {
        let end = self.first + self.chunks.len() as u64;
        if !self.chunks.is_empty() && c - end >= MAX_GAP {
            // Ids leapt ahead: rather than placeholders all the way, the chunks so far go to
            // the overflow (never with ids handed out one by one).
            for old in self.first..end {
                self.spill(old);
            }
        }
        if self.chunks.is_empty() {
            self.first = c;
        }
        let i = (c - self.first) as usize;
        while self.chunks.len() <= i {
            self.chunks.push_back(None);
        }
        if let Some(place) = self.chunks.get_mut(i) {
            *place = Some(Chunk::new());
        }
        self.high = c + 1;
    }

    /// Removes the value of `id` and returns it.
    pub fn remove(&mut self, id: u64) -> Option<V> {
        let (c, slot) = split(id);
        let Some(chunk) = self.chunk_mut(c) else {
            if c >= self.high || self.overflow.is_empty() {
                return None;
            }
            let old = self.overflow.remove(&id)?;
            self.len -= 1;
            if self.overflow.capacity() > 64 && self.overflow.len() * 4 < self.overflow.capacity() {
                self.overflow.shrink_to_fit();
            }
            return Some(old);
        };
        if !chunk.has(slot) {
            return None;
        }
        let old = std::mem::take(chunk.values.get_mut(slot)?);
        chunk.mark(slot, false);
        chunk.live -= 1;
        let live = chunk.live;
        self.len -= 1;
        if live == 0 {
            self.free(c);
        } else if live <= SPARSE && c != self.first && c + 1 != self.high {
            self.spill(c);
        }
        Some(old)
    }

    /// Frees chunk `c`, and the empty places at both ends.
    fn free(&mut self, c: u64) {
        if let Some(place) = c
            .checked_sub(self.first)
            .and_then(|i| self.chunks.get_mut(i as usize))
        {
            *place = None;
        }
        while self.chunks.front().is_some_and(Option::is_none) {
            self.chunks.pop_front();
            self.first += 1;
        }
        while self.chunks.back().is_some_and(Option::is_none) {
            self.chunks.pop_back();
        }
    }

    /// Moves the values of chunk `c` to the overflow and frees it.
    fn spill(&mut self, c: u64) {
        let Some(mut chunk) = c
            .checked_sub(self.first)
            .and_then(|i| self.chunks.get_mut(i as usize)?.take())
        else {
            return;
        };
        let base = c << SHIFT;
        for slot in chunk.slots().collect::<Vec<_>>() {
            if let Some(value) = chunk.values.get_mut(slot).map(std::mem::take) {
                self.overflow.insert(base | slot as u64, value);
            }
        }
        self.free(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn filled(n: u64) -> IdSlab<u64> {
        let mut s = IdSlab::default();
        for id in 0..n {
            assert_eq!(s.insert(id, id * 3), None);
        }
        s
    }

    #[test]
    fn holds_what_it_was_given_and_forgets_what_was_removed() {
        let mut s = filled(5_000);
        assert_eq!(s.len(), 5_000);
        assert_eq!(s.get(4_999), Some(&14_997));
        assert_eq!(s.get(5_000), None);
        assert_eq!(s.insert(7, 1), Some(21));
        *s.get_mut(8).unwrap() += 1;
        assert_eq!(s.get(8), Some(&25));
        assert_eq!(s.remove(7), Some(1));
        assert_eq!(s.remove(7), None);
        assert!(!s.contains_key(7));
        assert_eq!(s.len(), 4_999);
    }

    #[test]
    fn a_drained_chunk_is_freed_and_the_front_moves_on() {
        let mut s = filled(CHUNK as u64 * 4);
        assert_eq!(s.chunk_count(), 4);
        for id in 0..CHUNK as u64 * 2 {
            s.remove(id);
        }
        assert_eq!(s.chunk_count(), 2);
        assert_eq!(
            s.chunks.len(),
            2,
            "the freed chunks at the front are dropped"
        );
        assert_eq!(s.overflow_len(), 0, "an in-order drain never spills");
        for id in CHUNK as u64 * 2..CHUNK as u64 * 4 {
            s.remove(id);
        }
        assert!(s.is_empty());
        assert_eq!(s.chunks.len(), 0);
    }

    #[test]
    fn stragglers_do_not_pin_their_chunks() {
        // One message in a thousand stuck, over a hundred chunks.
        let n = CHUNK as u64 * 100;
        let mut s = filled(n);
        for id in 0..n {
            if id % 1_000 != 0 {
                s.remove(id);
            }
        }
        assert_eq!(s.len() as u64, n.div_ceil(1_000));
        // The oldest chunk and the newest keep theirs; the others spilled into the overflow.
        assert!(s.chunk_count() <= 2, "{s:?}");
        assert!((0..n).step_by(1_000).all(|id| s.get(id) == Some(&(id * 3))));
        // A new id still goes to a chunk, a late one for a freed chunk to the overflow.
        s.insert(n, 1);
        s.insert(CHUNK as u64 * 50 + 1, 2);
        assert_eq!(s.get(CHUNK as u64 * 50 + 1), Some(&2));
        assert!(s.chunk_count() <= 3, "{s:?}");
        let overflow = s.overflow_len();
        assert!(overflow > 90, "{s:?}");
        // Draining the stragglers shrinks the overflow back.
        for id in (0..n).step_by(1_000) {
            assert_eq!(s.remove(id), Some(id * 3));
        }
        assert_eq!(s.remove(CHUNK as u64 * 50 + 1), Some(2));
        assert_eq!(s.len(), 1);
        assert!(s.overflow.capacity() <= 64, "{}", s.overflow.capacity());
    }

    #[test]
    fn ids_far_apart_cost_no_chunks_between_them() {
        let mut s = IdSlab::default();
        s.insert(3, 'a');
        s.insert(u64::MAX, 'b');
        assert_eq!(s.get(u64::MAX), Some(&'b'));
        assert_eq!(s.chunks.len(), 1, "id 3 spilled: no chunks in between");
        assert_eq!(s.overflow_len(), 1);
        assert_eq!(s.remove(3), Some('a'));
        assert_eq!(s.get(3), None);
        // Below the highest chunk ever created: the overflow.
        s.insert(3, 'c');
        assert_eq!((s.get(3), s.overflow_len()), (Some(&'c'), 1));
        // A gap within bounds leaves empty places only.
        let mut s = filled(10);
        s.insert((MAX_GAP - 1) << SHIFT, 'x' as u64);
        assert_eq!((s.chunk_count(), s.overflow_len()), (2, 0));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Get(u64),
    }

    fn op(span: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..span, any::<u32>()).prop_map(|(id, v)| Op::Insert(id, v)),
            3 => (0..span).prop_map(Op::Remove),
            1 => (0..span).prop_map(Op::Get),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any mix of inserts and removes, in any order, agrees with a hash map.
        #[test]
        fn agrees_with_a_hash_map(
            prefill in 0..CHUNK as u64 * 6,
            ops in proptest::collection::vec(op(CHUNK as u64 * 8), 0..3_000),
        ) {
            let mut s = IdSlab::default();
            let mut m = HashMap::new();
            for id in 0..prefill {
                s.insert(id, id as u32);
                m.insert(id, id as u32);
            }
            for op in ops {
                match op {
                    Op::Insert(id, v) => prop_assert_eq!(s.insert(id, v), m.insert(id, v)),
                    Op::Remove(id) => prop_assert_eq!(s.remove(id), m.remove(&id)),
                    Op::Get(id) => prop_assert_eq!(s.get(id), m.get(&id)),
                }
                prop_assert_eq!(s.len(), m.len());
            }
            for (id, v) in &m {
                prop_assert_eq!(s.get(*id), Some(v));
            }
            let live: usize = s.chunks.iter().flatten().map(|c| c.live as usize).sum();
            prop_assert_eq!(live + s.overflow_len(), m.len());
        }
    }
}
