//! Topics and their subscriptions.
//!
//! A subscription is backed by a queue named `topic:name` whose key has
//! [`SUBSCRIPTION_KEY`](super::SUBSCRIPTION_KEY) set: receives, leases, acks, dead-lettering and
//! expiry work on it as on any queue, while listings, by-sender receives and the waiting-queue
//! report leave it out. A publish evaluates each subscription's selector, parsed once when the
//! subscription is created or replayed, against the stored message and places the message on
//! the queue of every subscription it matches (see [`State::send`]).
//!
//! A wildcard subscription names a pattern (`prices.>`) instead of a topic. Patterns need no
//! creating: a pattern is an entry of the same map as the topics, made by its first
//! subscription and removed with its last, and indexed by word in a
//! [`PatternIndex`](crate::patterns::PatternIndex) so that a publish finds the patterns its
//! topic matches without looking at the others. A publish goes to the subscriptions of its
//! topic and to those of every matching pattern, each once.
//!
//! Records: `TopicCreated`, `TopicDeleted` (which also deletes the topic's subscriptions and
//! their messages at replay), `SubscriptionCreated` (the whole definition with its queue's
//! settings; replaces one of the same name at replay) and `SubscriptionDeleted` (its messages
//! go with it at replay, so none of them gets a removal record of its own).

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_protocol::topic::{check_pattern, is_pattern};
use ferry_protocol::{
    subscription_queue, QueueOptions, SubscriptionInfo, SubscriptionOptions, TopicInfo,
};
use ferry_selector::Selector;
use smallvec::SmallVec;

use super::super::format::codec::str_fits;
use super::super::format::header::TopicSnapshot;
use super::super::format::record::{self, kind};
use super::super::format::subscription::{SubscriptionDef, SubscriptionFields};
use super::super::writer::LogGuard;
use super::{check_name, IdMap, Queue, QueueKey, QueueKeys, Selectable, State};
use crate::error::StoreError;

/// The most queues one message can be placed on: its `MessageAdded` record counts them in a
/// u16.
const MAX_TARGETS: usize = u16::MAX as usize;

/// `InvalidArgument` for a pattern where a topic name is needed.
fn not_a_pattern(what: &str, name: &str) -> Result<(), StoreError> {
    if is_pattern(name) {
        return Err(StoreError::InvalidArgument(format!(
            "'{name}' is a pattern: only subscriptions may name one, not {what}"
        )));
    }
    Ok(())
}

/// The error for a subscription `name` of `topic` that does not exist: a pattern exists only
/// through its subscriptions, so there is no `TopicNotFound` for one.
fn missing(topic: &str, name: &str) -> StoreError {
    if is_pattern(topic) {
        StoreError::SubscriptionNotFound(subscription_queue(topic, name))
    } else {
        StoreError::TopicNotFound(topic.to_owned())
    }
}

/// One topic, or one pattern of wildcard subscriptions.
#[derive(Debug, Default)]
pub struct Topic {
    /// Its subscriptions by name (so listings come sorted).
    subs: BTreeMap<Arc<str>, Sub>,
}

impl Topic {
    /// The owners of its durable subscriptions.
    pub fn durable_owners(&self) -> impl Iterator<Item = Arc<str>> + '_ {
        self.subs
            .values()
            .filter(|s| s.durable)
            .map(|s| s.owner.clone())
    }
}

/// Which published messages a subscription takes.
#[derive(Debug)]
enum Filter {
    /// Every message (no selector).
    All,
    /// Those its selector is TRUE for.
    Select(Arc<Selector>),
    /// None: a selector in the log that this build cannot parse (kept, so that nothing is
    /// dropped implicitly, but placed no messages).
    Nothing,
}

impl Filter {
    fn parse(text: &str) -> Result<Filter, String> {
        let s = Selector::parse(text).map_err(|e| e.to_string())?;
        Ok(if s.selects_all() {
            Filter::All
        } else {
            Filter::Select(Arc::new(s))
        })
    }

    fn matches(&self, m: &Selectable<'_>) -> bool {
        match self {
            Filter::All => true,
            Filter::Select(s) => s.matches(m),
            Filter::Nothing => false,
        }
    }
}

/// One subscription.
#[derive(Debug)]
struct Sub {
    /// Its queue (`topic:name`).
    queue: QueueKey,
    durable: bool,
    shared: bool,
    /// Selector text as given (empty: none).
    selector: Box<str>,
    filter: Filter,
    /// The client that made it.
    owner: Arc<str>,
}

/// The topics and subscriptions of a segment header snapshot, borrowed from the state.
pub(super) fn snapshot<'a>(
    topics: &'a BTreeMap<Arc<str>, Topic>,
    queues: &'a IdMap<QueueKey, Queue>,
) -> TopicSnapshot<'a> {
    let mut snap = TopicSnapshot {
        // Patterns come back with their subscriptions.
        topics: topics
            .keys()
            .map(|t| &**t)
            .filter(|t| !is_pattern(t))
            .collect(),
        subscriptions: Vec::new(),
    };
    for (topic, t) in topics {
        for (name, s) in &t.subs {
            let q = queues.get(&s.queue);
            snap.subscriptions.push(SubscriptionFields {
                topic,
                name,
                durable: s.durable,
                shared: s.shared,
                selector: &s.selector,
                owner: &s.owner,
                max_deliveries: q.map_or(0, |q| q.max_deliveries),
                dead_letter: q.and_then(|q| q.dead_letter.as_deref()),
                expiry: q.and_then(|q| q.expiry.as_deref()),
            });
        }
    }
    snap
}

impl State {
    /// Creates topic `name`.
    pub fn create_topic(&mut self, log: &mut LogGuard<'_>, name: &str) -> Result<(), StoreError> {
        check_name("topic", name)?;
        not_a_pattern("a topic to create", name)?;
        if self.topics.contains_key(name) {
            return Err(StoreError::TopicExists(name.to_owned()));
        }
        self.append(log, |b| record::encode_name(b, kind::TOPIC_CREATED, name));
        self.insert_topic(name);
        Ok(())
    }

    /// Deletes topic `name` with its subscriptions; without `force` only when they hold
    /// nothing.
    pub fn delete_topic(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
        force: bool,
    ) -> Result<(), StoreError> {
        not_a_pattern("a topic to delete", name)?;
        let Some(t) = self.topics.get(name) else {
            return Err(StoreError::TopicNotFound(name.to_owned()));
        };
        let depth: u64 = t
            .subs
            .values()
            .filter_map(|s| self.queues.get(&s.queue))
            .map(|q| q.ready_count + q.delayed + q.in_flight)
            .sum();
        if depth > 0 && !force {
            return Err(StoreError::TopicNotEmpty {
                name: name.to_owned(),
                depth,
            });
        }
        self.append(log, |b| record::encode_name(b, kind::TOPIC_DELETED, name));
        self.remove_topic(name);
        Ok(())
    }

    /// Every topic with its subscriptions and their depths, by name.
    pub fn list_topics(&self) -> Vec<TopicInfo> {
        self.topics
            .iter()
            .map(|(name, t)| TopicInfo {
                name: name.to_string(),
                subscriptions: t
                    .subs
                    .iter()
                    .map(|(sub, s)| {
                        let q = self.queues.get(&s.queue);
                        SubscriptionInfo {
                            name: sub.to_string(),
                            durable: s.durable,
                            shared: s.shared,
                            selector: s.selector.to_string(),
                            ready: q.map_or(0, |q| q.ready_count + q.delayed),
                            in_flight: q.map_or(0, |q| q.in_flight),
                        }
                    })
                    .collect(),
            })
            .collect()
    }

    /// Creates subscription `name` on `topic`, or checks an existing one (see
    /// [`crate::Topics::subscribe_topic`]); returns its queue's name.
    pub fn subscribe(
        &mut self,
        log: &mut LogGuard<'_>,
        topic: &str,
        name: &str,
        options: &SubscriptionOptions,
        owner: &str,
    ) -> Result<String, StoreError> {
        check_name("subscription", name)?;
        let queue = subscription_queue(topic, name);
        if !str_fits(&queue) || !str_fits(&options.selector) || !str_fits(owner) {
            return Err(StoreError::InvalidArgument(
                "topic, subscription, selector or owner too long".into(),
            ));
        }
        let pattern = is_pattern(topic);
        if pattern {
            check_pattern(topic, u16::MAX).map_err(|e| {
                StoreError::InvalidArgument(format!("invalid topic pattern '{topic}': {e}"))
            })?;
        }
        // A pattern without subscriptions yet is made with its first one.
        let no_subs = Topic::default();
        let t = match self.topics.get(topic) {
            Some(t) => t,
            None if pattern => &no_subs,
            None => return Err(StoreError::TopicNotFound(topic.to_owned())),
        };
        if self.user_queue(&queue).is_some() {
            // Only possible when names are not checked before: ':' is not a name character.
            return Err(StoreError::InvalidArgument(format!(
                "a queue named '{queue}' exists"
            )));
        }
        // Parse before anything else: a bad selector changes nothing.
        let filter = Filter::parse(&options.selector)
            .map_err(|e| StoreError::InvalidArgument(format!("invalid selector: {e}")))?;
        let replace = match t.subs.get(name) {
            // A non-durable subscription made again under its name is replaced (its name is
            // the broker's, and its session is gone); a shared one is attached to.
            Some(s) if !s.durable && !options.durable && !s.shared && !options.shared => true,
            Some(s) => {
                let differs = |what: &str, was: &dyn std::fmt::Display| {
                    Err(StoreError::InvalidArgument(format!(
                        "subscription '{name}' on topic '{topic}' exists with a different \
                         {what} ({was})"
                    )))
                };
                if s.durable != options.durable {
                    return differs("durability", &format!("durable = {}", s.durable));
                }
                if s.shared != options.shared {
                    return differs("sharing", &format!("shared = {}", s.shared));
                }
                if s.selector.trim() != options.selector.trim() {
                    return differs("selector", &format!("'{}'", s.selector));
                }
                return Ok(queue);
            }
            None => false,
        };
        if !replace && t.subs.len() >= usize::from(u16::MAX) {
            // A message names its queues with a u16 count.
            return Err(StoreError::LimitExceeded(format!(
                "topic '{topic}' has {} subscriptions, the most it can have",
                t.subs.len()
            )));
        }
        let QueueOptions {
            max_deliveries,
            dead_letter_queue,
            expiry_queue,
        } = &options.queue;
        for target in [dead_letter_queue, expiry_queue].into_iter().flatten() {
            if self.user_queue(target).is_none() {
                return Err(StoreError::QueueNotFound(target.clone()));
            }
        }
        if replace {
            self.append(log, |b| record::encode_subscription_deleted(b, topic, name));
            self.remove_subscription(topic, name);
        }
        let fields = SubscriptionFields {
            topic,
            name,
            durable: options.durable,
            shared: options.shared,
            selector: &options.selector,
            owner,
            max_deliveries: *max_deliveries,
            dead_letter: dead_letter_queue.as_deref(),
            expiry: expiry_queue.as_deref(),
        };
        self.append(log, |b| record::encode_subscription_created(b, &fields));
        self.insert_subscription(&fields, filter);
        Ok(queue)
    }

    /// `TopicNotFound` or `SubscriptionNotFound` unless subscription `name` of `topic` exists.
    pub fn check_subscription(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        let Some(t) = self.topics.get(topic) else {
            return Err(missing(topic, name));
        };
        if t.subs.contains_key(name) {
            Ok(())
        } else {
            Err(StoreError::SubscriptionNotFound(subscription_queue(
                topic, name,
            )))
        }
    }

    /// Removes subscription `name` of `topic` with its messages.
    pub fn unsubscribe(
        &mut self,
        log: &mut LogGuard<'_>,
        topic: &str,
        name: &str,
    ) -> Result<(), StoreError> {
        let Some(t) = self.topics.get(topic) else {
            return Err(missing(topic, name));
        };
        if !t.subs.contains_key(name) {
            return Err(StoreError::SubscriptionNotFound(subscription_queue(
                topic, name,
            )));
        }
        self.append(log, |b| record::encode_subscription_deleted(b, topic, name));
        self.remove_subscription(topic, name);
        Ok(())
    }

    /// Whether subscription `name` of `topic` exists, shared and not durable.
    pub fn is_shared_non_durable(&self, topic: &str, name: &str) -> bool {
        self.topics
            .get(topic)
            .and_then(|t| t.subs.get(name))
            .is_some_and(|s| s.shared && !s.durable)
    }

    /// Removes subscription `name` of `topic` if it is shared and not durable and nobody
    /// consumes it any more (`consumed` says who does). Returns whether it did.
    pub fn drop_unconsumed_shared(
        &mut self,
        log: &mut LogGuard<'_>,
        topic: &str,
        name: &str,
        consumed: impl Fn(&str) -> bool,
    ) -> bool {
        let doomed = self
            .topics
            .get(topic)
            .and_then(|t| t.subs.get(name))
            .is_some_and(|s| !s.durable && s.shared && !consumed(&subscription_queue(topic, name)));
        if doomed {
            self.append(log, |b| record::encode_subscription_deleted(b, topic, name));
            self.remove_subscription(topic, name);
        }
        doomed
    }

    /// Removes every non-durable subscription (their owners' sessions ended with the previous
    /// run of the store); returns how many.
    pub fn drop_non_durable(&mut self, log: &mut LogGuard<'_>) -> usize {
        let doomed: Vec<(Arc<str>, Arc<str>)> = self
            .topics
            .iter()
            .flat_map(|(t, topic)| {
                topic
                    .subs
                    .iter()
                    .filter(|(_, s)| !s.durable)
                    .map(|(n, _)| (t.clone(), n.clone()))
            })
            .collect();
        for (t, n) in &doomed {
            self.append(log, |b| record::encode_subscription_deleted(b, t, n));
            self.remove_subscription(t, n);
        }
        doomed.len()
    }

    /// Topic `name` and the patterns it matches, each with its subscriptions: where a
    /// publish to `name` may go. `TopicNotFound` unless the topic exists; `InvalidArgument`
    /// for a pattern (nothing is published to one).
    fn audience(&self, name: &str) -> Result<SmallVec<[&Topic; 4]>, StoreError> {
        not_a_pattern("a topic to publish to", name)?;
        let Some(t) = self.topics.get(name) else {
            return Err(StoreError::TopicNotFound(name.to_owned()));
        };
        let mut out = SmallVec::new();
        out.push(t);
        self.patterns.for_each_match(name, |p, ()| {
            if let Some(t) = self.topics.get(p) {
                out.push(t);
            }
        });
        Ok(out)
    }

    /// Checks that a publish to topic `name` can be stored: the topic exists and the
    /// subscriptions it reaches (its own and its patterns') fit one message's record.
    pub(super) fn check_publish(&self, name: &str) -> Result<(), StoreError> {
        let subs: usize = self.audience(name)?.iter().map(|t| t.subs.len()).sum();
        if subs > MAX_TARGETS {
            return Err(StoreError::LimitExceeded(format!(
                "a publish to '{name}' would reach {subs} subscriptions (with its patterns'); \
                 the most one message can reach is {MAX_TARGETS}"
            )));
        }
        Ok(())
    }

    /// Checks that topic `name` exists; returns the names of the subscription queues a publish
    /// to it may reach (an upper bound of where it goes, for size checks).
    pub(super) fn check_topic(&self, name: &str) -> Result<impl Iterator<Item = &str>, StoreError> {
        Ok(self.audience(name)?.into_iter().flat_map(|t| {
            t.subs
                .values()
                .filter_map(|s| self.queues.get(&s.queue).map(|q| &*q.name))
        }))
    }

    /// The queues of the subscriptions of `topic` and of the patterns it matches that take
    /// `msg` (each subscription once: a subscription has one topic or pattern), and whether
    /// they are the same for any message (no subscription has a selector).
    pub(super) fn publish_targets(&self, topic: &str, msg: &Selectable<'_>) -> (QueueKeys, bool) {
        let Ok(audience) = self.audience(topic) else {
            return (QueueKeys::new(), false);
        };
        let mut keys = QueueKeys::with_capacity(audience.iter().map(|t| t.subs.len()).sum());
        let mut for_any = true;
        for s in audience.iter().flat_map(|t| t.subs.values()) {
            for_any &= matches!(s.filter, Filter::All);
            if s.filter.matches(msg) {
                keys.push(s.queue);
            }
        }
        (keys, for_any)
    }

    /// The queues of every subscription of `topic` (its own and those of patterns it matches),
    /// when none has a selector, so that every message published to it goes to all of them;
    /// `None` otherwise, or when the topic cannot be published to.
    pub(super) fn unfiltered_targets(&self, topic: &str) -> Option<QueueKeys> {
        let audience = self.audience(topic).ok()?;
        let mut keys = QueueKeys::with_capacity(audience.iter().map(|t| t.subs.len()).sum());
        for s in audience.iter().flat_map(|t| t.subs.values()) {
            if !matches!(s.filter, Filter::All) {
                return None;
            }
            keys.push(s.queue);
        }
        Some(keys)
    }

    /// Adds topic `name` unless it exists (creation, replay, snapshots).
    pub(super) fn insert_topic(&mut self, name: &str) {
        if !self.topics.contains_key(name) {
            self.topics.insert(name.into(), Topic::default());
        }
    }

    /// Removes topic `name` with every subscription and their messages, in memory.
    pub(super) fn remove_topic(&mut self, name: &str) {
        let Some(t) = self.topics.remove(name) else {
            return;
        };
        for s in t.subs.into_values() {
            self.drop_queue(s.queue);
        }
    }

    /// Applies a subscription definition from the log (record or header snapshot): replaces
    /// one of the same name.
    pub(super) fn replay_subscription(&mut self, def: SubscriptionDef) {
        if !self.topics.contains_key(def.topic.as_str()) && !is_pattern(&def.topic) {
            tracing::warn!(topic = %def.topic, name = %def.name,
                "subscription of a topic that does not exist; ignored");
            return;
        }
        let filter = Filter::parse(&def.selector).unwrap_or_else(|e| {
            tracing::warn!(topic = %def.topic, name = %def.name, error = %e,
                "subscription selector does not parse; it takes no messages");
            Filter::Nothing
        });
        self.remove_subscription(&def.topic, &def.name);
        self.insert_subscription(&def.fields(), filter);
    }

    /// Adds a subscription and its queue, in memory.
    fn insert_subscription(&mut self, f: &SubscriptionFields<'_>, filter: Filter) {
        let qk = self.insert_queue_keyed(&subscription_queue(f.topic, f.name), true);
        if let Some(q) = self.queues.get_mut(&qk) {
            q.max_deliveries = f.max_deliveries;
            q.dead_letter = f.dead_letter.map(Arc::from);
            q.expiry = f.expiry.map(Arc::from);
        }
        if !self.topics.contains_key(f.topic) && is_pattern(f.topic) {
            self.topics.insert(f.topic.into(), Topic::default());
            self.patterns.insert(f.topic, ());
        }
        if let Some(t) = self.topics.get_mut(f.topic) {
            t.subs.insert(
                f.name.into(),
                Sub {
                    queue: qk,
                    durable: f.durable,
                    shared: f.shared,
                    selector: f.selector.into(),
                    filter,
                    owner: f.owner.into(),
                },
            );
        }
    }

    /// Removes a subscription with its queue and messages, in memory (a no-op if unknown).
    pub(super) fn remove_subscription(&mut self, topic: &str, name: &str) {
        let Some(t) = self.topics.get_mut(topic) else {
            return;
        };
        let Some(s) = t.subs.remove(name) else {
            return;
        };
        if t.subs.is_empty() && is_pattern(topic) {
            // A pattern lives as long as its subscriptions.
            self.topics.remove(topic);
            self.patterns.remove(topic);
        }
        self.drop_queue(s.queue);
    }

    /// Removes queue `qk` with its messages and leases, in memory: nothing is logged per
    /// message (the record deleting the subscription or topic implies their removal).
    fn drop_queue(&mut self, qk: QueueKey) {
        for did in self.leases.on_queue(qk) {
            if let Some(lease) = self.leases.remove(did) {
                self.drop_slot(lease.message, qk);
            }
        }
        let ready = self
            .queues
            .get(&qk)
            .map(|q| q.ready.all())
            .unwrap_or_default();
        for id in ready {
            self.unready(id, qk);
            self.drop_slot(id, qk);
        }
        for id in self.undelay_queue(qk) {
            self.drop_slot(id, qk);
        }
        self.remove_queue(qk);
    }
}
