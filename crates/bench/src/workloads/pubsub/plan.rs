//! What the publisher puts on each message and what each subscription selects, so that the
//! number of deliveries every message causes is known exactly.
//!
//! Message `n` (a run-wide sequence number) carries `region = 'r<n mod R>'` and
//! `amount = (n div R) mod 100`. Subscription `i` selects, when selectors are on,
//! `region = 'r<i mod R>' AND amount > T`: a message reaches the subscriptions of its region if
//! its amount is above `T`. Without selectors every subscription gets every message (the
//! selector workload still sends the properties, so that both its variants publish the same
//! bytes; plain fan-out sends bare bodies, as other brokers' fan-out benchmarks do).

/// The selector plan of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorPlan {
    /// Subscriptions.
    pub subscriptions: u32,
    /// Selectors on (`true`) or plain subscriptions.
    pub selectors: bool,
    /// Distinct regions, R.
    pub regions: u32,
    /// Amount threshold, T: a message matches when its amount (0 to 99) is above it.
    pub min_amount: i64,
    /// Whether messages carry the `region` and `amount` properties.
    pub with_properties: bool,
}

impl SelectorPlan {
    /// Every subscription gets every message: fan-out.
    pub fn fanout(subscriptions: u32) -> Self {
        SelectorPlan {
            subscriptions,
            selectors: false,
            regions: 1,
            min_amount: -1,
            with_properties: false,
        }
    }

    /// The selector of subscription `i`; empty without selectors.
    pub fn selector(&self, i: u32) -> String {
        if !self.selectors {
            return String::new();
        }
        format!(
            "region = 'r{}' AND amount > {}",
            i % self.regions.max(1),
            self.min_amount
        )
    }

    /// The region and amount of message `n`.
    pub fn properties(&self, n: u64) -> (String, i64) {
        let regions = u64::from(self.regions.max(1));
        // Below 100: fits any integer type.
        let amount = ((n / regions) % 100) as i64;
        (format!("r{}", n % regions), amount)
    }

    /// How many subscriptions message `n` reaches.
    pub fn deliveries(&self, n: u64) -> u64 {
        let all = u64::from(self.subscriptions);
        if !self.selectors {
            return all;
        }
        let regions = u64::from(self.regions.max(1));
        let region = n % regions;
        let amount = ((n / regions) % 100) as i64;
        if amount <= self.min_amount {
            return 0;
        }
        // Subscriptions i < all with i mod R == region.
        all / regions + u64::from(region < all % regions)
    }

    /// The share of (message, subscription) pairs that match, over a full cycle of messages.
    pub fn match_fraction(&self) -> f64 {
        let all = u64::from(self.subscriptions);
        if all == 0 {
            return 0.0;
        }
        let cycle = 100 * u64::from(self.regions.max(1));
        let matched: u64 = (0..cycle).map(|n| self.deliveries(n)).sum();
        matched as f64 / (cycle * all) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_reaches_everyone() {
        let p = SelectorPlan::fanout(7);
        assert_eq!(p.selector(3), "");
        assert_eq!(p.deliveries(12345), 7);
        assert_eq!(p.match_fraction(), 1.0);
    }

    #[test]
    fn selectors_match_a_known_share() {
        let p = SelectorPlan {
            subscriptions: 10,
            selectors: true,
            regions: 4,
            min_amount: 10,
            with_properties: true,
        };
        assert_eq!(p.selector(6), "region = 'r2' AND amount > 10");
        // Message 0: region r0, amount 0: nobody.
        assert_eq!(p.properties(0), ("r0".to_string(), 0));
        assert_eq!(p.deliveries(0), 0);
        // Message 4 * 11 + 1: region r1, amount 11: subscriptions 1, 5, 9.
        assert_eq!(p.properties(45), ("r1".to_string(), 11));
        assert_eq!(p.deliveries(45), 3);
        // Region r3: subscriptions 3 and 7.
        assert_eq!(p.deliveries(4 * 50 + 3), 2);
        // 89 of 100 amounts pass, each message reaches its region's subscriptions.
        assert!((p.match_fraction() - 0.89 / 4.0).abs() < 1e-9);
        let plain = SelectorPlan {
            selectors: false,
            ..p
        };
        assert_eq!(plain.deliveries(0), 10);
    }
}
