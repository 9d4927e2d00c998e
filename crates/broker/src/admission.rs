//! Who may come in: connections per IP address (`max_connections_per_address`) and new client
//! names registered per IP address (`max_new_clients_per_sec`).
//!
//! A new client name is one the store does not know yet: connecting under it registers it,
//! which is written to the log and kept. Each address has a token bucket of ten seconds' worth
//! of the rate, refilled continuously; a connect under a new name takes a token, and without
//! one is refused with `LimitExceeded` (names already known are never refused). One connection
//! carries one session, so it registers at most one name: the per-address bucket is what bounds
//! a client that opens connection after connection.
//!
//! Every limit "per address" (these, the failed authentications of [`crate::access`], the HTTP
//! listener's shares) counts by [`client_key`]: an IPv6 client counts by its /64 network.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The key under which limits per client address count `ip`: an IPv4 address as it is (an
/// IPv4-mapped IPv6 address as its IPv4 address), an IPv6 address as its /64 network. One
/// IPv6 host is usually given a whole /64 and may use any address in it, so counting each
/// address on its own would let one client take as many shares as it likes.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 => v4,
    }
}

/// Seconds of the rate a bucket holds (the largest burst).
const BURST_SECONDS: f64 = 10.0;

/// What is known about one address.
struct Entry {
    /// Its open connections.
    connections: u32,
    /// New names it may still register now.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    refilled: Instant,
}

/// Per-address accounting.
pub struct Admission {
    max_per_address: u32,
    new_per_sec: u32,
    /// Entries without connections are dropped once the map holds this many.
    prune_at: usize,
    addresses: Mutex<HashMap<IpAddr, Entry>>,
}

/// A connection's place in its address's count; given back when dropped.
pub struct AddressSlot {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Admission {
    /// At most `max_per_address` connections per address (0: no limit) and `new_per_sec` new
    /// names per address and second (0: no limit); `max_connections` sizes the map.
    pub fn new(max_per_address: u32, new_per_sec: u32, max_connections: u32) -> Admission {
        Admission {
            max_per_address,
            new_per_sec,
            prune_at: (max_connections as usize).saturating_mul(2).max(1024),
            addresses: Mutex::new(HashMap::new()),
        }
    }

    fn addresses(&self) -> MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.addresses.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn capacity(&self) -> f64 {
        f64::from(self.new_per_sec) * BURST_SECONDS
    }

    /// Takes a connection slot for `ip`; `None` when the address is at its limit.
    pub fn connect(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let ip = client_key(ip);
        let mut map = self.addresses();
        if map.len() >= self.prune_at && !map.contains_key(&ip) {
            map.retain(|_, e| e.connections > 0);
        }
        let capacity = self.capacity();
        let entry = map.entry(ip).or_insert_with(|| Entry {
            connections: 0,
            tokens: capacity,
            refilled: Instant::now(),
        });
        if self.max_per_address != 0 && entry.connections >= self.max_per_address {
            return None;
        }
        entry.connections += 1;
        Some(AddressSlot {
            admission: self.clone(),
            ip,
        })
    }

    /// Whether `ip` may register one more new client name now (taking a token if so).
    pub fn allow_new_client(&self, ip: IpAddr) -> bool {
        if self.new_per_sec == 0 {
            return true;
        }
        let ip = client_key(ip);
        let capacity = self.capacity();
        let mut map = self.addresses();
        let now = Instant::now();
        let entry = map.entry(ip).or_insert_with(|| Entry {
            connections: 0,
            tokens: capacity,
            refilled: now,
        });
        let elapsed = now.duration_since(entry.refilled).as_secs_f64();
        entry.tokens = (entry.tokens + elapsed * f64::from(self.new_per_sec)).min(capacity);
        entry.refilled = now;
        if entry.tokens >= 1.0 {
            entry.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether new client names are limited at all.
    pub fn limits_new_clients(&self) -> bool {
        self.new_per_sec != 0
    }

    /// The per-address connection limit (0: none).
    pub fn max_per_address(&self) -> u32 {
        self.max_per_address
    }

    /// The new-name rate per address (0: none).
    pub fn new_per_sec(&self) -> u32 {
        self.new_per_sec
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut map = self.admission.addresses();
        if let Some(e) = map.get_mut(&self.ip) {
            e.connections = e.connections.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn connections_per_address_are_limited_and_given_back() {
        let a = Arc::new(Admission::new(2, 0, 10));
        let one = a.connect(ip(1)).expect("first");
        let _two = a.connect(ip(1)).expect("second");
        assert!(a.connect(ip(1)).is_none(), "third from the same address");
        assert!(
            a.connect(ip(2)).is_some(),
            "another address is not affected"
        );
        drop(one);
        assert!(
            a.connect(ip(1)).is_some(),
            "a closed connection frees its slot"
        );
        let unlimited = Arc::new(Admission::new(0, 0, 10));
        let slots: Vec<_> = (0..100).map(|_| unlimited.connect(ip(1))).collect();
        assert!(slots.iter().all(Option::is_some));
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        let key = |s: &str| client_key(s.parse().unwrap());
        assert_eq!(key("2001:db8:1:2:3:4:5:6"), key("2001:db8:1:2::"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_eq!(key("192.0.2.7"), "192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(key("::1"), key("::2"), "loopback is one /64 like any other");
        let a = Arc::new(Admission::new(2, 0, 10));
        let _one = a.connect("2001:db8::1".parse().unwrap()).expect("first");
        let _two = a.connect("2001:db8::2".parse().unwrap()).expect("second");
        assert!(
            a.connect("2001:db8::3".parse().unwrap()).is_none(),
            "a third address of the same /64"
        );
        assert!(a.connect("2001:db8:0:1::1".parse().unwrap()).is_some());
    }

    #[test]
    fn new_names_per_address_come_in_bursts_of_ten_seconds_worth() {
        let a = Admission::new(0, 3, 10);
        for _ in 0..30 {
            assert!(a.allow_new_client(ip(1)));
        }
        assert!(!a.allow_new_client(ip(1)), "the 31st at once");
        assert!(
            a.allow_new_client(ip(2)),
            "another address has its own bucket"
        );
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(a.allow_new_client(ip(1)), "refilled at 3 a second");
        assert!(Admission::new(0, 0, 10).allow_new_client(ip(1)));
    }
}
