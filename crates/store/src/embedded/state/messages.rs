//! Message operations on the state: send and publish, receive (peek, auto-ack and client-ack
//! takes, by queue or by sender), and settling client-ack deliveries (ack, nack, release,
//! expiry).
//!
//! A non-persistent message is handled exactly like the others, except that no record is ever
//! written for it: not its add, nor any delivery, removal or dead-letter move.
//!
//! Each function changes the state and encodes the matching records into the log buffer in
//! the same step; the caller waits for the batch's ticket *after* unlocking. A requeue writes
//! nothing: after a crash every leased message comes back anyway, with the delivery count of
//! its last `DeliveryStarted` record.

use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{
    AckMode, DeliveryId, MessageId, Name, Properties, ReceiveMode, Source, MAX_PRIORITY,
    MIN_PRIORITY,
};

use super::super::bodies::Location;
use super::super::format::codec::{properties_fit, str_fits};
use super::super::format::record::{self, MessageFields};
use super::super::writer::LogGuard;
use super::index::Cursor;
use super::leases::{Lease, NO_DEADLINE};
use super::{
    selectable, ClientKey, Entry, IdMap, Place, QueueKey, QueueKeys, Selectable, Slot, State,
    Stored, NO_CLIENT, PERSISTENT, UNLOGGED,
};
use crate::api::{NewMessage, ReceiveSpec, SessionId};
use crate::error::StoreError;

/// Largest record the format can frame (its length field is a u32).
const MAX_RECORD: usize = u32::MAX as usize - 64;

/// One message handed out by [`State::receive`], turned into a `Delivery` after unlocking.
#[derive(Debug)]
pub struct Handout {
    /// Message id.
    pub id: MessageId,
    /// The message.
    pub msg: Stored,
    /// Its sender's name.
    pub sender: Arc<str>,
    /// Its receiver's name.
    pub receiver: Option<Arc<str>>,
    /// Its properties.
    pub properties: Properties,
    /// Whether its properties are still to be read from its record (with its body).
    pub properties_pending: bool,
    /// The queue it came from.
    pub queue: Arc<str>,
    /// Delivery id (0 for peeks and auto-ack takes).
    pub delivery_id: DeliveryId,
    /// Client-ack deliveries before this one.
    pub delivery_count: u32,
    /// Its body, when it was at hand (in memory or cached); otherwise the caller reads it
    /// from `at` after unlocking.
    pub body: Option<Bytes>,
    /// Where its record is, when `body` is not at hand.
    pub at: Option<Location>,
    /// For an auto-ack take whose body must be read from the log: the lease that holds it
    /// meanwhile (0 otherwise). Once the body is read, [`State::finish_take`] removes it as
    /// the take would have; if it cannot be read, [`State::put_back`] makes it ready again,
    /// so that a failed read loses nothing.
    pub held: DeliveryId,
}

/// Where a receive's walk over a ready index stopped, so that the next step goes on from
/// there. Starts at the head of the index ([`Walk::default`]).
///
/// A selector that asks for properties that are in the log only cannot judge their message
/// under the lock: the step stops picking at the first such message, lists the messages whose
/// properties it needs (`wanted`), and leaves the walk where the step started. The caller reads
/// those properties without the lock into `known`, and the next step walks the same entries
/// again, judging them.
#[derive(Debug, Default)]
pub struct Walk {
    queue: Option<Cursor<MessageId>>,
    sender: Option<Cursor<(MessageId, QueueKey)>>,
    /// Whether the walk reached the end of the index.
    pub end: bool,
    /// Messages whose properties the last step needed, and where their records are.
    pub wanted: Vec<(MessageId, Option<Location>)>,
    /// Properties read from the log for the step about to walk again.
    pub known: IdMap<MessageId, Properties>,
    /// Messages the receive's steps picked so far, and the bytes of their bodies (for
    /// [`ReceiveSpec::max_bytes`]).
    taken: usize,
    taken_bytes: u64,
}

/// Most record bytes one step of a walk asks to be read for their properties.
const WANTED_BYTES: u64 = 4 * 1024 * 1024;

/// What the previous messages of a batch looked up, valid while the state lock is held: a
/// batch usually comes from one client and publishes to one topic, whose names are then looked
/// up once instead of once per message.
#[derive(Debug, Default)]
pub struct BatchMemo {
    sender: Option<LastSenderEntry>,
    /// A topic a previous message was checked against or published to: it exists. The
    /// messages of a decoded batch share their topic's allocation, so the next one is
    /// recognised by pointer before any bytes are compared.
    topic: Option<Name>,
    /// The queues every message published to `topic` goes to, when no subscription of it has
    /// a selector.
    targets: Option<QueueKeys>,
}

impl BatchMemo {
    /// Whether `topic` is the one a previous message was checked against.
    fn knows_topic(&self, topic: &Name) -> bool {
        self.topic
            .as_ref()
            .is_some_and(|t| t.same_allocation(topic) || t == topic)
    }

    /// Notes that `topic` exists.
    fn note_topic(&mut self, topic: &Name) {
        if !self.knows_topic(topic) {
            self.topic = Some(topic.clone());
            self.targets = None;
        }
    }

    /// The queues a message published to `topic` goes to, if they do not depend on the message.
    fn targets_of(&self, topic: &Name) -> Option<&QueueKeys> {
        self.targets.as_ref().filter(|_| self.knows_topic(topic))
    }
}

#[derive(Debug)]
struct LastSenderEntry {
    /// The name as the caller passed it: every message of a session's batch shares one
    /// allocation, so the next message is recognised by pointer, without comparing bytes.
    given: Arc<str>,
    key: ClientKey,
}

/// What settling a set of delivery ids did.
#[derive(Debug, Default)]
pub struct Settled {
    /// Ids that are unknown, already settled, or held by another session.
    pub unknown: Vec<DeliveryId>,
    /// Queues that got messages back (requeue), by name, sorted and deduplicated.
    pub requeued: Vec<String>,
    /// Whether records were written (the caller must wait for durability).
    pub wrote: bool,
}

impl State {
    /// Checks a message against the store's state before anything changes; returns the queue
    /// keys in the order named (none for a publish: the subscriptions decide).
    pub(super) fn check_send(
        &self,
        m: &NewMessage,
        memo: &mut BatchMemo,
    ) -> Result<QueueKeys, StoreError> {
        if m.topic.is_some() && !m.queues.is_empty() {
            return Err(StoreError::InvalidArgument(
                "a message is either sent to queues or published to a topic".into(),
            ));
        }
        if m.queues.is_empty() && m.topic.is_none() {
            return Err(StoreError::InvalidArgument(
                "a message needs at least one queue".into(),
            ));
        }
        if m.queues.len() > usize::from(u16::MAX) {
            return Err(StoreError::InvalidArgument(
                "too many queues in one send".into(),
            ));
        }
        if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&m.priority) {
            return Err(StoreError::InvalidArgument(format!(
                "priority {} is outside {MIN_PRIORITY}..={MAX_PRIORITY}",
                m.priority
            )));
        }
        let mut keys = QueueKeys::with_capacity(m.queues.len());
        for name in &m.queues {
            let Some(qk) = self.user_queue(name) else {
                return Err(StoreError::QueueNotFound(name.clone()));
            };
            if keys.contains(&qk) {
                return Err(StoreError::InvalidArgument(format!(
                    "queue '{name}' is named twice"
                )));
            }
            keys.push(qk);
        }
        if let Some(r) = &m.receiver {
            if !self.clients.contains_key(r.as_str()) {
                return Err(StoreError::ClientNotFound(r.clone()));
            }
        }
        if m.sender.is_empty() || !str_fits(&m.sender) || !properties_fit(&m.properties) {
            return Err(StoreError::InvalidArgument(
                "sender or property names too long, or too many properties".into(),
            ));
        }
        if let Some(t) = &m.topic {
            if !memo.knows_topic(t) {
                self.check_publish(t)?;
                memo.note_topic(t);
            }
        }
        // A non-persistent message is never written, so no record limits it.
        if m.persistent && self.added_len(m) > MAX_RECORD {
            return Err(StoreError::InvalidArgument(
                "message too large to store".into(),
            ));
        }
        Ok(keys)
    }

    /// The size of the `MessageAdded` record of `m` (for a publish, as if every subscription of
    /// its topic took it).
    pub(super) fn added_len(&self, m: &NewMessage) -> usize {
        let fields = new_fields(m, 0);
        match m.topic.as_deref().map(|t| self.check_topic(t)) {
            Some(Ok(subs)) => record::message_added_len(&fields, subs),
            Some(Err(_)) => 0,
            None => record::message_added_len(&fields, m.queues.iter().map(String::as_str)),
        }
    }

    /// Stores one message on all its queues, or changes nothing. A sender that was never
    /// registered is registered on the way (the broker registers clients on connect; this keeps
    /// by-sender receives working for any sender).
    ///
    /// A publish (`m.topic`) goes on the queue of every subscription whose selector takes it,
    /// evaluated here, under the same lock hold that stores it; when none does, it gets an id
    /// and is stored nowhere.
    pub fn send(&mut self, log: &mut LogGuard<'_>, m: NewMessage) -> Result<MessageId, StoreError> {
        self.send_next(log, m, &mut BatchMemo::default())
    }

    /// [`State::send`] for the next message of a batch; `last` carries what the previous
    /// messages looked up (their sender, their topic) from one call to the next.
    pub fn send_next(
        &mut self,
        log: &mut LogGuard<'_>,
        m: NewMessage,
        last: &mut BatchMemo,
    ) -> Result<MessageId, StoreError> {
        let keys = self.check_send(&m, last)?;
        self.send_checked(log, m, keys, last)
    }

    /// The key of `sender`, registering it if it is new.
    pub(super) fn sender_key(
        &mut self,
        log: &mut LogGuard<'_>,
        sender: &Arc<str>,
        last: &mut BatchMemo,
    ) -> Result<ClientKey, StoreError> {
        if let Some(e) = &last.sender {
            if Arc::ptr_eq(&e.given, sender) || *e.given == **sender {
                return Ok(e.key);
            }
        }
        let key = match self.clients.get(sender) {
            Some(key) => *key,
            None => {
                self.register_client(log, sender)?;
                self.client_key(sender).0
            }
        };
        last.sender = Some(LastSenderEntry {
            given: sender.clone(),
            key,
        });
        Ok(key)
    }

    /// [`State::send`] after [`State::check_send`] passed, with the keys it returned.
    pub(super) fn send_checked(
        &mut self,
        log: &mut LogGuard<'_>,
        m: NewMessage,
        keys: QueueKeys,
        last: &mut BatchMemo,
    ) -> Result<MessageId, StoreError> {
        let sender = self.sender_key(log, &m.sender, last)?;
        let receiver = m.receiver.as_deref().map(|r| self.client_key(r).0);
        let id = self.next_id;
        self.next_id += 1;
        let msg = Stored {
            context: m.context,
            created_at: m.created_at,
            deliver_at: m.deliver_at_ms,
            expires_at: m.expires_at_ms,
            sender,
            receiver: receiver.unwrap_or(NO_CLIENT),
            body_len: m.body.len() as u32,
            priority: m.priority,
            flags: if m.persistent { PERSISTENT } else { 0 },
        };
        let keys = match &m.topic {
            Some(topic) => {
                let seen = Selectable {
                    msg: &msg,
                    sender: &m.sender,
                    receiver: m.receiver.as_deref(),
                    properties: Some(&m.properties),
                    missed: std::cell::Cell::new(false),
                };
                // Subscriptions without selectors take every message: their queues are looked
                // up once per batch. Those that take it directly are left out.
                let selected = if last.targets_of(topic).is_some() {
                    None
                } else {
                    let (keys, for_any) = self.publish_targets(topic, &seen);
                    if for_any {
                        last.note_topic(topic);
                        last.targets = Some(keys);
                        None
                    } else {
                        Some(keys)
                    }
                };
                // Unless they depend on the message, `last.targets` now holds this topic's.
                let targets = selected.as_ref().or(last.targets.as_ref());
                targets
                    .map(|keys| keys.as_slice())
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .filter(|&qk| !self.deliver_direct(id, &msg, &m, qk))
                    .collect()
            }
            None => keys,
        };
        if keys.is_empty() {
            return Ok(id);
        }
        let (place, unlogged) = if msg.persistent() {
            let fields = new_fields(&m, id);
            let (segment, offset, size) = self.append_added(log, &fields, &keys);
            // From now on the body lives in the log, and in the cache while it is recent.
            self.cache.insert(id, &m.body);
            (Place::new(segment, offset, size), None)
        } else {
            (Place::new(UNLOGGED, 0, 0), Some(m.body))
        };
        let slots = keys
            .iter()
            .map(|&queue| Slot {
                queue,
                count: 0,
                lease: None,
            })
            .collect();
        self.insert_entry(id, Entry { msg, place, slots }, unlogged, m.properties);
        // After the entry: it may have flagged the message's properties as kept.
        if let Some(stored) = self.messages.get(id).map(|e| e.msg) {
            for &qk in &keys {
                self.place_stored(id, &stored, qk);
            }
        }
        Ok(id)
    }

    /// Picks up to `max` messages for `spec` and hands them out; returns them and whether
    /// records were written. The walk over the ready index starts where `walk` says and
    /// examines at most `budget` entries (a selector passes over entries, so its walk is done
    /// in bounded steps, each under the lock); `walk` is left where this step stopped.
    pub fn receive(
        &mut self,
        log: &mut LogGuard<'_>,
        spec: &ReceiveSpec,
        max: usize,
        walk: &mut Walk,
        budget: usize,
    ) -> Result<(Vec<Handout>, bool), StoreError> {
        let client = self.clients.get(spec.client.as_str()).copied();
        let now = spec.now_ms;
        let due = self.promote_due(now);
        self.due_unreported.extend(due);
        let mut picks: Vec<(MessageId, QueueKey)> = Vec::new();
        // What the last step read for this one; otherwise nothing known is needed any more.
        if walk.wanted.is_empty() {
            walk.known.clear();
        }
        walk.wanted.clear();
        // Expired messages met on the way are passed over and removed after the walk.
        let mut expired: Vec<MessageId> = Vec::new();
        // Messages whose properties the selector needs from the log; from the first one on,
        // nothing more is picked in this step (the order of picks is the index's).
        let mut wanted: Vec<(MessageId, Option<Location>)> = Vec::new();
        let mut wanted_bytes = 0u64;
        let mut blocked = false;
        // A selector passes over the messages it does not select; they stay in the index.
        let (messages, clients, properties) = (&self.messages, &self.clients, &self.properties);
        let known = &walk.known;
        let mut selected = |id: &MessageId| {
            let Some(e) = messages.get(*id) else {
                return false;
            };
            if e.msg.expired(now) {
                expired.push(*id);
                return false;
            }
            let Some(selector) = &spec.selector else {
                return true;
            };
            match selectable(clients, properties, Some(known), *id, &e.msg).verdict(selector) {
                Some(verdict) => verdict && !blocked,
                None => {
                    blocked = true;
                    if wanted_bytes < WANTED_BYTES {
                        wanted.push((*id, e.location()));
                        wanted_bytes += u64::from(e.place.size);
                    }
                    false
                }
            }
        };
        match &spec.source {
            Source::Queue(name) => {
                let Some(&qk) = self.queue_keys.get(name.as_str()) else {
                    return Err(StoreError::QueueNotFound(name.clone()));
                };
                let mut ids = Vec::new();
                let from = walk.queue;
                walk.end = true;
                if let Some(q) = self.queues.get(&qk) {
                    // Without a selector or messages that can expire, every entry is taken as
                    // it is: no need to look at the messages during the walk.
                    let look = spec.selector.is_some() || q.expiring > 0;
                    (walk.queue, walk.end) =
                        q.ready
                            .walk(client, spec.order, from, max, budget, &mut ids, |id| {
                                !look || selected(id)
                            });
                }
                if !wanted.is_empty() {
                    (walk.queue, walk.end) = (from, false);
                    walk.wanted = wanted;
                }
                picks.extend(ids.into_iter().map(|id| (id, qk)));
                let mut wrote = false;
                for id in expired {
                    wrote |= self.remove_expired(log, id, qk);
                }
                self.keep_within_bytes(spec, &mut picks, walk);
                return self.hand_out(log, spec, picks, wrote, &walk.known);
            }
            Source::Sender(name) => {
                let Some(&sk) = self.clients.get(name.as_str()) else {
                    return Err(StoreError::ClientNotFound(name.clone()));
                };
                let from = walk.sender;
                walk.end = true;
                if let Some(s) = self.senders.get(&sk) {
                    (walk.sender, walk.end) = s.walk(
                        client,
                        spec.order,
                        from,
                        max,
                        budget,
                        &mut picks,
                        |(id, _)| selected(id),
                    );
                }
                if !wanted.is_empty() {
                    (walk.sender, walk.end) = (from, false);
                    walk.wanted = wanted;
                }
            }
        }
        // By sender the walk names only message ids: remove each expired one from every
        // queue it is ready on.
        let mut wrote = false;
        for id in expired {
            let queues: Vec<QueueKey> = self
                .messages
                .get(id)
                .map(|e| {
                    e.slots
                        .iter()
                        .filter(|s| s.lease.is_none())
                        .map(|s| s.queue)
                        .collect()
                })
                .unwrap_or_default();
            for qk in queues {
                wrote |= self.remove_expired(log, id, qk);
            }
        }
        self.keep_within_bytes(spec, &mut picks, walk);
        self.hand_out(log, spec, picks, wrote, &walk.known)
    }

    /// Cuts `picks` (in the receive's order) where the next body would take the receive past
    /// [`ReceiveSpec::max_bytes`], counting what its earlier steps took; a cut ends the walk.
    /// The index knows each body's length, so nothing is read to decide.
    fn keep_within_bytes(
        &self,
        spec: &ReceiveSpec,
        picks: &mut Vec<(MessageId, QueueKey)>,
        walk: &mut Walk,
    ) {
        if spec.max_bytes.is_none() {
            return;
        }
        let mut keep = 0;
        for (id, _) in picks.iter() {
            let next = self
                .messages
                .get(*id)
                .map_or(0, |e| u64::from(e.msg.body_len));
            if !spec.fits(walk.taken, walk.taken_bytes, next) {
                break;
            }
            walk.taken += 1;
            walk.taken_bytes += next;
            keep += 1;
        }
        if keep < picks.len() {
            picks.truncate(keep);
            // The rest stays where it is; the message that did not fit is first in line.
            walk.end = true;
            walk.wanted.clear();
        }
    }

    /// Removes expired message `id` from queue `qk` if it is ready there; whether it did.
    fn remove_expired(&mut self, log: &mut LogGuard<'_>, id: MessageId, qk: QueueKey) -> bool {
        let Some(queue) = self.queues.get(&qk).map(|q| q.name.clone()) else {
            return false;
        };
        if !self.unready(id, qk) {
            return false;
        }
        self.expire_from(log, id, qk, &queue);
        true
    }

    /// Removes every ready message expired at `now_ms` from its queues; returns how many
    /// queue entries went.
    ///
    /// Only the messages indexed as expired are looked at; those in flight stay (and stay
    /// indexed) until their lease ends.
    pub fn purge_expired(&mut self, log: &mut LogGuard<'_>, now_ms: u64) -> u64 {
        let doomed: Vec<(MessageId, QueueKey)> = self
            .by_expiry
            .range(..=(now_ms, MessageId::MAX))
            .filter_map(|(_, id)| Some((*id, self.messages.get(*id)?)))
            .flat_map(|(id, e)| {
                e.slots
                    .iter()
                    .filter(|s| s.lease.is_none())
                    .map(move |s| (id, s.queue))
            })
            .collect();
        let mut n = 0;
        for (id, qk) in doomed {
            if self.remove_expired(log, id, qk) || self.remove_expired_delayed(log, id, qk) {
                n += 1;
            }
        }
        n
    }

    /// Removes expired message `id` from queue `qk` if it still waits for its delivery time.
    fn remove_expired_delayed(
        &mut self,
        log: &mut LogGuard<'_>,
        id: MessageId,
        qk: QueueKey,
    ) -> bool {
        let Some(queue) = self.queues.get(&qk).map(|q| q.name.clone()) else {
            return false;
        };
        if !self.undelay(id, qk) {
            return false;
        }
        self.expire_from(log, id, qk, &queue);
        true
    }

    /// Hands out the picked messages: leases them, removes them or leaves them (peek).
    fn hand_out(
        &mut self,
        log: &mut LogGuard<'_>,
        spec: &ReceiveSpec,
        picks: Vec<(MessageId, QueueKey)>,
        wrote: bool,
        known: &IdMap<MessageId, Properties>,
    ) -> Result<(Vec<Handout>, bool), StoreError> {
        let mut wrote = wrote;
        let mut out = Vec::with_capacity(picks.len());
        // Picks from one queue come in a row (all of them, by queue): look its name up once.
        let mut named: Option<(QueueKey, Arc<str>)> = None;
        for (id, qk) in picks {
            let queue = match &named {
                Some((k, name)) if *k == qk => name.clone(),
                _ => {
                    let Some(name) = self.queues.get(&qk).map(|q| q.name.clone()) else {
                        continue;
                    };
                    named = Some((qk, name.clone()));
                    name
                }
            };
            let Some(e) = self.messages.get(id) else {
                continue;
            };
            let msg = e.msg;
            let count = e
                .slots
                .iter()
                .find(|s| s.queue == qk)
                .map_or(0, |s| s.count);
            // Properties in the log only are read with the body, unless this receive's
            // selector read them already.
            let (properties, properties_pending) = if msg.properties_logged() {
                known
                    .get(&id)
                    .map_or((Properties::new(), true), |p| (p.clone(), false))
            } else {
                (self.properties_in_memory(id, &msg), false)
            };
            let body = match self.unlogged.get(&id) {
                _ if properties_pending => None,
                Some(b) => Some(b.clone()),
                None => self.cache.get(id),
            };
            let at = if body.is_none() {
                self.location(id)
            } else {
                None
            };
            let (sender, receiver) = self.names(&msg);
            let mut held = 0;
            let delivery_id = match (spec.mode, spec.ack) {
                (ReceiveMode::Peek, _) => 0,
                (ReceiveMode::Take, AckMode::Auto) if spec.hold => {
                    // Held: leased without a deadline, a record or a new delivery count, so
                    // that an ack removes it as the take would have and a release puts it
                    // back as it was (see ReceiveSpec::hold).
                    self.unready_stored(id, &msg, qk);
                    self.lease(id, qk, spec.session, NO_DEADLINE, count)
                }
                (ReceiveMode::Take, AckMode::Auto) if body.is_none() => {
                    // Its body is read after unlocking, and the read may fail: held until
                    // then, without a record, so that nothing is lost if it does.
                    self.unready_stored(id, &msg, qk);
                    held = self.lease(id, qk, spec.session, NO_DEADLINE, count);
                    0
                }
                (ReceiveMode::Take, AckMode::Auto) => {
                    self.unready_stored(id, &msg, qk);
                    // As log_removed, with the message at hand.
                    if msg.persistent() {
                        self.append(log, |b| record::encode_message_removed(b, id, &queue));
                        wrote = true;
                    }
                    self.drop_slot(id, qk);
                    0
                }
                (ReceiveMode::Take, AckMode::Client) => {
                    self.unready_stored(id, &msg, qk);
                    let next = count.saturating_add(1);
                    if msg.persistent() {
                        self.append(log, |b| {
                            record::encode_started_delivery(b, id, &queue, next)
                        });
                        wrote = true;
                    }
                    self.lease(id, qk, spec.session, spec.lease_until_ms, next)
                }
            };
            out.push(Handout {
                id,
                msg,
                sender,
                receiver,
                properties,
                properties_pending,
                queue,
                delivery_id,
                delivery_count: count,
                body,
                at,
                held,
            });
        }
        Ok((out, wrote))
    }

    /// Ends the hold of an auto-ack take whose body was read ([`Handout::held`]): removes the
    /// message from its queue as the take would have. Whether it was still held (a session
    /// released meanwhile put it back: then it must not be handed out).
    pub fn finish_take(&mut self, log: &mut LogGuard<'_>, held: DeliveryId) -> bool {
        let Some((id, qk)) = self.end_lease(held) else {
            return false;
        };
        if let Some(queue) = self.queues.get(&qk).map(|q| q.name.clone()) {
            self.log_removed(log, id, &queue);
            self.drop_slot(id, qk);
        }
        true
    }

    /// Makes a leased or held message whose body could not be read ready again; returns its
    /// queue's name.
    pub fn put_back(&mut self, did: DeliveryId) -> Option<String> {
        let (id, qk) = self.end_lease(did)?;
        self.make_ready(id, qk);
        self.queues.get(&qk).map(|q| q.name.to_string())
    }

    /// The names of `msg`'s sender and receiver, shared with the registry.
    pub(super) fn names(&self, msg: &Stored) -> (Arc<str>, Option<Arc<str>>) {
        let name = |key| {
            self.clients
                .entry(key)
                .map_or_else(|| Arc::from(""), |r| r.name.clone())
        };
        (name(msg.sender), msg.receiver_key().map(name))
    }

    /// A copy of the properties of message `id` (`msg`) kept in memory (none if they are in
    /// the log only).
    pub(super) fn properties_in_memory(&self, id: MessageId, msg: &Stored) -> Properties {
        if msg.has_properties() {
            self.properties.get(&id).cloned().unwrap_or_default()
        } else {
            Properties::new()
        }
    }

    /// Leases message `id` (out of the ready index already) on queue `qk` to `session` until
    /// `deadline`, with `count` as its delivery count there; returns the delivery id.
    fn lease(
        &mut self,
        id: MessageId,
        qk: QueueKey,
        session: SessionId,
        deadline: u64,
        count: u32,
    ) -> DeliveryId {
        let did = self.leases.insert(Lease {
            message: id,
            queue: qk,
            session,
            deadline,
        });
        if let Some(slot) = self
            .messages
            .get_mut(id)
            .and_then(|e| e.slots.iter_mut().find(|s| s.queue == qk))
        {
            slot.count = count;
            slot.lease = std::num::NonZeroU64::new(did);
        }
        if let Some(q) = self.queues.get_mut(&qk) {
            q.in_flight += 1;
        }
        did
    }
}

/// The fields of the `MessageAdded` record of a message being sent, numbered `id`.
fn new_fields(m: &NewMessage, id: MessageId) -> MessageFields<'_> {
    MessageFields {
        id,
        created_at: m.created_at,
        context: m.context,
        priority: m.priority,
        sender: &m.sender,
        receiver: m.receiver.as_deref(),
        properties: &m.properties,
        body: &m.body,
        deliver_at: m.deliver_at_ms,
        expires_at: m.expires_at_ms,
    }
}
