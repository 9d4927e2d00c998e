//! Ready indexes: the messages a receive may pick, in both orders, split by receiver.
//!
//! Each index keeps its entries in one [`Lane`] per priority in use, each sorted by message id:
//! a receive in priority order walks the lanes from the highest priority down, one in time
//! order merges the (usually one or two) lanes in use. Entries are keyed by message id, so a message
//! that comes back (nack, expiry, disconnect) lands in its old position. The split by receiver
//! lets a client read the unaddressed entries merged with the ones addressed to it, never
//! scanning messages meant for others.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::iter::Peekable;

use ferry_protocol::{Order, MAX_PRIORITY, MIN_PRIORITY};

use smallvec::SmallVec;

use super::lane::{Lane, LaneKey};
use super::ClientKey;

/// The lane key of `priority` (out-of-range priorities, which the store never accepts, are
/// clamped rather than trusted).
fn clamp(priority: u8) -> u8 {
    priority.clamp(MIN_PRIORITY, MAX_PRIORITY)
}

/// Entries of one index in both orders. `K` sorts by message id first.
///
/// One lane per priority in use, highest priority first, inline when there is one (the common
/// case): a client with a few addressed messages on a queue costs a few dozen bytes, not a lane
/// for every priority.
#[derive(Debug)]
pub struct Ready<K: LaneKey> {
    lanes: SmallVec<[(u8, Lane<K>); 1]>,
    live: usize,
}

impl<K: LaneKey> Default for Ready<K> {
    fn default() -> Self {
        Ready {
            lanes: SmallVec::new(),
            live: 0,
        }
    }
}

impl<K: LaneKey> Ready<K> {
    fn insert(&mut self, priority: u8, key: K) {
        let p = clamp(priority);
        // Lanes are sorted by priority, highest first.
        let i = match self.lanes.iter().position(|(q, _)| *q <= p) {
            Some(i) if self.lanes.get(i).is_some_and(|(q, _)| *q == p) => i,
            Some(i) => {
                self.lanes.insert(i, (p, Lane::default()));
                i
            }
            None => {
                self.lanes.push((p, Lane::default()));
                self.lanes.len() - 1
            }
        };
        if let Some((_, lane)) = self.lanes.get_mut(i) {
            if lane.insert(key) {
                self.live += 1;
            }
        }
    }

    fn remove(&mut self, priority: u8, key: K) -> bool {
        let p = clamp(priority);
        let Some(i) = self.lanes.iter().position(|(q, _)| *q == p) else {
            return false;
        };
        let Some((_, lane)) = self.lanes.get_mut(i) else {
            return false;
        };
        let found = lane.remove(&key);
        if found {
            self.live -= 1;
            if lane.is_empty() {
                // An empty lane holds nothing (its tombstones went with its last entry).
                self.lanes.remove(i);
            }
        }
        found
    }

    fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Every entry after `after` in time (key) order.
    fn by_time(&self, after: Option<K>) -> TimeMerge<impl Iterator<Item = K> + '_> {
        let lanes = self
            .lanes
            .iter()
            .map(|(_, l)| l.iter_after(after.as_ref()).peekable())
            .collect();
        TimeMerge { lanes }
    }

    /// Every entry after `after` in priority order (highest first, then key order).
    fn by_priority(
        &self,
        after: Option<(Reverse<u8>, K)>,
    ) -> impl Iterator<Item = (Reverse<u8>, K)> + '_ {
        self.lanes
            .iter()
            .filter_map(move |(p, lane)| {
                let p = *p;
                let from = match after {
                    None => None,
                    // Lanes above the cursor's priority were walked already.
                    Some((Reverse(q), _)) if p > q => return None,
                    Some((Reverse(q), k)) if p == q => Some(k),
                    Some(_) => None,
                };
                Some(lane.iter_after(from.as_ref()).map(move |k| (Reverse(p), k)))
            })
            .flatten()
    }

    fn all(&self) -> impl Iterator<Item = K> + '_ {
        self.lanes.iter().flat_map(|(_, l)| l.iter_after(None))
    }
}

/// Ascending merge of a few ascending iterators (one per lane in use).
struct TimeMerge<I: Iterator> {
    lanes: Vec<Peekable<I>>,
}

impl<K: Ord + Copy, I: Iterator<Item = K>> Iterator for TimeMerge<I> {
    type Item = K;

    fn next(&mut self) -> Option<K> {
        if let [only] = self.lanes.as_mut_slice() {
            return only.next();
        }
        let mut best: Option<(usize, K)> = None;
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if let Some(&k) = lane.peek() {
                if best.is_none_or(|(_, b)| k < b) {
                    best = Some((i, k));
                }
            }
        }
        let (i, _) = best?;
        self.lanes.get_mut(i).and_then(Iterator::next)
    }
}

/// A ready index split by receiver: unaddressed entries, and per client the entries addressed
/// to it.
#[derive(Debug)]
pub struct Split<K: LaneKey> {
    open: Ready<K>,
    addressed: HashMap<ClientKey, Ready<K>>,
}

impl<K: LaneKey> Default for Split<K> {
    fn default() -> Self {
        Split {
            open: Ready::default(),
            addressed: HashMap::new(),
        }
    }
}

impl<K: LaneKey> Split<K> {
    /// Adds an entry (or puts it back at its position).
    pub fn insert(&mut self, receiver: Option<ClientKey>, priority: u8, key: K) {
        match receiver {
            None => self.open.insert(priority, key),
            Some(c) => self.addressed.entry(c).or_default().insert(priority, key),
        }
    }

    /// Removes an entry; whether it was there.
    pub fn remove(&mut self, receiver: Option<ClientKey>, priority: u8, key: K) -> bool {
        match receiver {
            None => self.open.remove(priority, key),
            Some(c) => {
                let Some(r) = self.addressed.get_mut(&c) else {
                    return false;
                };
                let found = r.remove(priority, key);
                if r.is_empty() {
                    // Keep the map as small as the set of clients with mail waiting.
                    self.addressed.remove(&c);
                }
                found
            }
        }
    }

    /// Whether nothing at all is ready.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.addressed.is_empty()
    }

    /// Whether entries addressed to `client` are ready.
    pub fn has_addressed(&self, client: ClientKey) -> bool {
        self.addressed.contains_key(&client)
    }

    /// All entries (for a forced queue delete).
    pub fn all(&self) -> Vec<K> {
        let mut v: Vec<K> = self.open.all().collect();
        for r in self.addressed.values() {
            v.extend(r.all());
        }
        v
    }

    /// Up to `max` entries eligible for `client` (unaddressed, or addressed to it), in `order`,
    /// passing over the entries `accept` refuses (a selector's): the walk goes on in order until
    /// `max` are accepted or the index ends.
    #[cfg(test)]
    pub fn pick(
        &self,
        client: Option<ClientKey>,
        order: Order,
        max: usize,
        out: &mut Vec<K>,
        accept: impl FnMut(&K) -> bool,
    ) {
        self.walk(client, order, None, max, usize::MAX, out, accept);
    }

    /// As [`Split::pick`], starting after `from` (where an earlier walk stopped) and examining
    /// at most `budget` entries. Returns where this walk stopped (the last entry examined) and
    /// whether it reached the end of the index.
    #[allow(clippy::too_many_arguments)]
    pub fn walk(
        &self,
        client: Option<ClientKey>,
        order: Order,
        from: Option<Cursor<K>>,
        max: usize,
        budget: usize,
        out: &mut Vec<K>,
        accept: impl FnMut(&K) -> bool,
    ) -> (Option<Cursor<K>>, bool) {
        let mine = client.and_then(|c| self.addressed.get(&c));
        match order {
            Order::Time => {
                let after = match from {
                    Some(Cursor::Time(k)) => Some(k),
                    _ => None,
                };
                let theirs = mine.map(|r| r.by_time(after));
                let open = self.open.by_time(after);
                let (last, end) = merge(open, theirs, max, budget, out, |k| *k, accept);
                (last.map(Cursor::Time), end)
            }
            Order::Priority => {
                let after = match from {
                    Some(Cursor::Priority(p, k)) => Some((p, k)),
                    _ => None,
                };
                let theirs = mine.map(|r| r.by_priority(after));
                let open = self.open.by_priority(after);
                let (last, end) = merge(open, theirs, max, budget, out, |(_, k)| *k, accept);
                (last.map(|(p, k)| Cursor::Priority(p, k)), end)
            }
        }
    }
}

/// One receiver's entries in a browse's order.
type Stream<'a, K> = Box<dyn Iterator<Item = (Reverse<u8>, K)> + 'a>;

impl<K: LaneKey> Split<K> {
    /// The oldest entry (smallest key) of any receiver.
    pub fn oldest(&self) -> Option<K> {
        std::iter::once(&self.open)
            .chain(self.addressed.values())
            .filter_map(|r| r.by_time(None).next())
            .min()
    }

    /// Up to `max` entries of every receiver after `from`, in `order`, examining at most
    /// `budget` and keeping those `accept` takes (a browse: the operator sees everything).
    /// Returns the last entry examined and whether the index ended.
    pub fn browse(
        &self,
        order: Order,
        from: Option<Cursor<K>>,
        max: usize,
        budget: usize,
        out: &mut Vec<K>,
        mut accept: impl FnMut(&K) -> bool,
    ) -> (Option<Cursor<K>>, bool) {
        let readies: Vec<&Ready<K>> = std::iter::once(&self.open)
            .chain(self.addressed.values())
            .collect();
        let after = match from {
            Some(Cursor::Priority(p, k)) => Some((p, k)),
            Some(Cursor::Time(k)) => Some((Reverse(0), k)),
            None => None,
        };
        self.browse_from(order, &readies, after, max, budget, out, &mut accept)
    }

    #[allow(clippy::too_many_arguments)]
    fn browse_from(
        &self,
        order: Order,
        readies: &[&Ready<K>],
        after: Option<(Reverse<u8>, K)>,
        max: usize,
        budget: usize,
        out: &mut Vec<K>,
        accept: &mut impl FnMut(&K) -> bool,
    ) -> (Option<Cursor<K>>, bool) {
        // One sorted stream per receiver, merged by taking the smallest head each step (few
        // receivers have addressed messages waiting, so a linear pick is enough).
        let mut streams: Vec<Peekable<Stream<'_, K>>> = readies
            .iter()
            .map(|r| {
                let it: Stream<'_, K> = match order {
                    Order::Time => {
                        Box::new(r.by_time(after.map(|(_, k)| k)).map(|k| (Reverse(0), k)))
                    }
                    Order::Priority => Box::new(r.by_priority(after)),
                };
                it.peekable()
            })
            .collect();
        let start = out.len();
        let mut examined = 0;
        let mut last = None;
        while out.len() - start < max && examined < budget {
            let mut best: Option<(usize, (Reverse<u8>, K))> = None;
            for (i, s) in streams.iter_mut().enumerate() {
                if let Some(&t) = s.peek() {
                    if best.is_none_or(|(_, b)| t < b) {
                        best = Some((i, t));
                    }
                }
            }
            let Some((i, t)) = best else {
                return (last, true);
            };
            if let Some(s) = streams.get_mut(i) {
                s.next();
            }
            examined += 1;
            last = Some(match order {
                Order::Time => Cursor::Time(t.1),
                Order::Priority => Cursor::Priority(t.0, t.1),
            });
            if accept(&t.1) {
                out.push(t.1);
            }
        }
        let end = streams.iter_mut().all(|s| s.peek().is_none());
        (last, end)
    }
}

/// Where a walk over a ready index stopped: the last entry it examined, in the walk's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor<K> {
    /// Time order: the entry's key.
    Time(K),
    /// Priority order: the entry's priority and key.
    Priority(Reverse<u8>, K),
}

/// Merges two ascending iterators, pushing at most `max` keys that `accept` takes and examining
/// at most `budget` entries. Returns the last entry examined and whether both ran out.
fn merge<T: Ord + Copy, K>(
    a: impl Iterator<Item = T>,
    b: Option<impl Iterator<Item = T>>,
    max: usize,
    budget: usize,
    out: &mut Vec<K>,
    key: impl Fn(&T) -> K,
    mut accept: impl FnMut(&K) -> bool,
) -> (Option<T>, bool) {
    let start = out.len();
    let mut a: Peekable<_> = a.peekable();
    let mut b = b.map(Iterator::peekable);
    let mut last = None;
    let mut examined = 0;
    while out.len() - start < max && examined < budget {
        let from_a = match (a.peek(), b.as_mut().and_then(Peekable::peek)) {
            (Some(x), Some(y)) => x <= y,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return (last, true),
        };
        let next = if from_a {
            a.next()
        } else {
            b.as_mut().and_then(Iterator::next)
        };
        let Some(t) = next else {
            return (last, true);
        };
        examined += 1;
        last = Some(t);
        let k = key(&t);
        if accept(&k) {
            out.push(k);
        }
    }
    let end = a.peek().is_none() && b.as_mut().and_then(Peekable::peek).is_none();
    (last, end)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Message id, addressed to client 1 or 2 (or nobody), priority.
        Insert(u16, Option<u32>, u8),
        Remove(u16),
        /// A walk for client 1 or 2 (or nobody), in steps of this many entries.
        Walk(Option<u32>, bool, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let client = proptest::option::of(1u32..=2);
        prop_oneof![
            4 => (0u16..200, client.clone(), MIN_PRIORITY..=MAX_PRIORITY)
                .prop_map(|(id, c, p)| Op::Insert(id, c, p)),
            2 => (0u16..200).prop_map(Op::Remove),
            1 => (client, any::<bool>(), 1usize..20).prop_map(|(c, t, b)| Op::Walk(c, t, b)),
        ]
    }

    proptest! {
        /// Whatever the inserts and removals, a walk (resumed in steps) yields exactly the
        /// entries a client may see, in time or priority order, each once.
        #[test]
        fn walks_match_a_sorted_model(ops in proptest::collection::vec(op(), 0..400)) {
            let mut index: Split<u16> = Split::default();
            let mut model: BTreeMap<u16, (Option<u32>, u8)> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(id, c, p) => {
                        if let std::collections::btree_map::Entry::Vacant(v) = model.entry(id) {
                            v.insert((c, p));
                            index.insert(c, p, id);
                        }
                    }
                    Op::Remove(id) => {
                        let want = model.remove(&id);
                        let (c, p) = want.unwrap_or((None, MIN_PRIORITY));
                        prop_assert_eq!(index.remove(c, p, id), want.is_some());
                    }
                    Op::Walk(client, time, budget) => {
                        let mut want: Vec<(Reverse<u8>, u16)> = model
                            .iter()
                            .filter(|(_, (c, _))| c.is_none() || *c == client)
                            .map(|(id, (_, p))| (Reverse(if time { 0 } else { *p }), *id))
                            .collect();
                        want.sort_unstable();
                        let want: Vec<u16> = want.into_iter().map(|(_, id)| id).collect();
                        let order = if time { Order::Time } else { Order::Priority };
                        let (mut got, mut from) = (Vec::new(), None);
                        loop {
                            let (last, end) =
                                index.walk(client, order, from, usize::MAX, budget, &mut got, |_| true);
                            from = last;
                            if end {
                                break;
                            }
                        }
                        prop_assert_eq!(got, want);
                    }
                }
            }
            prop_assert_eq!(index.is_empty(), model.is_empty());
        }
    }

    #[test]
    fn picks_merged_in_both_orders() {
        let mut s: Split<u64> = Split::default();
        s.insert(None, 5, 1);
        s.insert(Some(7), 9, 2);
        s.insert(None, 9, 3);
        s.insert(Some(8), 10, 4);
        s.insert(Some(7), 5, 5);
        let mut out = Vec::new();
        s.pick(Some(7), Order::Time, 10, &mut out, |_| true);
        assert_eq!(out, vec![1, 2, 3, 5]);
        out.clear();
        s.pick(Some(7), Order::Priority, 10, &mut out, |_| true);
        assert_eq!(out, vec![2, 3, 1, 5]);
        out.clear();
        s.pick(None, Order::Priority, 1, &mut out, |_| true);
        assert_eq!(out, vec![3]);
        out.clear();
        s.pick(Some(7), Order::Time, 2, &mut out, |k| k % 2 == 1);
        assert_eq!(out, vec![1, 3]);
        out.clear();
        s.pick(Some(7), Order::Priority, 10, &mut out, |k| *k != 3);
        assert_eq!(out, vec![2, 1, 5]);
        out.clear();
        s.pick(None, Order::Time, 10, &mut out, |k| *k == 3);
        assert_eq!(out, vec![3]);
        // A walk in steps of two entries, resumed where the last one stopped, sees every
        // eligible entry once, in order.
        for order in [Order::Time, Order::Priority] {
            let (mut all, mut steps) = (Vec::new(), Vec::new());
            s.pick(Some(7), order, 10, &mut all, |_| true);
            let mut from = None;
            loop {
                let mut got = Vec::new();
                let (last, end) = s.walk(Some(7), order, from, 10, 2, &mut got, |_| true);
                assert!(got.len() <= 2);
                steps.extend(got);
                from = last;
                if end {
                    break;
                }
            }
            assert_eq!(steps, all, "{order:?}");
        }
        out.clear();
        let (last, end) = s.walk(Some(7), Order::Time, None, 1, 10, &mut out, |k| *k > 2);
        assert_eq!(
            (out.as_slice(), last, end),
            (&[3][..], Some(Cursor::Time(3)), false)
        );
        assert!(s.remove(Some(8), 10, 4));
        assert!(!s.has_addressed(8));
        assert!(!s.remove(Some(8), 10, 4));
    }
}
