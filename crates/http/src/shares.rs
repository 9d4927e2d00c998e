//! Each client's share of the API's request slots: one IP address may have at most
//! [`HttpLimits::max_requests_per_address`] requests served at once, so that one client (a
//! runaway script, a hostile peer) cannot take every slot and lock the others out, the
//! operator's console among them. A request over its address's share is answered 429 at once,
//! saying so, while other addresses are still served.
//!
//! An address is the peer's IP address as the socket sees it (an IPv4 address mapped into IPv6
//! counts as the IPv4 one). Headers such as `X-Forwarded-For` are not believed: any client can
//! write them, and believing them would let one client pass for many. So clients behind one
//! proxy, or all on one machine's loopback, share one address and one share; the operator who
//! wants one address to use every slot sets the share to the whole.
//!
//! [`HttpLimits::max_requests_per_address`]: crate::HttpLimits::max_requests_per_address

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// The requests each address has in progress. An address is dropped from the map when its last
/// request ends, so the map holds no more addresses than there are requests in progress.
pub struct Shares {
    per_address: usize,
    counts: Mutex<HashMap<IpAddr, usize>>,
}

/// One request's place in its address's share; given back when dropped.
pub struct Share {
    shares: Arc<Shares>,
    ip: IpAddr,
}

impl Shares {
    /// Shares of at most `per_address` requests each.
    pub fn new(per_address: usize) -> Arc<Shares> {
        Arc::new(Shares {
            per_address,
            counts: Mutex::new(HashMap::new()),
        })
    }

    fn counts(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more request from `ip`; `None` when its share is full.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Share> {
        let ip = ferry_broker::admission::client_key(ip);
        let mut counts = self.counts();
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.per_address {
            if *count == 0 {
                counts.remove(&ip);
            }
            return None;
        }
        *count += 1;
        Some(Share {
            shares: self.clone(),
            ip,
        })
    }

    /// The requests `ip` has in progress.
    pub fn in_progress(&self, ip: IpAddr) -> usize {
        self.counts()
            .get(&ferry_broker::admission::client_key(ip))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut counts = self.shares.counts();
        if let Some(count) = counts.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_share_and_no_more_while_others_get_theirs() {
        let shares = Shares::new(2);
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let first = shares.take(a).unwrap();
        let _second = shares.take(a).unwrap();
        assert!(shares.take(a).is_none(), "a third request from one address");
        assert!(shares.take(b).is_some(), "another address is still served");
        drop(first);
        assert_eq!(shares.in_progress(a), 1);
        assert!(
            shares.take(a).is_some(),
            "a place given back is taken again"
        );
    }

    #[test]
    fn a_mapped_ipv4_address_is_the_ipv4_one_and_idle_addresses_are_forgotten() {
        let shares = Shares::new(1);
        let v4 = IpAddr::from([192, 0, 2, 7]);
        let mapped = IpAddr::from(std::net::Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        let held = shares.take(v4).unwrap();
        assert!(shares.take(mapped).is_none(), "the same client over IPv6");
        drop(held);
        assert_eq!(shares.in_progress(v4), 0);
        assert!(
            shares.counts().is_empty(),
            "an address with nothing in progress is kept"
        );
    }

    #[test]
    fn the_addresses_of_one_ipv6_network_share_one_share() {
        let shares = Shares::new(1);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other_64: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _held = shares.take(one).unwrap();
        assert!(shares.take(same_64).is_none(), "another address of the /64");
        assert!(shares.take(other_64).is_some(), "another /64");
    }
}
