//! Message operations on the state: send, receive (peek, auto-ack and client-ack takes, by
//! queue or by sender), and settling client-ack deliveries (ack, nack, release, expiry).
//!
//! Each function changes the state and encodes the matching records into the log buffer in
//! the same step; the caller waits for the batch's ticket *after* unlocking. A requeue writes
//! nothing: after a crash every leased message comes back anyway, with the delivery count of
//! its last `DeliveryStarted` record.

use std::sync::Arc;

use ferry_protocol::{
    AckMode, DeliveryId, MessageId, ReceiveMode, Source, MAX_PRIORITY, MIN_PRIORITY,
};

use super::super::format::codec::{properties_fit, str_fits};
use super::super::format::record::{self, MessageFields};
use super::super::writer::LogGuard;
use super::index::Cursor;
use super::leases::Lease;
use super::{Entry, QueueKey, Slot, State, Stored};
use crate::api::{NewMessage, ReceiveSpec, SessionId};
use crate::error::StoreError;

/// Largest record the format can frame (its length field is a u32).
const MAX_RECORD: usize = u32::MAX as usize - 64;

/// One message handed out by [`State::receive`], turned into a `Delivery` after unlocking.
#[derive(Debug)]
pub struct Handout {
    /// The message.
    pub msg: Arc<Stored>,
    /// The queue it came from.
    pub queue: Arc<str>,
    /// Delivery id (0 for peeks and auto-ack takes).
    pub delivery_id: DeliveryId,
    /// Client-ack deliveries before this one.
    pub delivery_count: u32,
}

/// Where a receive's walk over a ready index stopped, so that the next step goes on from
/// there. Starts at the head of the index ([`Walk::default`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct Walk {
    queue: Option<Cursor<MessageId>>,
    sender: Option<Cursor<(MessageId, QueueKey)>>,
    /// Whether the walk reached the end of the index.
    pub end: bool,
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
    /// keys in the order named.
    fn check_send(&self, m: &NewMessage) -> Result<Vec<QueueKey>, StoreError> {
        if m.queues.is_empty() {
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
        let mut keys = Vec::with_capacity(m.queues.len());
        for name in &m.queues {
            let Some(&qk) = self.queue_keys.get(name.as_str()) else {
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
        let fields = MessageFields {
            id: 0,
            created_at: m.created_at,
            context: m.context,
            priority: m.priority,
            sender: &m.sender,
            receiver: m.receiver.as_deref(),
            properties: &m.properties,
            body: &m.body,
        };
        if record::message_added_len(&fields, m.queues.iter().map(String::as_str)) > MAX_RECORD {
            return Err(StoreError::InvalidArgument(
                "message too large to store".into(),
            ));
        }
        Ok(keys)
    }

    /// Stores one message on all its queues, or changes nothing. A sender that was never
    /// registered is registered on the way (the broker registers clients on connect; this keeps
    /// by-sender receives working for any sender).
    pub fn send(&mut self, log: &mut LogGuard<'_>, m: NewMessage) -> Result<MessageId, StoreError> {
        let keys = self.check_send(&m)?;
        if !self.clients.contains_key(m.sender.as_str()) {
            self.register_client(log, &m.sender)?;
        }
        let (sender_key, sender) = self.client_key(&m.sender);
        let receiver = m.receiver.as_deref().map(|r| self.client_key(r));
        let id = self.next_id;
        self.next_id += 1;
        let msg = Arc::new(Stored {
            id,
            sender,
            sender_key,
            receiver_key: receiver.as_ref().map(|r| r.0),
            receiver: receiver.map(|r| r.1),
            priority: m.priority,
            context: m.context,
            properties: m.properties,
            body: m.body,
            created_at: m.created_at,
        });
        let queues = &m.queues;
        let (segment, size) = self.append(log, |b| {
            record::encode_message_added(b, &msg.fields(), queues.iter().map(|q| (q.as_str(), 0)))
        });
        let slots = keys
            .iter()
            .map(|&queue| Slot {
                queue,
                count: 0,
                lease: None,
            })
            .collect();
        self.messages.insert(
            id,
            Entry {
                msg,
                slots,
                segment,
                size,
            },
        );
        self.journal.add_live(segment, id, size);
        for qk in keys {
            self.make_ready(id, qk);
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
        let mut picks: Vec<(MessageId, QueueKey)> = Vec::new();
        // A selector passes over the messages it does not select; they stay in the index.
        let messages = &self.messages;
        let selected = |id: &MessageId| match &spec.selector {
            None => true,
            Some(selector) => messages.get(id).is_some_and(|e| selector.matches(&*e.msg)),
        };
        match &spec.source {
            Source::Queue(name) => {
                let Some(&qk) = self.queue_keys.get(name.as_str()) else {
                    return Err(StoreError::QueueNotFound(name.clone()));
                };
                let mut ids = Vec::new();
                walk.end = true;
                if let Some(q) = self.queues.get(&qk) {
                    let from = walk.queue;
                    (walk.queue, walk.end) = q
                        .ready
                        .walk(client, spec.order, from, max, budget, &mut ids, selected);
                }
                picks.extend(ids.into_iter().map(|id| (id, qk)));
            }
            Source::Sender(name) => {
                let Some(&sk) = self.clients.get(name.as_str()) else {
                    return Err(StoreError::ClientNotFound(name.clone()));
                };
                walk.end = true;
                if let Some(s) = self.senders.get(&sk) {
                    let from = walk.sender;
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
            }
        }
        let mut out = Vec::with_capacity(picks.len());
        let mut wrote = false;
        for (id, qk) in picks {
            let Some(queue) = self.queues.get(&qk).map(|q| q.name.clone()) else {
                continue;
            };
            let Some(e) = self.messages.get(&id) else {
                continue;
            };
            let msg = e.msg.clone();
            let count = e
                .slots
                .iter()
                .find(|s| s.queue == qk)
                .map_or(0, |s| s.count);
            let delivery_id = match (spec.mode, spec.ack) {
                (ReceiveMode::Peek, _) => 0,
                (ReceiveMode::Take, AckMode::Auto) => {
                    self.unready(id, qk);
                    self.append(log, |b| record::encode_message_removed(b, id, &queue));
                    self.drop_slot(id, qk);
                    wrote = true;
                    0
                }
                (ReceiveMode::Take, AckMode::Client) => {
                    self.unready(id, qk);
                    let next = count.saturating_add(1);
                    self.append(log, |b| {
                        record::encode_delivery_started(b, id, &queue, next)
                    });
                    wrote = true;
                    let did = self.leases.insert(Lease {
                        message: id,
                        queue: qk,
                        session: spec.session,
                        deadline: spec.lease_until_ms,
                    });
                    if let Some(slot) = self
                        .messages
                        .get_mut(&id)
                        .and_then(|e| e.slots.iter_mut().find(|s| s.queue == qk))
                    {
                        slot.count = next;
                        slot.lease = Some(did);
                    }
                    if let Some(q) = self.queues.get_mut(&qk) {
                        q.in_flight += 1;
                    }
                    did
                }
            };
            out.push(Handout {
                msg,
                queue,
                delivery_id,
                delivery_count: count,
            });
        }
        Ok((out, wrote))
    }

    /// Ends lease `did` (the caller checked it is held); returns its message and queue.
    fn end_lease(&mut self, did: DeliveryId) -> Option<(MessageId, QueueKey)> {
        let lease = self.leases.remove(did)?;
        if let Some(q) = self.queues.get_mut(&lease.queue) {
            q.in_flight = q.in_flight.saturating_sub(1);
        }
        if let Some(slot) = self
            .messages
            .get_mut(&lease.message)
            .and_then(|e| e.slots.iter_mut().find(|s| s.queue == lease.queue))
        {
            slot.lease = None;
        }
        Some((lease.message, lease.queue))
    }

    /// Acks (`requeue == None`), drops (`Some(false)`) or requeues (`Some(true)`) deliveries
    /// held by `session`.
    pub fn settle(
        &mut self,
        log: &mut LogGuard<'_>,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Settled {
        let mut settled = Settled::default();
        for &did in ids {
            if self.leases.get_held(session, did).is_none() {
                settled.unknown.push(did);
                continue;
            }
            let Some((id, qk)) = self.end_lease(did) else {
                continue;
            };
            if requeue {
                self.make_ready(id, qk);
                if let Some(q) = self.queues.get(&qk) {
                    settled.requeued.push(q.name.to_string());
                }
            } else {
                let Some(queue) = self.queues.get(&qk).map(|q| q.name.clone()) else {
                    continue;
                };
                self.append(log, |b| record::encode_message_removed(b, id, &queue));
                self.drop_slot(id, qk);
                settled.wrote = true;
            }
        }
        settled.requeued.sort_unstable();
        settled.requeued.dedup();
        settled
    }

    /// Returns deliveries to their queues (disconnect, expiry); returns the queues.
    fn requeue_all(&mut self, ids: Vec<DeliveryId>) -> Vec<String> {
        let mut queues = Vec::new();
        for did in ids {
            if let Some((id, qk)) = self.end_lease(did) {
                self.make_ready(id, qk);
                if let Some(q) = self.queues.get(&qk) {
                    queues.push(q.name.to_string());
                }
            }
        }
        queues.sort_unstable();
        queues.dedup();
        queues
    }

    /// Returns every delivery `session` holds.
    pub fn release_session(&mut self, session: SessionId) -> Vec<String> {
        let ids = self.leases.of_session(session);
        self.requeue_all(ids)
    }

    /// Returns every delivery whose lease ended at or before `now_ms`.
    pub fn expire_leases(&mut self, now_ms: u64) -> Vec<String> {
        let ids = self.leases.expired(now_ms);
        self.requeue_all(ids)
    }

    /// The earliest lease deadline.
    pub fn next_lease_deadline(&self) -> Option<u64> {
        self.leases.next_deadline()
    }
}
