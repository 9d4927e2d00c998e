//! The embedded engine's in-memory state: clients, queues, messages, ready indexes, leases, and
//! the journal that tracks where records land in the log.
//!
//! - [`index`]: ready indexes in both orders, split by receiver;
//! - [`leases`]: client-ack leases by id, deadline and session;
//! - [`journal`]: record placement, segment rolling and live-byte accounting;
//! - [`messages`]: send, publish, receive and settlement;
//! - `direct`: push consumers that take non-persistent publishes without queueing them;
//! - [`topics`]: topics and subscriptions (each backed by a queue of its own);
//! - [`txn`]: transactions, whose records form one group in the log;
//! - [`registry`]: client names, permanent or in memory, what they hold, their expiry;
//! - this file: the types, queue operations and replay of records.
//!
//! The state sits behind one `std::sync::Mutex` in the store, which is never held across an
//! `.await`. Every mutation encodes its records into the log buffer *while* holding it, so that
//! the log's order is the order of state changes: a take's removal record always follows the
//! add record of its message, and its durability implies the add's.

use std::collections::{hash_map, BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{DeliveryId, MessageId, Properties, QueueInfo, QueueOptions};
use ferry_selector::{Header, SelectorSource, Value};
use smallvec::SmallVec;

use super::format::codec::str_fits;
use super::format::header;
use super::format::record::{self, kind, AddedMessage, MessageFields, Record};
use super::writer::LogGuard;
use crate::error::StoreError;
pub use crate::id_hash::{IdHasher, IdMap};
use crate::select;

mod admin;
mod direct;
pub mod index;
pub mod journal;
pub mod lane;
pub mod leases;
pub mod messages;
pub mod registry;
pub mod topics;
pub mod txn;

use index::Split;
use journal::Journal;
use leases::Leases;
use registry::Registry;
use topics::Topic;

/// In-memory number of a registered client (not persisted; names are).
pub type ClientKey = u32;
/// In-memory number of a queue; a re-created queue gets a new one. Subscription queues have
/// [`SUBSCRIPTION_KEY`] set, so telling them from user queues costs no lookup.
pub type QueueKey = u32;

/// The bit set in the key of every subscription queue.
pub const SUBSCRIPTION_KEY: QueueKey = 1 << 31;

/// Whether `qk` is a subscription's queue (not listed, not searched by sender).
pub fn is_subscription(qk: QueueKey) -> bool {
    qk & SUBSCRIPTION_KEY != 0
}

/// The segment of a message that has no record in the log (non-persistent).
const UNLOGGED: u64 = 0;
/// The segment of a message added by the transaction group being built; set when the group is
/// appended.
const GROUPED: u64 = u64::MAX;

/// A stored message's immutable part, shared by every queue it is on and every delivery.
#[derive(Debug)]
pub struct Stored {
    /// Message id.
    pub id: MessageId,
    /// Sending client.
    pub sender: Arc<str>,
    sender_key: ClientKey,
    /// Addressed client.
    pub receiver: Option<Arc<str>>,
    receiver_key: Option<ClientKey>,
    /// 1 to 10.
    pub priority: u8,
    /// Application context.
    pub context: u64,
    /// Properties.
    pub properties: Properties,
    /// Payload.
    pub body: Bytes,
    /// Arrival time.
    pub created_at: u64,
    /// Not visible before this time (0 = at once).
    pub deliver_at: u64,
    /// Never delivered at or after this time (0 = never).
    pub expires_at: u64,
    /// `false`: in memory only; no record is ever written for it or for what happens to it.
    pub persistent: bool,
}

impl Stored {
    /// Whether the message has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at != 0 && self.expires_at <= now_ms
    }
}

/// A stored message as a selector reads it: every value borrowed from the message.
impl SelectorSource for Stored {
    fn header(&self, h: Header) -> Value<'_> {
        select::header(
            h,
            self.priority,
            &self.sender,
            self.receiver.as_deref(),
            self.context,
            self.created_at,
        )
    }

    fn property(&self, name: &str) -> Value<'_> {
        select::property(&self.properties, name)
    }
}

impl Stored {
    fn fields(&self) -> MessageFields<'_> {
        MessageFields {
            id: self.id,
            created_at: self.created_at,
            context: self.context,
            priority: self.priority,
            sender: &self.sender,
            receiver: self.receiver.as_deref(),
            properties: &self.properties,
            body: &self.body,
            deliver_at: self.deliver_at,
            expires_at: self.expires_at,
        }
    }
}

/// A message's place on one queue.
#[derive(Debug, Clone, Copy)]
struct Slot {
    queue: QueueKey,
    /// Client-ack deliveries so far on this queue.
    count: u32,
    /// The lease holding it, if it is in flight.
    lease: Option<DeliveryId>,
}

/// The queues a send or publish puts a message on (inline up to four: no allocation).
pub type QueueKeys = SmallVec<[QueueKey; 4]>;

/// The queues a message is on.
type Slots = SmallVec<[Slot; 1]>;

/// A stored message with the queues it is still on.
#[derive(Debug)]
struct Entry {
    msg: Arc<Stored>,
    /// Inline for the common message on one queue: no allocation of its own.
    slots: Slots,
    /// Segment and size of its current `MessageAdded` record ([`UNLOGGED`] and 0 for a
    /// non-persistent message).
    segment: u64,
    size: u32,
}

/// One queue.
#[derive(Debug)]
struct Queue {
    name: Arc<str>,
    ready: Split<MessageId>,
    ready_count: u64,
    /// Ready messages on it that have a time to live: while there are none, a receive without
    /// a selector takes entries from the index without looking at their messages.
    expiring: u64,
    /// Messages on it waiting for their delivery time (not in `ready`).
    delayed: u64,
    in_flight: u64,
    /// Client-ack deliveries a message may have here (0 = unlimited).
    max_deliveries: u32,
    /// Where messages over `max_deliveries` go.
    dead_letter: Option<Arc<str>>,
    /// Where expired messages go.
    expiry: Option<Arc<str>>,
    /// Body bytes of the ready messages.
    ready_bytes: u64,
    /// Messages placed on it since the store opened (recovery included).
    entered: u64,
    /// Messages removed from it for good since the store opened.
    left: u64,
}

/// A transaction's records while it is applied: they go here instead of the log, and are
/// appended as one `Group` record at its end.
#[derive(Debug, Default)]
struct Group {
    buf: Vec<u8>,
    /// Messages added in the group, with the size of their `MessageAdded` record.
    adds: Vec<(MessageId, u32)>,
}

/// Everything the embedded engine knows.
#[derive(Debug)]
pub struct State {
    /// The next message id to hand out.
    pub next_id: MessageId,
    /// Registered client names.
    clients: Registry,
    queue_keys: BTreeMap<Arc<str>, QueueKey>,
    queues: IdMap<QueueKey, Queue>,
    next_queue_key: QueueKey,
    messages: IdMap<MessageId, Entry>,
    senders: IdMap<ClientKey, Split<(MessageId, QueueKey)>>,
    leases: Leases,
    /// Messages waiting for their delivery time, by (delivery time, id, queue); they enter
    /// the ready indexes when a receive or [`State::delayed_due`] finds them due.
    delayed: BTreeSet<(u64, MessageId, QueueKey)>,
    /// Queues whose delayed messages a receive made ready, not yet reported by
    /// [`State::delayed_due`] (so their waiters are still woken).
    due_unreported: BTreeSet<QueueKey>,
    /// Messages with a time to live, by (expiry time, id), so that a purge of expired
    /// messages looks at those alone instead of at every message.
    by_expiry: BTreeSet<(u64, MessageId)>,
    /// Expiry queues that got expired messages since [`State::take_expired_to`] last ran.
    expired_to: Vec<String>,
    /// Topics by name, each with its subscriptions; also the patterns that wildcard
    /// subscriptions name, each while it has subscriptions (see [`topics`]).
    topics: BTreeMap<Arc<str>, Topic>,
    /// The patterns among `topics`, indexed by word.
    patterns: crate::patterns::PatternIndex<()>,
    /// The transaction being applied, if any.
    group: Option<Group>,
    /// Push consumers taking non-persistent publishes directly.
    direct: direct::DirectTaps,
    /// Where records go, and live bytes per segment.
    pub journal: Journal,
    /// Dead letters, expiries and drops, for metrics.
    pub counters: crate::admin::MessageCounters,
    /// About the bytes the messages held take in memory (see [`footprint`]), counted here and
    /// published to `memory`, shared so that it can be read without the state's lock (a plain
    /// store under the lock, no read-modify-write).
    memory_bytes: u64,
    memory: Arc<AtomicU64>,
}

/// Bytes a message takes in memory besides its body and properties: the stored message, its
/// entry and its places in the indexes, about.
const MESSAGE_OVERHEAD: u64 = 256;

/// About the bytes message `m` takes in memory.
fn footprint(m: &Stored) -> u64 {
    if m.properties.is_empty() {
        return MESSAGE_OVERHEAD + m.body.len() as u64;
    }
    let props: usize = m
        .properties
        .iter()
        .map(|(name, v)| {
            name.len()
                + 32
                + match v {
                    ferry_protocol::PropertyValue::Str(s) => s.len(),
                    _ => 0,
                }
        })
        .sum();
    MESSAGE_OVERHEAD + (m.body.len() + props) as u64
}

/// Builds the header of segment `n` from a metadata snapshot. A free function over fields, so
/// it can borrow them while the journal is borrowed mutably. Clients are not in it: their
/// registrations are records of their own (see [`registry`]).
fn snapshot<'a>(
    next_id: MessageId,
    queues: &'a BTreeMap<Arc<str>, QueueKey>,
    settings: &'a IdMap<QueueKey, Queue>,
    topics: &'a BTreeMap<Arc<str>, Topic>,
) -> impl FnOnce(u64) -> Vec<u8> + 'a {
    move |n| {
        // Subscription queues are described by their subscriptions, not listed as queues.
        let user = || queues.iter().filter(|(_, qk)| !is_subscription(**qk));
        let names: Vec<&str> = user().map(|(name, _)| &**name).collect();
        let options: Vec<(&str, u32, Option<&str>)> = user()
            .filter_map(|(name, qk)| {
                let q = settings.get(qk)?;
                (q.max_deliveries != 0 || q.dead_letter.is_some())
                    .then(|| (&**name, q.max_deliveries, q.dead_letter.as_deref()))
            })
            .collect();
        let expiry: Vec<(&str, &str)> = user()
            .filter_map(|(name, qk)| Some((&**name, settings.get(qk)?.expiry.as_deref()?)))
            .collect();
        header::encode(
            n,
            next_id,
            names.into_iter(),
            std::iter::empty(),
            &options,
            &expiry,
            &topics::snapshot(topics, settings),
        )
    }
}

fn check_name(what: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty() || !str_fits(name) {
        return Err(StoreError::InvalidArgument(format!(
            "{what} name must be 1 to 65535 bytes"
        )));
    }
    Ok(())
}

impl State {
    /// An empty state whose log is described by `journal`.
    pub fn new(journal: Journal) -> Self {
        State {
            next_id: 1,
            clients: Registry::default(),
            queue_keys: BTreeMap::new(),
            queues: IdMap::default(),
            next_queue_key: 0,
            messages: IdMap::default(),
            senders: IdMap::default(),
            leases: Leases::default(),
            delayed: BTreeSet::new(),
            due_unreported: BTreeSet::new(),
            by_expiry: BTreeSet::new(),
            expired_to: Vec::new(),
            topics: BTreeMap::new(),
            patterns: Default::default(),
            group: None,
            direct: direct::DirectTaps::default(),
            journal,
            counters: crate::admin::MessageCounters::default(),
            memory_bytes: 0,
            memory: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The gauge of the bytes messages take in memory, to read without the lock.
    pub fn memory_gauge(&self) -> Arc<AtomicU64> {
        self.memory.clone()
    }

    fn set_memory(&mut self, bytes: u64) {
        self.memory_bytes = bytes;
        self.memory.store(bytes, Ordering::Relaxed);
    }

    /// The header for a new segment `n` holding the current metadata.
    pub fn header(&self, n: u64) -> Vec<u8> {
        snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics)(n)
    }

    /// Appends a record to the log (see [`Journal::append`]), or to the transaction group
    /// being built (then the segment is [`GROUPED`]).
    fn append(
        &mut self,
        log: &mut LogGuard<'_>,
        encode: impl FnOnce(&mut Vec<u8>) -> u32,
    ) -> (u64, u32) {
        if let Some(g) = &mut self.group {
            return (GROUPED, encode(&mut g.buf));
        }
        self.journal.append(
            log,
            encode,
            snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
        )
    }

    /// Appends the `MessageAdded` record of `msg` on `keys` (every delivery count 0) and
    /// accounts for it; returns its segment and size.
    fn append_added(
        &mut self,
        log: &mut LogGuard<'_>,
        msg: &Stored,
        keys: &[QueueKey],
    ) -> (u64, u32) {
        let queues = &self.queues;
        let encode = |b: &mut Vec<u8>| {
            record::encode_message_added(
                b,
                &msg.fields(),
                keys.iter()
                    .map(|qk| (queues.get(qk).map_or("", |q| &*q.name), 0)),
            )
        };
        if let Some(g) = &mut self.group {
            let size = encode(&mut g.buf);
            g.adds.push((msg.id, size));
            return (GROUPED, size);
        }
        let (segment, size) = self.journal.append(
            log,
            encode,
            snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
        );
        self.journal.add_live(segment, msg.id, size);
        (segment, size)
    }

    /// Logs that message `id` left `queue`, unless the message is not persistent; whether a
    /// record was written.
    fn log_removed(&mut self, log: &mut LogGuard<'_>, id: MessageId, queue: &str) -> bool {
        if !self.persistent(id) {
            return false;
        }
        self.append(log, |b| record::encode_message_removed(b, id, queue));
        true
    }

    /// Whether message `id` is persistent (records are written for it).
    fn persistent(&self, id: MessageId) -> bool {
        self.messages.get(&id).is_some_and(|e| e.msg.persistent)
    }

    /// The key of user queue `name` (not a subscription's).
    fn user_queue(&self, name: &str) -> Option<QueueKey> {
        self.queue_keys
            .get(name)
            .copied()
            .filter(|qk| !is_subscription(*qk))
    }

    fn insert_queue(&mut self, name: &str) {
        self.insert_queue_keyed(name, false);
    }

    /// Inserts a queue (a subscription's when `subscription`) unless it exists; returns its key.
    fn insert_queue_keyed(&mut self, name: &str, subscription: bool) -> QueueKey {
        if let Some(&qk) = self.queue_keys.get(name) {
            return qk;
        }
        let mut key = self.next_queue_key;
        self.next_queue_key = (self.next_queue_key + 1) & !SUBSCRIPTION_KEY;
        if subscription {
            key |= SUBSCRIPTION_KEY;
        }
        let name: Arc<str> = name.into();
        self.queue_keys.insert(name.clone(), key);
        self.queues.insert(
            key,
            Queue {
                name,
                ready: Split::default(),
                ready_count: 0,
                expiring: 0,
                delayed: 0,
                in_flight: 0,
                max_deliveries: 0,
                dead_letter: None,
                expiry: None,
                ready_bytes: 0,
                entered: 0,
                left: 0,
            },
        );
        key
    }

    /// Creates a queue with `options`.
    pub fn create_queue(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
        options: &QueueOptions,
    ) -> Result<(), StoreError> {
        check_name("queue", name)?;
        if self.queue_keys.contains_key(name) {
            return Err(StoreError::QueueExists(name.to_owned()));
        }
        for (what, other) in [
            ("dead-letter", &options.dead_letter_queue),
            ("expiry", &options.expiry_queue),
        ] {
            let Some(d) = other else {
                continue;
            };
            if d == name {
                return Err(StoreError::InvalidArgument(format!(
                    "queue '{name}' cannot be its own {what} queue"
                )));
            }
            if self.user_queue(d).is_none() {
                return Err(StoreError::QueueNotFound(d.clone()));
            }
        }
        self.append(log, |b| record::encode_name(b, kind::QUEUE_CREATED, name));
        self.insert_queue(name);
        if options != &QueueOptions::default() {
            let dlq = options.dead_letter_queue.as_deref();
            let exp = options.expiry_queue.as_deref();
            self.append(log, |b| {
                record::encode_queue_options(b, name, options.max_deliveries, dlq, exp)
            });
            self.set_options(name, options.max_deliveries, dlq);
            self.set_expiry(name, exp);
        }
        Ok(())
    }

    fn set_options(&mut self, name: &str, max_deliveries: u32, dead_letter: Option<&str>) {
        let Some(qk) = self.queue_keys.get(name) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(qk) {
            q.max_deliveries = max_deliveries;
            q.dead_letter = dead_letter.map(Arc::from);
        }
    }

    fn set_expiry(&mut self, name: &str, expiry: Option<&str>) {
        let Some(qk) = self.queue_keys.get(name) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(qk) {
            q.expiry = expiry.map(Arc::from);
        }
    }

    /// Deletes a queue; with `force`, drops its messages and leases first.
    pub fn delete_queue(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
        force: bool,
    ) -> Result<(), StoreError> {
        let Some(qk) = self.user_queue(name) else {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        };
        let depth = self
            .queues
            .get(&qk)
            .map_or(0, |q| q.ready_count + q.delayed + q.in_flight);
        if !force {
            if let Some(e) = self.user_of(name) {
                return Err(e);
            }
        }
        if depth > 0 && !force {
            return Err(StoreError::QueueNotEmpty {
                name: name.to_owned(),
                depth,
            });
        }
        for did in self.leases.on_queue(qk) {
            if let Some(lease) = self.leases.remove(did) {
                self.log_removed(log, lease.message, name);
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
            self.log_removed(log, id, name);
            self.drop_slot(id, qk);
        }
        for id in self.undelay_queue(qk) {
            self.log_removed(log, id, name);
            self.drop_slot(id, qk);
        }
        self.append(log, |b| record::encode_name(b, kind::QUEUE_DELETED, name));
        self.remove_queue(qk);
        Ok(())
    }

    fn remove_queue(&mut self, qk: QueueKey) {
        if let Some(q) = self.queues.remove(&qk) {
            self.queue_keys.remove(&q.name);
        }
        self.forget_direct(qk);
    }

    /// Every user queue with its depth, by name.
    pub fn list_queues(&self) -> Vec<QueueInfo> {
        self.queue_keys
            .iter()
            .filter(|(_, qk)| !is_subscription(**qk))
            .filter_map(|(name, qk)| {
                let q = self.queues.get(qk)?;
                Some(QueueInfo {
                    name: name.to_string(),
                    ready: q.ready_count + q.delayed,
                    in_flight: q.in_flight,
                })
            })
            .collect()
    }

    /// Queues holding ready messages addressed to `client`, by name; delayed messages due at
    /// `now_ms` are made ready first (their waiters are woken as after a receive).
    pub fn waiting_queues(&mut self, client: &str, now_ms: u64) -> Vec<String> {
        let due = self.promote_due(now_ms);
        self.due_unreported.extend(due);
        let Some(&ck) = self.clients.get(client) else {
            return Vec::new();
        };
        self.queue_keys
            .iter()
            .filter(|(_, qk)| {
                !is_subscription(**qk)
                    && self
                        .queues
                        .get(qk)
                        .is_some_and(|q| q.ready.has_addressed(ck))
            })
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// Places a message that arrived (send, recovery) on queue `qk`: ready, or waiting for its
    /// delivery time.
    fn place(&mut self, id: MessageId, qk: QueueKey) {
        let Some(msg) = self.messages.get(&id).map(|e| e.msg.clone()) else {
            return;
        };
        self.place_stored(&msg, qk);
    }

    /// [`State::place`] for a message at hand (no lookup: a publish places one message on
    /// many queues).
    fn place_stored(&mut self, m: &Stored, qk: QueueKey) {
        let (id, deliver_at) = (m.id, m.deliver_at);
        if let Some(q) = self.queues.get_mut(&qk) {
            q.entered += 1;
        }
        if deliver_at == 0 {
            self.make_ready_stored(m, qk);
        } else {
            self.delayed.insert((deliver_at, id, qk));
            if let Some(q) = self.queues.get_mut(&qk) {
                q.delayed += 1;
            }
        }
    }

    /// Makes every delayed message due at `now_ms` ready; returns their queues.
    pub fn promote_due(&mut self, now_ms: u64) -> Vec<QueueKey> {
        let mut queues = Vec::new();
        while let Some(&(at, id, qk)) = self.delayed.first() {
            if at > now_ms {
                break;
            }
            self.delayed.pop_first();
            if let Some(q) = self.queues.get_mut(&qk) {
                q.delayed = q.delayed.saturating_sub(1);
            }
            self.make_ready(id, qk);
            queues.push(qk);
        }
        queues
    }

    /// The expiry queues that got expired messages since the last call, sorted (their waiters
    /// are to be woken).
    pub fn take_expired_to(&mut self) -> Vec<String> {
        let mut v = std::mem::take(&mut self.expired_to);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Takes queue `qk`'s delayed messages out of the waiting set (forced delete); returns them.
    fn undelay_queue(&mut self, qk: QueueKey) -> Vec<MessageId> {
        let ids: Vec<(u64, MessageId, QueueKey)> =
            self.delayed.iter().filter(|e| e.2 == qk).copied().collect();
        for e in &ids {
            self.delayed.remove(e);
        }
        if let Some(q) = self.queues.get_mut(&qk) {
            q.delayed = 0;
        }
        ids.into_iter().map(|e| e.1).collect()
    }

    /// See [`crate::Store::delayed_due`]: makes the messages due by `until_ms` ready and names
    /// the queues that got delayed messages since the last call (by this or by receives).
    /// Also names the expiry queues that got expired messages from receives since then.
    pub fn delayed_due(&mut self, until_ms: u64) -> (Vec<String>, Option<u64>) {
        let promoted = self.promote_due(until_ms);
        let mut keys = std::mem::take(&mut self.due_unreported);
        keys.extend(promoted);
        let mut names: Vec<String> = keys
            .iter()
            .filter_map(|qk| self.queues.get(qk).map(|q| q.name.to_string()))
            .collect();
        names.extend(self.take_expired_to());
        names.sort_unstable();
        names.dedup();
        (names, self.delayed.first().map(|e| e.0))
    }

    /// Puts message `id` in the ready indexes of queue `qk` (and of its sender).
    fn make_ready(&mut self, id: MessageId, qk: QueueKey) {
        let Some(m) = self.messages.get(&id).map(|e| e.msg.clone()) else {
            return;
        };
        self.make_ready_stored(&m, qk);
    }

    /// [`State::make_ready`] for a message at hand.
    fn make_ready_stored(&mut self, m: &Stored, qk: QueueKey) {
        let id = m.id;
        if let Some(q) = self.queues.get_mut(&qk) {
            q.ready.insert(m.receiver_key, m.priority, id);
            q.ready_count += 1;
            q.ready_bytes += m.body.len() as u64;
            if m.expires_at != 0 {
                q.expiring += 1;
            }
        }
        // By-sender receives do not search subscription queues.
        if !is_subscription(qk) {
            self.senders.entry(m.sender_key).or_default().insert(
                m.receiver_key,
                m.priority,
                (id, qk),
            );
        }
    }

    /// Takes message `id` on queue `qk` out of the delayed set; whether it was there.
    fn undelay(&mut self, id: MessageId, qk: QueueKey) -> bool {
        let Some(at) = self.messages.get(&id).map(|e| e.msg.deliver_at) else {
            return false;
        };
        let found = at != 0 && self.delayed.remove(&(at, id, qk));
        if found {
            if let Some(q) = self.queues.get_mut(&qk) {
                q.delayed = q.delayed.saturating_sub(1);
            }
        }
        found
    }

    /// Takes message `id` out of the ready indexes of queue `qk`; whether it was ready there.
    fn unready(&mut self, id: MessageId, qk: QueueKey) -> bool {
        let Some(m) = self.messages.get(&id).map(|e| e.msg.clone()) else {
            return false;
        };
        self.unready_stored(&m, qk)
    }

    /// [`State::unready`] for a message at hand.
    fn unready_stored(&mut self, m: &Stored, qk: QueueKey) -> bool {
        let id = m.id;
        let mut found = false;
        if let Some(q) = self.queues.get_mut(&qk) {
            found = q.ready.remove(m.receiver_key, m.priority, id);
            if found {
                q.ready_count -= 1;
                q.ready_bytes = q.ready_bytes.saturating_sub(m.body.len() as u64);
                if m.expires_at != 0 {
                    q.expiring = q.expiring.saturating_sub(1);
                }
            }
        }
        if is_subscription(qk) {
            return found;
        }
        if let Some(s) = self.senders.get_mut(&m.sender_key) {
            s.remove(m.receiver_key, m.priority, (id, qk));
            if s.is_empty() {
                self.senders.remove(&m.sender_key);
            }
        }
        found
    }

    /// How many messages the expiry index holds (tests: it must not keep messages that are
    /// gone).
    #[cfg(test)]
    pub fn expiry_index_len(&self) -> usize {
        self.by_expiry.len()
    }

    /// Stores a message's entry, and indexes it by expiry time if it has one. Its sender and
    /// receiver now hold it.
    fn insert_entry(&mut self, id: MessageId, entry: Entry) {
        if entry.msg.expires_at != 0 {
            self.by_expiry.insert((entry.msg.expires_at, id));
        }
        self.clients.hold(entry.msg.sender_key);
        if let Some(r) = entry.msg.receiver_key {
            self.clients.hold(r);
        }
        let mut bytes = self.memory_bytes + footprint(&entry.msg);
        if let Some(old) = self.messages.insert(id, entry) {
            bytes -= footprint(&old.msg);
        }
        self.set_memory(bytes);
    }

    /// Removes message `id` from queue `qk` for good (it must be out of the ready indexes);
    /// forgets the message when no queue holds it any more.
    fn drop_slot(&mut self, id: MessageId, qk: QueueKey) {
        let hash_map::Entry::Occupied(mut entry) = self.messages.entry(id) else {
            return;
        };
        let e = entry.get_mut();
        e.slots.retain(|s| s.queue != qk);
        if let Some(q) = self.queues.get_mut(&qk) {
            q.left += 1;
        }
        if e.slots.is_empty() {
            let (segment, size, expires_at) = (e.segment, e.size, e.msg.expires_at);
            let msg = entry.remove().msg;
            let bytes = self.memory_bytes.saturating_sub(footprint(&msg));
            self.set_memory(bytes);
            self.clients.release(msg.sender_key);
            if let Some(r) = msg.receiver_key {
                self.clients.release(r);
            }
            if expires_at != 0 {
                self.by_expiry.remove(&(expires_at, id));
            }
            if segment != UNLOGGED {
                self.journal.drop_live(segment, size);
            }
        }
    }

    /// Replays one intact record found at `segment` (`size` bytes) during recovery.
    pub fn replay(&mut self, record: Record, segment: u64, size: u32) {
        self.journal.record(segment, u64::from(size));
        self.apply(record, segment, size);
    }

    /// Applies one replayed record (a group's records one after the other).
    fn apply(&mut self, record: Record, segment: u64, size: u32) {
        match record {
            Record::Group(records) => {
                for (r, size) in records {
                    self.apply(r, segment, size);
                }
            }
            Record::TopicCreated(name) => self.insert_topic(&name),
            Record::TopicDeleted(name) => self.remove_topic(&name),
            Record::SubscriptionCreated(def) => self.replay_subscription(def),
            Record::SubscriptionDeleted { topic, name } => self.remove_subscription(&topic, &name),
            Record::ClientRegistered(name) => self.replay_registered(&name, segment, size),
            Record::ClientForgotten(name) => self.replay_forgotten(&name),
            Record::QueueCreated(name) => self.insert_queue(&name),
            Record::QueueDeleted(name) => {
                if let Some(&qk) = self.queue_keys.get(name.as_str()) {
                    // Its messages were removed by earlier records; be lenient all the same.
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
            Record::MessageAdded(added) => self.replay_added(added, segment, size),
            Record::DeliveryStarted { id, queue, count } => {
                let Some(&qk) = self.queue_keys.get(queue.as_str()) else {
                    return;
                };
                if let Some(slot) = self
                    .messages
                    .get_mut(&id)
                    .and_then(|e| e.slots.iter_mut().find(|s| s.queue == qk))
                {
                    slot.count = count;
                }
            }
            Record::QueueOptions {
                name,
                max_deliveries,
                dead_letter_queue,
                expiry_queue,
            } => {
                self.set_options(&name, max_deliveries, dead_letter_queue.as_deref());
                self.set_expiry(&name, expiry_queue.as_deref());
            }
            Record::MessageRemoved { id, queue } => {
                // A removal of a message whose add was compacted away is simply dead.
                let Some(&qk) = self.queue_keys.get(queue.as_str()) else {
                    return;
                };
                if self.unready(id, qk) || self.undelay(id, qk) {
                    self.drop_slot(id, qk);
                }
            }
        }
    }

    /// A `MessageAdded` record replaces whatever state an earlier record of the same id left
    /// (compaction rewrites a message with its current queues and counts).
    fn replay_added(&mut self, a: AddedMessage, segment: u64, size: u32) {
        self.next_id = self.next_id.max(a.id.saturating_add(1));
        if let Some(old) = self.messages.get(&a.id) {
            let queues: Vec<QueueKey> = old.slots.iter().map(|s| s.queue).collect();
            for qk in queues {
                if !self.unready(a.id, qk) {
                    self.undelay(a.id, qk);
                }
                self.drop_slot(a.id, qk);
            }
        }
        let slots: Slots = a
            .queues
            .iter()
            .filter_map(|(name, count)| {
                let qk = *self.queue_keys.get(name.as_str())?;
                Some(Slot {
                    queue: qk,
                    count: *count,
                    lease: None,
                })
            })
            .collect();
        if slots.len() != a.queues.len() {
            tracing::warn!(
                id = a.id,
                "message names a queue that does not exist; ignored there"
            );
        }
        if slots.is_empty() {
            return;
        }
        let (sender_key, sender) = self.client_key(&a.sender);
        let receiver = a.receiver.as_deref().map(|r| self.client_key(r));
        let msg = Arc::new(Stored {
            id: a.id,
            sender,
            sender_key,
            receiver_key: receiver.as_ref().map(|r| r.0),
            receiver: receiver.map(|r| r.1),
            priority: a.priority,
            context: a.context,
            properties: a.properties,
            body: a.body,
            created_at: a.created_at,
            deliver_at: a.deliver_at,
            expires_at: a.expires_at,
            persistent: true,
        });
        let queues: Vec<QueueKey> = slots.iter().map(|s| s.queue).collect();
        self.insert_entry(
            a.id,
            Entry {
                msg,
                slots,
                segment,
                size,
            },
        );
        self.journal.add_live(segment, a.id, size);
        for qk in queues {
            self.place(a.id, qk);
        }
    }

    /// Re-appends every live message whose current `MessageAdded` record is in `segment`, with
    /// its current queues and delivery counts, and every registration whose `ClientRegistered`
    /// record is there, so that the segment holds nothing live. Returns the bytes rewritten.
    pub fn rewrite_segment(&mut self, log: &mut LogGuard<'_>, segment: u64) -> u64 {
        let mut bytes = self.rewrite_registrations(log, segment);
        let ids = self
            .journal
            .segments
            .get_mut(&segment)
            .map(|s| std::mem::take(&mut s.ids))
            .unwrap_or_default();
        for id in ids {
            let Some(e) = self.messages.get(&id) else {
                continue;
            };
            if e.segment != segment {
                continue;
            }
            let msg = e.msg.clone();
            let slots: Vec<(Arc<str>, u32)> = e
                .slots
                .iter()
                .filter_map(|s| Some((self.queues.get(&s.queue)?.name.clone(), s.count)))
                .collect();
            let (old_segment, old_size) = (e.segment, e.size);
            // Never inside a transaction group: compaction runs on its own.
            let (seg, size) = self.journal.append(
                log,
                |b| {
                    record::encode_message_added(
                        b,
                        &msg.fields(),
                        slots.iter().map(|(q, c)| (&**q, *c)),
                    )
                },
                snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
            );
            self.journal.drop_live(old_segment, old_size);
            self.journal.add_live(seg, id, size);
            if let Some(e) = self.messages.get_mut(&id) {
                e.segment = seg;
                e.size = size;
            }
            bytes += u64::from(size);
        }
        bytes
    }

    /// Number of stored messages (tests and diagnostics).
    pub fn message_count(&self) -> usize {
        self.messages.len()
    }
}

impl State {
    /// Starts recovery from the metadata snapshot in the oldest segment's header.
    pub fn apply_snapshot(&mut self, h: &header::SegmentHeader) {
        self.next_id = self.next_id.max(h.next_id);
        for q in &h.queues {
            self.insert_queue(q);
        }
        self.snapshot_registrations(&h.clients, h.segment);
        for (name, max, dlq) in &h.options {
            self.set_options(name, *max, dlq.as_deref());
        }
        for (name, x) in &h.expiry {
            self.set_expiry(name, Some(x));
        }
        for t in &h.topics {
            self.insert_topic(t);
        }
        for def in &h.subscriptions {
            self.replay_subscription(def.clone());
        }
    }
}
