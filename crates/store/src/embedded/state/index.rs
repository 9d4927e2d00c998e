//! Ready indexes: the messages a receive may pick, in both orders, split by receiver.
//!
//! Each index keeps every ready entry twice, by id (time order) and by priority then id, so a
//! receive in either order walks a `BTreeSet` from its start instead of sorting. Entries are
//! keyed by message id, so a message that comes back (nack, expiry, disconnect) lands in its old
//! position. The split by receiver lets a client read the unaddressed entries merged with the
//! ones addressed to it, never scanning messages meant for others.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::iter::Peekable;
use std::ops::Bound::{Excluded, Unbounded};

use ferry_protocol::Order;

use super::ClientKey;

/// Entries of one index in both orders. `K` sorts by message id first.
#[derive(Debug)]
pub struct Ready<K: Ord + Copy> {
    by_time: BTreeSet<K>,
    by_priority: BTreeSet<(Reverse<u8>, K)>,
}

impl<K: Ord + Copy> Default for Ready<K> {
    fn default() -> Self {
        Ready {
            by_time: BTreeSet::new(),
            by_priority: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Copy> Ready<K> {
    fn insert(&mut self, priority: u8, key: K) {
        self.by_time.insert(key);
        self.by_priority.insert((Reverse(priority), key));
    }

    fn remove(&mut self, priority: u8, key: K) -> bool {
        self.by_priority.remove(&(Reverse(priority), key));
        self.by_time.remove(&key)
    }

    fn is_empty(&self) -> bool {
        self.by_time.is_empty()
    }
}

/// A ready index split by receiver: unaddressed entries, and per client the entries addressed
/// to it.
#[derive(Debug)]
pub struct Split<K: Ord + Copy> {
    open: Ready<K>,
    addressed: HashMap<ClientKey, Ready<K>>,
}

impl<K: Ord + Copy> Default for Split<K> {
    fn default() -> Self {
        Split {
            open: Ready::default(),
            addressed: HashMap::new(),
        }
    }
}

impl<K: Ord + Copy> Split<K> {
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
        let mut v: Vec<K> = self.open.by_time.iter().copied().collect();
        for r in self.addressed.values() {
            v.extend(r.by_time.iter().copied());
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
                    Some(Cursor::Time(k)) => Excluded(k),
                    _ => Unbounded,
                };
                let theirs = mine.map(|r| r.by_time.range((after, Unbounded)));
                let open = self.open.by_time.range((after, Unbounded));
                let (last, end) = merge(open, theirs, max, budget, out, |k| *k, accept);
                (last.map(Cursor::Time), end)
            }
            Order::Priority => {
                let after = match from {
                    Some(Cursor::Priority(p, k)) => Excluded((p, k)),
                    _ => Unbounded,
                };
                let theirs = mine.map(|r| r.by_priority.range((after, Unbounded)));
                let open = self.open.by_priority.range((after, Unbounded));
                let (last, end) = merge(open, theirs, max, budget, out, |(_, k)| *k, accept);
                (last.map(|(p, k)| Cursor::Priority(p, k)), end)
            }
        }
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
fn merge<'a, T: Ord + Copy + 'a, K>(
    a: impl Iterator<Item = &'a T>,
    b: Option<impl Iterator<Item = &'a T>>,
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
        last = Some(*t);
        let k = key(t);
        if accept(&k) {
            out.push(k);
        }
    }
    let end = a.peek().is_none() && b.as_mut().and_then(Peekable::peek).is_none();
    (last, end)
}

#[cfg(test)]
mod tests {
    use super::*;

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
