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
    pub fn pick(
        &self,
        client: Option<ClientKey>,
        order: Order,
        max: usize,
        out: &mut Vec<K>,
        accept: impl FnMut(&K) -> bool,
    ) {
        let mine = client.and_then(|c| self.addressed.get(&c));
        match order {
            Order::Time => {
                let theirs = mine.map(|r| r.by_time.iter());
                merge(self.open.by_time.iter(), theirs, max, out, |k| *k, accept);
            }
            Order::Priority => {
                let theirs = mine.map(|r| r.by_priority.iter());
                merge(
                    self.open.by_priority.iter(),
                    theirs,
                    max,
                    out,
                    |(_, k)| *k,
                    accept,
                );
            }
        }
    }
}

/// Merges two ascending iterators, pushing at most `max` keys that `accept` takes.
fn merge<'a, T: Ord + 'a, K>(
    a: impl Iterator<Item = &'a T>,
    b: Option<impl Iterator<Item = &'a T>>,
    max: usize,
    out: &mut Vec<K>,
    key: impl Fn(&T) -> K,
    mut accept: impl FnMut(&K) -> bool,
) {
    let start = out.len();
    let Some(b) = b else {
        out.extend(a.map(key).filter(|k| accept(k)).take(max));
        return;
    };
    let mut a: Peekable<_> = a.peekable();
    let mut b: Peekable<_> = b.peekable();
    while out.len() - start < max {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => {
                if x <= y {
                    a.next()
                } else {
                    b.next()
                }
            }
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => None,
        };
        match next {
            Some(t) => {
                let k = key(t);
                if accept(&k) {
                    out.push(k);
                }
            }
            None => break,
        }
    }
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
        assert!(s.remove(Some(8), 10, 4));
        assert!(!s.has_addressed(8));
        assert!(!s.remove(Some(8), 10, 4));
    }
}
