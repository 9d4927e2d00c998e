//! [`IdHasher`] and [`IdMap`]: hash maps keyed by ids that are already well spread (sequential
//! message, delivery and queue numbers), hashed with one multiply instead of SipHash.
//!
//! Only for keys a client cannot choose to collide on purpose: ids the broker hands out, and
//! unknown ids that are merely looked up.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for integer keys that are already well spread: one multiply per integer.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A hash map keyed by ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_over_the_buckets() {
        let mut m: IdMap<u64, u64> = IdMap::default();
        for id in 0..10_000u64 {
            m.insert(id, id * 2);
        }
        assert!((0..10_000u64).all(|id| m.get(&id) == Some(&(id * 2))));
        // Neighbouring ids differ in the top bits too, which the map compares first (the
        // identity would leave them all zero and every probe would compare the keys).
        let hash = |n: u64| {
            let mut h = IdHasher::default();
            h.write_u64(n);
            h.finish()
        };
        let top_bits: std::collections::HashSet<u64> = (0..64).map(|n| hash(n) >> 57).collect();
        assert!(top_bits.len() > 32, "{top_bits:?}");
    }
}
