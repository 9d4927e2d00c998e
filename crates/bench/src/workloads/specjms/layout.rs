//! Destination layouts (jms2009-PS): where each message goes, and what each location
//! consumes. Every message carries the properties `MessageType`, `LocationType` (of its
//! target), `TargetLocationID` and, for calls for offers, `Family`, so that selectors can pick
//! them out. Every name starts with `bench-spec.`, so that a run can remove what it made.

use clap::ValueEnum;

use super::spec::{Kind, MessageType};
use super::topology::Topology;

/// The prefix of every queue and topic of the workload.
pub const PREFIX: &str = "bench-spec.";

/// How destinations are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Layout {
    /// A queue per location and message type (point-to-point); a topic per pub/sub type.
    Queues,
    /// A topic per message type; each receiver subscribes with a `TargetLocationID` selector.
    TypeTopics,
    /// One central topic; each receiver subscribes with selectors on location type, target
    /// and message type.
    Central,
}

/// How calls for offers reach the suppliers of a product family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CfoLayout {
    /// A topic per product family; a supplier subscribes durably to each family it offers.
    PerFamily,
    /// One topic; a supplier subscribes durably once, with `Family IN (...)` over its families.
    InSelector,
}

/// A location: its kind and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    /// Its kind.
    pub kind: Kind,
    /// Its number within the kind, from 0.
    pub id: u32,
}

impl Loc {
    /// `SM3`, `HQ0`, ...
    pub fn name(self) -> String {
        format!("{}{}", self.kind.code(), self.id)
    }
}

/// Where a message is sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dest {
    /// A queue.
    Queue(String),
    /// A topic.
    Topic(String),
}

impl Dest {
    /// The queue's or topic's name.
    pub fn name(&self) -> &str {
        match self {
            Dest::Queue(n) | Dest::Topic(n) => n,
        }
    }
}

/// A subscription or queue a location consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feed {
    /// Where from.
    pub dest: Dest,
    /// For a topic: the selector (empty: every message).
    pub selector: String,
    /// For a topic: the durable subscription's name; `None`: non-durable.
    pub durable: Option<String>,
    /// For a topic, on targets that route by key (RabbitMQ): binding keys that pick what the
    /// selector picks, over [`Plan::routing_key`]s; empty: every message.
    pub bindings: Vec<String>,
}

/// The layout of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Point-to-point and pub/sub layout.
    pub layout: Layout,
    /// Calls for offers.
    pub cfo: CfoLayout,
}

fn family_name(f: u32) -> String {
    format!("f{f}")
}

impl Plan {
    /// The routing key of a message of type `t` for `to` (`family` for calls for offers), for
    /// targets that route by key: `<type>.<location type>.<target or all>.<family or none>`,
    /// the words the selectors look at.
    pub fn routing_key(&self, t: MessageType, to: Loc, family: u32) -> String {
        let spec = t.spec();
        let target = if spec.pubsub {
            "all".to_string()
        } else {
            to.name()
        };
        let family = if t == MessageType::CallForOffers {
            family_name(family)
        } else {
            "none".to_string()
        };
        format!("{}.{}.{target}.{family}", spec.name, spec.receiver.code())
    }

    /// Where a message of type `t` for `to` goes (`family` for calls for offers).
    pub fn route(&self, t: MessageType, to: Loc, family: u32) -> Dest {
        let spec = t.spec();
        if self.layout == Layout::Central {
            return Dest::Topic(format!("{PREFIX}central"));
        }
        if t == MessageType::CallForOffers {
            return Dest::Topic(match self.cfo {
                CfoLayout::PerFamily => format!("{PREFIX}cfo.{}", family_name(family)),
                CfoLayout::InSelector => format!("{PREFIX}cfo"),
            });
        }
        if spec.pubsub {
            return Dest::Topic(format!("{PREFIX}{}", spec.name));
        }
        match self.layout {
            Layout::Queues => Dest::Queue(format!("{PREFIX}{}.{}", to.name(), spec.name)),
            _ => Dest::Topic(format!("{PREFIX}t.{}", spec.name)),
        }
    }

    /// How many subscriptions or queues one message of type `t` (for `family`) reaches.
    pub fn receivers(&self, topo: &Topology, t: MessageType, family: u32) -> u64 {
        match t {
            MessageType::CallForOffers => topo.suppliers_of(family).len() as u64,
            t if t.spec().pubsub => u64::from(topo.sm),
            _ => 1,
        }
    }

    /// Everything `loc` consumes.
    pub fn feeds(&self, topo: &Topology, loc: Loc) -> Vec<Feed> {
        let name = loc.name();
        let mut feeds = Vec::new();
        for t in MessageType::ALL {
            let spec = t.spec();
            if spec.receiver != loc.kind {
                continue;
            }
            let sub_name = |suffix: &str| format!("{name}-{}{suffix}", spec.name);
            let central = |extra: String, bindings: Vec<String>| Feed {
                dest: Dest::Topic(format!("{PREFIX}central")),
                selector: format!("MessageType = '{}'{extra}", spec.name),
                durable: (spec.persistent || spec.durable).then(|| sub_name("")),
                bindings,
            };
            let cfo_keys = |families: &[u32]| -> Vec<String> {
                families
                    .iter()
                    .map(|f| format!("{}.*.*.{}", spec.name, family_name(*f)))
                    .collect()
            };
            if t == MessageType::CallForOffers {
                let families = topo
                    .offers
                    .get(loc.id as usize)
                    .map_or(&[][..], Vec::as_slice);
                let list = families
                    .iter()
                    .map(|f| format!("'{}'", family_name(*f)))
                    .collect::<Vec<_>>()
                    .join(", ");
                match (self.layout, self.cfo) {
                    (Layout::Central, CfoLayout::InSelector) => feeds.push(central(
                        format!(" AND Family IN ({list})"),
                        cfo_keys(families),
                    )),
                    (Layout::Central, CfoLayout::PerFamily) => {
                        for f in families {
                            let mut feed = central(
                                format!(" AND Family = '{}'", family_name(*f)),
                                cfo_keys(std::slice::from_ref(f)),
                            );
                            feed.durable = Some(sub_name(&format!("-{}", family_name(*f))));
                            feeds.push(feed);
                        }
                    }
                    (_, CfoLayout::InSelector) => feeds.push(Feed {
                        dest: self.route(t, loc, 0),
                        selector: format!("Family IN ({list})"),
                        durable: Some(sub_name("")),
                        bindings: cfo_keys(families),
                    }),
                    (_, CfoLayout::PerFamily) => {
                        for f in families {
                            feeds.push(Feed {
                                dest: self.route(t, loc, *f),
                                selector: String::new(),
                                durable: Some(sub_name(&format!("-{}", family_name(*f)))),
                                bindings: Vec::new(),
                            });
                        }
                    }
                }
                continue;
            }
            if spec.pubsub {
                feeds.push(match self.layout {
                    Layout::Central => central(String::new(), vec![format!("{}.#", spec.name)]),
                    _ => Feed {
                        dest: self.route(t, loc, 0),
                        selector: String::new(),
                        durable: spec.durable.then(|| sub_name("")),
                        bindings: Vec::new(),
                    },
                });
                continue;
            }
            feeds.push(match self.layout {
                Layout::Queues => Feed {
                    dest: self.route(t, loc, 0),
                    selector: String::new(),
                    durable: None,
                    bindings: Vec::new(),
                },
                Layout::TypeTopics => Feed {
                    dest: self.route(t, loc, 0),
                    selector: format!("TargetLocationID = '{name}'"),
                    durable: spec.persistent.then(|| sub_name("")),
                    bindings: vec![format!("*.*.{name}.*")],
                },
                Layout::Central => central(
                    format!(
                        " AND LocationType = '{}' AND TargetLocationID = '{name}'",
                        loc.kind.code()
                    ),
                    vec![format!("{}.{}.{name}.*", spec.name, loc.kind.code())],
                ),
            });
        }
        feeds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sm(id: u32) -> Loc {
        Loc { kind: Kind::Sm, id }
    }

    #[test]
    fn queues_layout_gives_a_queue_per_location_and_type() {
        let plan = Plan {
            layout: Layout::Queues,
            cfo: CfoLayout::PerFamily,
        };
        let topo = Topology::horizontal(10);
        assert_eq!(
            plan.route(MessageType::OrderConf, sm(3), 0),
            Dest::Queue("bench-spec.SM3.orderConf".into())
        );
        assert_eq!(
            plan.route(MessageType::CallForOffers, sm(0), 7),
            Dest::Topic("bench-spec.cfo.f7".into())
        );
        let feeds = plan.feeds(&topo, sm(3));
        let queues: Vec<_> = feeds
            .iter()
            .filter(|f| matches!(f.dest, Dest::Queue(_)))
            .collect();
        assert_eq!(queues.len(), 3, "orderConf, shipInfo, inventoryInfo");
        assert_eq!(feeds.len(), 6, "and three topics");
        let dc = plan.feeds(
            &topo,
            Loc {
                kind: Kind::Dc,
                id: 0,
            },
        );
        assert_eq!(dc.len(), 6);
        let hq = plan.feeds(
            &topo,
            Loc {
                kind: Kind::Hq,
                id: 0,
            },
        );
        assert_eq!(hq.len(), 4);
        let sp = plan.feeds(
            &topo,
            Loc {
                kind: Kind::Sp,
                id: 1,
            },
        );
        assert_eq!(
            sp.len(),
            2 + 5,
            "two queues and a durable subscription per family"
        );
        assert!(sp.iter().filter(|f| f.durable.is_some()).count() == 5);
    }

    #[test]
    fn selector_layouts_select_by_target_type_and_family() {
        let topo = Topology::horizontal(10);
        let plan = Plan {
            layout: Layout::TypeTopics,
            cfo: CfoLayout::InSelector,
        };
        let feeds = plan.feeds(&topo, sm(2));
        let conf = feeds
            .iter()
            .find(|f| f.dest == Dest::Topic("bench-spec.t.orderConf".into()))
            .unwrap();
        assert_eq!(conf.selector, "TargetLocationID = 'SM2'");
        assert_eq!(conf.durable.as_deref(), Some("SM2-orderConf"));
        let sp = plan.feeds(
            &topo,
            Loc {
                kind: Kind::Sp,
                id: 0,
            },
        );
        let cfo = sp
            .iter()
            .find(|f| f.selector.starts_with("Family"))
            .unwrap();
        assert_eq!(cfo.selector, "Family IN ('f0', 'f1', 'f2', 'f3', 'f4')");
        let central = Plan {
            layout: Layout::Central,
            cfo: CfoLayout::PerFamily,
        };
        let feeds = central.feeds(&topo, sm(2));
        assert!(feeds
            .iter()
            .all(|f| f.dest == Dest::Topic("bench-spec.central".into())));
        assert!(feeds.iter().any(|f| f.selector
            == "MessageType = 'orderConf' AND LocationType = 'SM' AND TargetLocationID = 'SM2'"));
        assert!(feeds
            .iter()
            .any(|f| f.selector == "MessageType = 'priceUpdate'"));
    }

    /// A binding key matches a routing key as RabbitMQ's topic exchange does (`*` one word,
    /// `#` the rest; used here last only).
    fn binds(key: &str, routing: &str) -> bool {
        let k: Vec<&str> = key.split('.').collect();
        let r: Vec<&str> = routing.split('.').collect();
        if k.last() == Some(&"#") {
            return k[..k.len() - 1]
                .iter()
                .zip(&r)
                .all(|(a, b)| a == &"*" || a == b);
        }
        k.len() == r.len() && k.iter().zip(&r).all(|(a, b)| a == &"*" || a == b)
    }

    #[test]
    fn bindings_pick_what_the_selectors_pick() {
        let topo = Topology::horizontal(10);
        for (layout, cfo) in [
            (Layout::TypeTopics, CfoLayout::InSelector),
            (Layout::Central, CfoLayout::PerFamily),
            (Layout::Central, CfoLayout::InSelector),
        ] {
            let plan = Plan { layout, cfo };
            let all: Vec<Feed> = Kind::ALL
                .into_iter()
                .flat_map(|k| (0..topo.count(k)).map(move |id| Loc { kind: k, id }))
                .flat_map(|loc| plan.feeds(&topo, loc))
                .collect();
            // Each message reaches by its routing key exactly as many feeds as it owes
            // receipts: its target's, every SM's, or the suppliers of its family.
            for t in MessageType::ALL {
                let kind = t.spec().receiver;
                for id in 0..topo.count(kind) {
                    let to = Loc { kind, id };
                    let family = id % topo.families;
                    let dest = plan.route(t, to, family);
                    let key = plan.routing_key(t, to, family);
                    let reached = all
                        .iter()
                        .filter(|f| {
                            f.dest == dest
                                && (f.bindings.is_empty()
                                    || f.bindings.iter().any(|b| binds(b, &key)))
                        })
                        .count() as u64;
                    let want = plan.receivers(&topo, t, family);
                    assert_eq!(reached, want, "{layout:?} {cfo:?} {}: {key}", to.name());
                }
            }
        }
    }
}
