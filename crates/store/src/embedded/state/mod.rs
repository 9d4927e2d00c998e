//! The embedded engine's in-memory state: clients, queues, messages, ready indexes, leases, and
//! the journal that tracks where records land in the log.
//!
//! - [`index`]: ready indexes in both orders, split by receiver;
//! - [`leases`]: client-ack leases by id, deadline and session;
//! - [`journal`]: record placement, segment rolling and live-byte accounting;
//! - [`messages`]: send, publish and receive; `settling`: acks, nacks, dead letters, leases
//!   released or expired;
//! - `direct`: push consumers that take non-persistent publishes without queueing them;
//!   `run`: a run of publishes sharing all but their bodies, handed to them in one step;
//! - [`topics`]: topics and subscriptions (each backed by a queue of its own);
//! - [`txn`]: transactions, whose records form one group in the log;
//! - [`registry`]: client names, permanent or in memory, what they hold, their expiry;
//! - `queues`: creating, configuring, deleting and listing queues;
//! - `placement`: readiness, delays and expiry indexing of the messages on each queue;
//! - `replay`: recovery from a segment header's snapshot and the records after it;
//! - `rewrite`: re-appending a segment's live records for compaction;
//! - this file: the types and the log appends every part shares.
//!
//! The state sits behind one `std::sync::Mutex` in the store, which is never held across an
//! `.await`. Every mutation encodes its records into the log buffer *while* holding it, so that
//! the log's order is the order of state changes: a take's removal record always follows the
//! add record of its message, and its durability implies the add's.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{MessageId, Properties};
use ferry_selector::{Header, SelectorSource, Value};
use smallvec::SmallVec;

use super::format::codec::str_fits;
use super::format::header;
use super::format::record::{self, MessageFields};
use super::writer::LogGuard;
use crate::error::StoreError;
pub use crate::id_hash::{IdHasher, IdMap};
use crate::id_slab::IdSlab;
use crate::select;

mod admin;
pub mod cache;
mod direct;
pub mod index;
pub mod journal;
pub mod lane;
pub mod leases;
pub mod messages;
mod placement;
mod queues;
pub mod registry;
mod replay;
mod rewrite;
mod run;
mod settling;
pub mod topics;
pub mod txn;

use super::bodies::{BodyReader, Location};
use cache::BodyCache;
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
const GROUPED: u64 = (1 << 40) - 1;

/// The receiver key of a message addressed to no client.
pub const NO_CLIENT: ClientKey = ClientKey::MAX;

/// [`Stored::flags`]: records are written for it (its body is in the log).
const PERSISTENT: u8 = 1;
/// [`Stored::flags`]: it has properties, kept in the state's properties map.
const PROPERTIES_IN_MEMORY: u8 = 2;
/// [`Stored::flags`]: it has properties, in its record only (over the properties budget).
const PROPERTIES_LOGGED: u8 = 4;

/// A stored message as the state keeps it: what ordering, selection and bookkeeping need, in
/// 48 bytes with no allocation of its own. Its sender and receiver are registry keys (the
/// names are the registry's); its body is in its `MessageAdded` record (a non-persistent
/// message's in the state's map of unlogged bodies), its properties, if any, in the state's
/// map of properties. Shared by every queue it is on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stored {
    /// Application context.
    pub context: u64,
    /// Arrival time.
    pub created_at: u64,
    /// Not visible before this time (0 = at once).
    pub deliver_at: u64,
    /// Never delivered at or after this time (0 = never).
    pub expires_at: u64,
    /// Sending client.
    pub sender: ClientKey,
    /// Addressed client, or [`NO_CLIENT`].
    pub receiver: ClientKey,
    /// Bytes of its body.
    pub body_len: u32,
    /// 1 to 10.
    pub priority: u8,
    /// [`PERSISTENT`], [`PROPERTIES_IN_MEMORY`], [`PROPERTIES_LOGGED`].
    flags: u8,
}

impl Stored {
    /// Whether the message has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at != 0 && self.expires_at <= now_ms
    }

    /// `false`: in memory only; no record is ever written for it or for what happens to it.
    pub fn persistent(&self) -> bool {
        self.flags & PERSISTENT != 0
    }

    /// Whether it has properties in the state's properties map.
    fn has_properties(&self) -> bool {
        self.flags & PROPERTIES_IN_MEMORY != 0
    }

    /// Whether it has properties that are in its record only.
    pub fn properties_logged(&self) -> bool {
        self.flags & PROPERTIES_LOGGED != 0
    }

    /// Its addressed client, if any.
    pub fn receiver_key(&self) -> Option<ClientKey> {
        (self.receiver != NO_CLIENT).then_some(self.receiver)
    }
}

/// Where a message's current `MessageAdded` record is: segment and offset as 40-bit numbers in
/// 14 bytes (a segment may be up to 16 GiB; segment numbers only grow).
#[derive(Debug, Clone, Copy, Default)]
struct Place {
    segment_low: u32,
    offset_low: u32,
    size: u32,
    segment_high: u8,
    offset_high: u8,
}

impl Place {
    fn new(segment: u64, offset: u64, size: u32) -> Self {
        debug_assert!(segment <= GROUPED && offset < 1 << 40);
        Place {
            segment_low: segment as u32,
            offset_low: offset as u32,
            size,
            segment_high: (segment >> 32) as u8,
            offset_high: (offset >> 32) as u8,
        }
    }

    fn segment(&self) -> u64 {
        u64::from(self.segment_high) << 32 | u64::from(self.segment_low)
    }

    fn offset(&self) -> u64 {
        u64::from(self.offset_high) << 32 | u64::from(self.offset_low)
    }
}

/// A stored message as a selector reads it: the message, its names and its properties,
/// borrowed. Properties that are in the log only (`None`) read as absent, and the selector's
/// asking for one is noted (`missed`): its verdict then waits for them to be read.
#[derive(Debug)]
pub struct Selectable<'a> {
    msg: &'a Stored,
    sender: &'a str,
    receiver: Option<&'a str>,
    properties: Option<&'a [(String, ferry_protocol::PropertyValue)]>,
    missed: std::cell::Cell<bool>,
}

impl Selectable<'_> {
    /// Whether `selector` takes the message: `Some(verdict)`, or `None` when it asked for
    /// properties that are in the log only.
    pub fn verdict(&self, selector: &ferry_selector::Selector) -> Option<bool> {
        let verdict = selector.matches(self);
        (!self.missed.get()).then_some(verdict)
    }
}

impl SelectorSource for Selectable<'_> {
    fn header(&self, h: Header) -> Value<'_> {
        let m = self.msg;
        select::header(
            h,
            m.priority,
            self.sender,
            self.receiver,
            m.context,
            m.created_at,
        )
    }

    fn property(&self, name: &str) -> Value<'_> {
        match self.properties {
            Some(properties) => select::property(properties, name),
            None => {
                self.missed.set(true);
                Value::Null
            }
        }
    }
}

/// The name of client `key` (empty if it has none: a message holds its names, so never).
fn name_of(clients: &Registry, key: ClientKey) -> &str {
    clients.entry(key).map_or("", |r| &r.name)
}

/// Message `id` (`msg`) as a selector reads it, its names from `clients` and its properties
/// from `properties`, or from `known` (read from the log) when they are in the log only.
fn selectable<'a>(
    clients: &'a Registry,
    properties: &'a IdMap<MessageId, Properties>,
    known: Option<&'a IdMap<MessageId, Properties>>,
    id: MessageId,
    msg: &'a Stored,
) -> Selectable<'a> {
    let properties = if msg.has_properties() {
        Some(properties.get(&id).map_or(&[][..], |p| &p[..]))
    } else if msg.properties_logged() {
        known.and_then(|k| k.get(&id)).map(|p| &p[..])
    } else {
        Some(&[][..])
    };
    selectable_with(clients, msg, properties)
}

/// `msg` as a selector reads it, with `properties` (`None`: in the log only).
fn selectable_with<'a>(
    clients: &'a Registry,
    msg: &'a Stored,
    properties: Option<&'a [(String, ferry_protocol::PropertyValue)]>,
) -> Selectable<'a> {
    Selectable {
        msg,
        sender: name_of(clients, msg.sender),
        receiver: msg.receiver_key().map(|r| name_of(clients, r)),
        properties,
        missed: std::cell::Cell::new(false),
    }
}

/// The fields of the `MessageAdded` record of message `id` (`msg`), whose body is `body` and
/// properties `properties`, its names from `clients`.
fn record_fields<'a>(
    clients: &'a Registry,
    properties: &'a Properties,
    id: MessageId,
    msg: &Stored,
    body: &'a [u8],
) -> MessageFields<'a> {
    MessageFields {
        id,
        created_at: msg.created_at,
        context: msg.context,
        priority: msg.priority,
        sender: name_of(clients, msg.sender),
        receiver: msg.receiver_key().map(|r| name_of(clients, r)),
        properties,
        body,
        deliver_at: msg.deliver_at,
        expires_at: msg.expires_at,
    }
}

/// A message's place on one queue.
#[derive(Debug, Clone, Copy)]
struct Slot {
    queue: QueueKey,
    /// Client-ack deliveries so far on this queue.
    count: u32,
    /// The lease holding it, if it is in flight (delivery ids start at 1).
    lease: Option<NonZeroU64>,
}

/// The queues a send or publish puts a message on (inline up to four: no allocation).
pub type QueueKeys = SmallVec<[QueueKey; 4]>;

/// The queues a message is on.
type Slots = SmallVec<[Slot; 1]>;

/// A stored message with the queues it is still on: 88 bytes, no allocation of its own for
/// a message on one queue.
#[derive(Debug, Default)]
struct Entry {
    msg: Stored,
    /// Its current `MessageAdded` record ([`UNLOGGED`] segment for a non-persistent message).
    place: Place,
    /// Inline for the common message on one queue.
    slots: Slots,
}

// The layout the footprint figures (docs/storage-format.md) rely on.
const _: () = assert!(std::mem::size_of::<Stored>() == 48 && std::mem::size_of::<Entry>() == 88);

impl Entry {
    fn segment(&self) -> u64 {
        self.place.segment()
    }

    /// Where its `MessageAdded` record is, if it has one.
    fn location(&self) -> Option<Location> {
        let segment = self.segment();
        (segment != UNLOGGED && segment != GROUPED).then_some(Location {
            segment,
            offset: self.place.offset(),
            size: self.place.size,
        })
    }
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
    /// Messages added in the group, with the offset of their `MessageAdded` record in `buf`
    /// and its size.
    adds: Vec<(MessageId, u64, u32)>,
}

/// Everything the embedded engine knows.
#[derive(Debug)]
pub struct State {
    /// The next message id to hand out.
    pub next_id: MessageId,
    /// Registered client names.
    clients: Registry,
    queue_keys: BTreeMap<Arc<str>, QueueKey>,
    /// How many of `queue_keys` are user queues (not subscriptions'), kept so that the queue
    /// limit is checked without walking every queue.
    user_queue_count: usize,
    queues: IdMap<QueueKey, Queue>,
    next_queue_key: QueueKey,
    /// Every stored message, by id (ids are dense: see [`IdSlab`]).
    messages: IdSlab<Entry>,
    /// Bodies of the non-persistent messages (the others are in the log).
    unlogged: IdMap<MessageId, Bytes>,
    /// Properties of the messages that have some, unless they are in the log only.
    properties: IdMap<MessageId, Properties>,
    /// About the bytes the properties of persistent messages take in `properties`, and the
    /// most they may take.
    properties_bytes: u64,
    properties_budget: u64,
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
    /// About the bytes the messages held take in memory (see [`MESSAGE_OVERHEAD`]), counted here and
    /// published to `memory`, shared so that it can be read without the state's lock (a plain
    /// store under the lock, no read-modify-write).
    memory_bytes: u64,
    memory: Arc<AtomicU64>,
    /// Recently written bodies (see [`cache`]).
    cache: BodyCache,
    /// Reads bodies from the log on the rare paths that need one under the lock (operators'
    /// browse and moves, dead-letter and expiry copies); `None` until the store is open.
    reader: Option<BodyReader>,
}

/// Bytes a message takes in memory besides its body and properties: its 88-byte entry in the
/// messages slab and its places in the ready (8) and by-sender (16) indexes (see
/// `tests/index_footprint.rs`).
const MESSAGE_OVERHEAD: u64 = 112;

/// About the bytes that properties take in memory.
fn properties_footprint(properties: &Properties) -> u64 {
    if properties.is_empty() {
        return 0;
    }
    let bytes: usize = properties
        .iter()
        .map(|(name, v)| {
            name.len()
                + 48
                + match v {
                    ferry_protocol::PropertyValue::Str(s) => s.len(),
                    _ => 0,
                }
        })
        .sum();
    (bytes + 24) as u64
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
            user_queue_count: 0,
            queues: IdMap::default(),
            next_queue_key: 0,
            messages: IdSlab::default(),
            unlogged: IdMap::default(),
            properties: IdMap::default(),
            properties_bytes: 0,
            properties_budget: super::config::DEFAULT_PROPERTIES_BYTES,
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
            cache: BodyCache::new(super::config::DEFAULT_CACHE_BYTES),
            reader: None,
        }
    }

    /// Gives the state its body cache of `capacity` bytes and the reader of its segments.
    pub fn set_bodies(&mut self, capacity: u64, reader: BodyReader) {
        self.cache = BodyCache::new(capacity);
        self.reader = Some(reader);
    }

    /// Keeps at most `bytes` of persistent messages' properties in memory: those of the
    /// oldest messages; the others' (recovery kept every one) are dropped from memory, to be
    /// read from the log when needed.
    pub fn set_properties_budget(&mut self, bytes: u64) {
        self.properties_budget = bytes;
        if self.properties_bytes <= bytes {
            return;
        }
        let mut ids: Vec<MessageId> = self
            .properties
            .keys()
            .copied()
            .filter(|id| self.messages.get(*id).is_some_and(|e| e.msg.persistent()))
            .collect();
        ids.sort_unstable();
        let mut kept = 0;
        let mut freed = 0;
        for id in ids {
            let size = self.properties.get(&id).map_or(0, properties_footprint);
            if kept + size <= bytes {
                kept += size;
                continue;
            }
            self.properties.remove(&id);
            if let Some(e) = self.messages.get_mut(id) {
                e.msg.flags = e.msg.flags & !PROPERTIES_IN_MEMORY | PROPERTIES_LOGGED;
            }
            freed += size;
        }
        self.properties_bytes = kept;
        let memory = self.memory_bytes.saturating_sub(freed);
        self.set_memory(memory);
    }

    /// The properties of message `id`: in memory, or read from the log *under the lock* (only
    /// for rare operations, as [`State::load_body`]).
    fn load_properties(&self, id: MessageId) -> Result<Properties, StoreError> {
        let Some(e) = self.messages.get(id) else {
            return Err(StoreError::Internal(format!("message {id} is not stored")));
        };
        if !e.msg.properties_logged() {
            return Ok(self.properties.get(&id).cloned().unwrap_or_default());
        }
        let (Some(reader), Some(at)) = (&self.reader, self.location(id)) else {
            return Err(StoreError::Internal(format!(
                "the properties of message {id} have no place in the log"
            )));
        };
        reader.read_properties(id, at).map_err(|e| {
            StoreError::Unavailable(format!("reading the properties of message {id}: {e}"))
        })
    }

    /// The body cache's figures, to read without the lock.
    pub fn cache_figures(&self) -> Arc<cache::CacheFigures> {
        self.cache.figures()
    }

    /// Limits the body cache under memory pressure (`None`: its configured capacity).
    pub fn limit_cache(&mut self, bytes: Option<u64>) {
        self.cache.limit(bytes);
    }

    /// Where the current `MessageAdded` record of message `id` is, if it has one.
    pub fn location(&self, id: MessageId) -> Option<Location> {
        self.messages.get(id)?.location()
    }

    /// The body of message `id`: in memory, cached, or read from the log *under the lock*
    /// (only for rare operations: operators' browse and moves, dead-letter and expiry copies).
    fn load_body(&self, id: MessageId) -> Result<Bytes, StoreError> {
        if !self.messages.contains_key(id) {
            return Err(StoreError::Internal(format!("message {id} is not stored")));
        }
        if let Some(b) = self.unlogged.get(&id) {
            return Ok(b.clone());
        }
        if let Some(b) = self.cache.peek(id) {
            return Ok(b);
        }
        let (Some(reader), Some(at)) = (&self.reader, self.location(id)) else {
            return Err(StoreError::Internal(format!(
                "the body of message {id} has no place in the log"
            )));
        };
        reader
            .read(id, at)
            .map_err(|e| StoreError::Unavailable(format!("reading the body of message {id}: {e}")))
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

    /// Appends the `MessageAdded` record with `fields` on `keys` (every
    /// delivery count 0) and accounts for it; returns its segment, offset and size.
    fn append_added(
        &mut self,
        log: &mut LogGuard<'_>,
        fields: &MessageFields<'_>,
        keys: &[QueueKey],
    ) -> (u64, u64, u32) {
        let queues = &self.queues;
        let id = fields.id;
        let encode = |b: &mut Vec<u8>| {
            record::encode_message_added(
                b,
                fields,
                keys.iter()
                    .map(|qk| (queues.get(qk).map_or("", |q| &*q.name), 0)),
            )
        };
        if let Some(g) = &mut self.group {
            let at = g.buf.len() as u64;
            let size = encode(&mut g.buf);
            g.adds.push((id, at, size));
            return (GROUPED, 0, size);
        }
        let (segment, size) = self.journal.append(
            log,
            encode,
            snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
        );
        self.journal.add_live(segment, id, size);
        (segment, self.journal.last_offset, size)
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
        self.messages.get(id).is_some_and(|e| e.msg.persistent())
    }

    /// Number of stored messages (tests and diagnostics).
    pub fn message_count(&self) -> usize {
        self.messages.len()
    }
}
