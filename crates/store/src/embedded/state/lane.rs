//! [`Lane`]: the ready entries of one priority of one index, as a sorted deque.
//!
//! Messages arrive with increasing ids and mostly leave from the head, so a sorted `VecDeque`
//! makes the common case an append and a pop (no tree nodes to allocate, rebalance or chase).
//! An entry taken out of the middle (a selector's pick, a by-sender take, an expiry) is marked
//! dead in place instead of shifting its neighbours; dead entries at either end are dropped at
//! once, and the lane is compacted when they outnumber the live ones, so walks stay linear in
//! the live entries. An entry that comes back (nack, expiry of a lease) finds its old place by
//! binary search: revived in place if its tombstone is still there, inserted otherwise.

use std::collections::VecDeque;

/// Below this many entries a lane is never compacted (a few tombstones cost nothing).
const COMPACT_MIN: usize = 64;

/// A key a lane can mark dead in place, in a bit that real keys never set (message ids stay
/// below 2^63), so that a tombstone costs no byte of its own: 8 bytes per ready message id
/// instead of 16, 16 per by-sender entry instead of 24.
pub trait LaneKey: Ord + Copy {
    /// The key with its tombstone bit set (`dead`) or cleared.
    fn marked(self, dead: bool) -> Self;
    /// Whether its tombstone bit is set.
    fn is_marked(self) -> bool;
}

const TOP: u64 = 1 << 63;

impl LaneKey for u64 {
    fn marked(self, dead: bool) -> Self {
        if dead {
            self | TOP
        } else {
            self & !TOP
        }
    }
    fn is_marked(self) -> bool {
        self & TOP != 0
    }
}

impl<T: Ord + Copy> LaneKey for (u64, T) {
    fn marked(self, dead: bool) -> Self {
        (self.0.marked(dead), self.1)
    }
    fn is_marked(self) -> bool {
        self.0.is_marked()
    }
}

#[cfg(test)]
impl LaneKey for u16 {
    fn marked(self, dead: bool) -> Self {
        if dead {
            self | 1 << 15
        } else {
            self & !(1 << 15)
        }
    }
    fn is_marked(self) -> bool {
        self & 1 << 15 != 0
    }
}

/// One entry: its key, marked when it is no longer ready (a tombstone).
#[derive(Debug, Clone, Copy)]
struct Slot<K>(K);

impl<K: LaneKey> Slot<K> {
    fn new(key: K) -> Self {
        debug_assert!(!key.is_marked(), "a key with the tombstone bit set");
        Slot(key)
    }
    fn key(&self) -> K {
        self.0.marked(false)
    }
    fn live(&self) -> bool {
        !self.0.is_marked()
    }
    fn set_live(&mut self, live: bool) {
        self.0 = self.0.marked(!live);
    }
}

// What the footprint figures (docs/storage-format.md) count per ready message.
const _: () =
    assert!(std::mem::size_of::<Slot<u64>>() == 8 && std::mem::size_of::<Slot<(u64, u32)>>() == 16);

/// Ready entries of one priority, in ascending key order.
#[derive(Debug)]
pub struct Lane<K> {
    slots: VecDeque<Slot<K>>,
    live: usize,
}

impl<K> Default for Lane<K> {
    fn default() -> Self {
        Lane {
            slots: VecDeque::new(),
            live: 0,
        }
    }
}

impl<K: LaneKey> Lane<K> {
    /// Number of live entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no entry is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Where `key` is or would go.
    fn search(&self, key: &K) -> Result<usize, usize> {
        self.slots.binary_search_by(|s| s.key().cmp(key))
    }

    /// Adds `key`; whether it was not there already.
    pub fn insert(&mut self, key: K) -> bool {
        // The common case: a new message, with the highest id so far.
        if self.slots.back().is_none_or(|s| s.key() < key) {
            self.slots.push_back(Slot::new(key));
            self.live += 1;
            return true;
        }
        match self.search(&key) {
            Ok(i) => {
                let Some(slot) = self.slots.get_mut(i) else {
                    return false;
                };
                if slot.live() {
                    return false;
                }
                slot.set_live(true);
            }
            Err(i) => self.slots.insert(i, Slot::new(key)),
        }
        self.live += 1;
        true
    }

    /// Removes `key`; whether it was there.
    pub fn remove(&mut self, key: &K) -> bool {
        // The common case: a take from the head.
        let at_front = self
            .slots
            .front()
            .is_some_and(|s| s.live() && s.key() == *key);
        if at_front {
            self.slots.pop_front();
            self.live -= 1;
            self.trim();
            return true;
        }
        let Ok(i) = self.search(key) else {
            return false;
        };
        let Some(slot) = self.slots.get_mut(i) else {
            return false;
        };
        if !slot.live() {
            return false;
        }
        slot.set_live(false);
        self.live -= 1;
        self.trim();
        if self.slots.len() >= COMPACT_MIN && self.slots.len() > 2 * self.live {
            self.slots.retain(Slot::live);
        }
        true
    }

    /// Drops tombstones at both ends.
    fn trim(&mut self) {
        while self.slots.front().is_some_and(|s| !s.live()) {
            self.slots.pop_front();
        }
        while self.slots.back().is_some_and(|s| !s.live()) {
            self.slots.pop_back();
        }
    }

    /// The live keys after `after` (all of them for `None`), ascending.
    pub fn iter_after(&self, after: Option<&K>) -> impl Iterator<Item = K> + '_ {
        let start = match after {
            None => 0,
            Some(k) => match self.search(k) {
                Ok(i) => i + 1,
                Err(i) => i,
            },
        };
        self.slots
            .range(start..)
            .filter(|s| s.live())
            .map(|s| s.key())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
        Walk(Option<u16>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u16..300).prop_map(Op::Insert),
            2 => (0u16..300).prop_map(Op::Remove),
            1 => proptest::option::of(0u16..300).prop_map(Op::Walk),
        ]
    }

    proptest! {
        /// A lane behaves exactly like a sorted set, whatever the order of operations.
        #[test]
        fn a_lane_behaves_as_a_sorted_set(ops in proptest::collection::vec(op(), 0..600)) {
            let mut lane: Lane<u16> = Lane::default();
            let mut model: BTreeSet<u16> = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(k) => prop_assert_eq!(lane.insert(k), model.insert(k)),
                    Op::Remove(k) => prop_assert_eq!(lane.remove(&k), model.remove(&k)),
                    Op::Walk(after) => {
                        let got: Vec<u16> = lane.iter_after(after.as_ref()).collect();
                        let want: Vec<u16> = match after {
                            None => model.iter().copied().collect(),
                            Some(a) => model.range(a + 1..).copied().collect(),
                        };
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(lane.len(), model.len());
                // Tombstones never outnumber live entries by much.
                prop_assert!(lane.slots.len() <= COMPACT_MIN.max(2 * lane.live + 1));
            }
        }
    }

    #[test]
    fn appends_and_head_takes_leave_no_tombstones() {
        let mut lane = Lane::default();
        for k in 0..1000u64 {
            lane.insert(k);
        }
        for k in 0..1000u64 {
            assert!(lane.remove(&k));
        }
        assert!(lane.is_empty());
        assert!(lane.slots.is_empty());
    }

    #[test]
    fn a_key_that_comes_back_takes_its_old_place() {
        let mut lane = Lane::default();
        for k in [1u64, 2, 3, 4, 5] {
            lane.insert(k);
        }
        assert!(lane.remove(&3));
        assert!(!lane.remove(&3));
        assert_eq!(lane.iter_after(None).collect::<Vec<_>>(), vec![1, 2, 4, 5]);
        assert!(lane.insert(3));
        assert!(!lane.insert(3));
        assert_eq!(
            lane.iter_after(None).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        assert_eq!(lane.iter_after(Some(&2)).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert!(lane.remove(&1));
        assert!(lane.insert(0));
        assert_eq!(
            lane.iter_after(None).collect::<Vec<_>>(),
            vec![0, 2, 3, 4, 5]
        );
    }
}
