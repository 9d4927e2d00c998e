//! Topologies: how many locations of each kind, which product families each supplier offers,
//! and how often each interaction starts; and from these the model of the run: messages of
//! each type per second, which the auditor holds the run to.

use std::collections::BTreeMap;

use super::spec::{Interaction, Kind, MessageType, HORIZONTAL_RATES, VERTICAL_COEFFICIENTS};

/// Where the load comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// `horizontal`, `vertical` or `freeform`.
    pub name: &'static str,
    /// The scale.
    pub base: u32,
    /// Supermarkets.
    pub sm: u32,
    /// Distribution centers (each supplies `ceil(sm / dc)` supermarkets).
    pub dc: u32,
    /// Suppliers.
    pub sp: u32,
    /// HQ instances.
    pub hq: u32,
    /// Product families.
    pub families: u32,
    /// The families each supplier offers.
    pub offers: Vec<Vec<u32>>,
    /// Interactions started per second: per initiating location for 1, 2, 4 and 5, in all for
    /// 3, 6 and 7 (0: the interaction is off).
    pub rates: [f64; 7],
}

impl Topology {
    /// Horizontal scaling: |SM| = BASE, |DC| = ceil(BASE/5), |SP| = round(0.4 BASE),
    /// |HQ| = ceil(BASE/10), BASE families, 5 per supplier; fixed rates per location.
    pub fn horizontal(base: u32) -> Topology {
        let base = base.max(1);
        let sp = ((0.4 * f64::from(base)).round() as u32).max(1);
        let families = base;
        Topology {
            name: "horizontal",
            base,
            sm: base,
            dc: base.div_ceil(5),
            sp,
            hq: base.div_ceil(10),
            families,
            // Supplier j offers families 5j .. 5j+4 (mod the count): every family is offered
            // by 2 suppliers when 5 |SP| = 2 BASE.
            offers: (0..sp)
                .map(|j| {
                    let mut f: Vec<u32> = (0..5).map(|m| (5 * j + m) % families).collect();
                    f.sort_unstable();
                    f.dedup();
                    f
                })
                .collect(),
            rates: HORIZONTAL_RATES,
        }
    }

    /// Vertical scaling: 10 SM, 2 DC, 5 SP, 2 HQ, 100 families, each supplier offering half
    /// of them; rates grow as `c_i x BASE`.
    pub fn vertical(base: u32) -> Topology {
        let base = base.max(1);
        let mut rates = VERTICAL_COEFFICIENTS;
        for r in &mut rates {
            *r *= f64::from(base);
        }
        Topology {
            name: "vertical",
            base,
            sm: 10,
            dc: 2,
            sp: 5,
            hq: 2,
            families: 100,
            // Suppliers 0, 2, 4 offer the even families, 1 and 3 the odd ones.
            offers: (0..5)
                .map(|j| (0..100).filter(|f| f % 2 == j % 2).collect())
                .collect(),
            rates,
        }
    }

    /// Freeform: the counts and rates given; `families_per_sp` families each, round robin.
    pub fn freeform(
        sm: u32,
        dc: u32,
        sp: u32,
        hq: u32,
        families: u32,
        families_per_sp: u32,
        rates: [f64; 7],
    ) -> Topology {
        let (sm, dc, sp, hq, families) =
            (sm.max(1), dc.max(1), sp.max(1), hq.max(1), families.max(1));
        Topology {
            name: "freeform",
            base: sm,
            sm,
            dc,
            sp,
            hq,
            families,
            offers: (0..sp)
                .map(|j| {
                    let mut f: Vec<u32> = (0..families_per_sp.max(1))
                        .map(|m| (families_per_sp * j + m) % families)
                        .collect();
                    f.sort_unstable();
                    f.dedup();
                    f
                })
                .collect(),
            rates,
        }
    }

    /// Locations of `kind`.
    pub fn count(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Sm => self.sm,
            Kind::Dc => self.dc,
            Kind::Sp => self.sp,
            Kind::Hq => self.hq,
        }
    }

    /// The DC that supplies supermarket `sm`.
    pub fn dc_of(&self, sm: u32) -> u32 {
        sm % self.dc
    }

    /// The suppliers offering `family`.
    pub fn suppliers_of(&self, family: u32) -> Vec<u32> {
        (0..self.sp)
            .filter(|&j| {
                self.offers
                    .get(j as usize)
                    .is_some_and(|o| o.contains(&family))
            })
            .collect()
    }

    /// Interaction `i` started per second in all.
    pub fn total_rate(&self, i: Interaction) -> f64 {
        let r = self.rates.get(i as usize).copied().unwrap_or(0.0);
        if i.rate_per_location() {
            r * f64::from(self.count(i.initiator()))
        } else {
            r
        }
    }

    /// Mean suppliers per product family (each gets every call for offers of its family).
    pub fn suppliers_per_family(&self) -> f64 {
        let offered: usize = self.offers.iter().map(Vec::len).sum();
        offered as f64 / f64::from(self.families)
    }

    /// Messages of each type received per second, as the topology prescribes: what the
    /// auditor compares the counts with. A publish counts once per subscriber that receives it.
    pub fn model(&self) -> BTreeMap<MessageType, f64> {
        use MessageType as M;
        let mut m = BTreeMap::new();
        let i1 = self.total_rate(Interaction::OrderShipment);
        for t in [
            M::Order,
            M::OrderConf,
            M::ShipDep,
            M::StatInfoOrderDc,
            M::ShipInfo,
            M::ShipConf,
        ] {
            m.insert(t, i1);
        }
        let i2 = self.total_rate(Interaction::PurchaseOrder);
        let k = self.suppliers_per_family();
        m.insert(M::CallForOffers, i2 * k);
        m.insert(M::Offer, i2 * k);
        for t in [
            M::POrder,
            M::POrderConf,
            M::Invoice,
            M::PShipInfo,
            M::PShipConf,
            M::StatInfoShipDc,
        ] {
            m.insert(t, i2);
        }
        let sms = f64::from(self.sm);
        m.insert(
            M::PriceUpdate,
            self.total_rate(Interaction::PriceUpdate) * sms,
        );
        m.insert(M::InventoryInfo, self.total_rate(Interaction::Inventory));
        m.insert(M::StatInfoSm, self.total_rate(Interaction::SalesStatistics));
        m.insert(
            M::ProductAnnouncement,
            self.total_rate(Interaction::ProductAnnouncement) * sms,
        );
        m.insert(
            M::CreditCardHl,
            self.total_rate(Interaction::CreditCardHotList) * sms,
        );
        m
    }

    /// Messages received per second in all.
    pub fn messages_per_s(&self) -> f64 {
        self.model().values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horizontal_counts_follow_base() {
        let t = Topology::horizontal(12);
        assert_eq!((t.sm, t.dc, t.sp, t.hq, t.families), (12, 3, 5, 2, 12));
        assert!(t.offers.iter().all(|f| f.len() == 5));
        assert!(
            (0..12).all(|f| !t.suppliers_of(f).is_empty()),
            "every family has a supplier"
        );
        assert_eq!(t.dc_of(7), 1);
    }

    #[test]
    fn about_55_messages_per_base_horizontally_with_the_spec_mix() {
        let t = Topology::horizontal(100);
        let per_base = t.messages_per_s() / 100.0;
        assert!((per_base - 55.0).abs() < 0.5, "{per_base}");
        let model = t.model();
        let share = |pred: &dyn Fn(MessageType) -> bool| {
            model
                .iter()
                .filter(|(k, _)| pred(**k))
                .map(|(_, v)| v)
                .sum::<f64>()
                / t.messages_per_s()
        };
        let np_pubsub = share(&|k| k.spec().pubsub && !k.spec().persistent);
        let p_pubsub = share(&|k| k.spec().pubsub && k.spec().persistent);
        let np_p2p = share(&|k| !k.spec().pubsub && !k.spec().persistent);
        assert!((np_pubsub - 0.375).abs() < 0.01, "{np_pubsub}");
        assert!((p_pubsub - 0.125).abs() < 0.01, "{p_pubsub}");
        assert!((np_p2p - 0.25).abs() < 0.01, "{np_p2p}");
    }

    #[test]
    fn about_17_messages_per_base_vertically_80_percent_p2p() {
        let t = Topology::vertical(10);
        let per_base = t.messages_per_s() / 10.0;
        assert!((per_base - 17.0).abs() < 0.5, "{per_base}");
        let p2p: f64 = t
            .model()
            .iter()
            .filter(|(k, _)| !k.spec().pubsub)
            .map(|(_, v)| v)
            .sum();
        assert!((p2p / t.messages_per_s() - 0.8).abs() < 0.01);
        assert!((t.suppliers_per_family() - 2.5).abs() < 1e-9);
    }
}
