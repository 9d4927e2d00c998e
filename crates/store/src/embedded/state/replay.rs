//! Recovery: the metadata snapshot of the oldest segment's header, then every record replayed
//! in log order.

use super::super::format::header;
use super::super::format::record::{self, AddedMessage, Record};

use super::*;

impl State {
    /// Replays one intact record found in `segment` at `offset` (`size` bytes) during
    /// recovery.
    pub fn replay(&mut self, record: Record, segment: u64, offset: u64, size: u32) {
        self.journal.record(segment, u64::from(size));
        self.apply(record, segment, offset, size);
    }

    /// Applies one replayed record (a group's records one after the other).
    pub(super) fn apply(&mut self, record: Record, segment: u64, offset: u64, size: u32) {
        match record {
            Record::Group(records) => {
                // The group's records follow its frame prefix and kind byte, back to back.
                let mut at = offset + record::FRAME_PREFIX as u64 + 1;
                for (r, size) in records {
                    self.apply(r, segment, at, size);
                    at += u64::from(size);
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
            Record::MessageAdded(added) => self.replay_added(added, segment, offset, size),
            Record::DeliveryStarted { id, queue, count } => {
                let Some(&qk) = self.queue_keys.get(queue.as_str()) else {
                    return;
                };
                if let Some(slot) = self
                    .messages
                    .get_mut(id)
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
    pub(super) fn replay_added(&mut self, a: AddedMessage, segment: u64, offset: u64, size: u32) {
        self.next_id = self.next_id.max(a.id.saturating_add(1));
        if let Some(old) = self.messages.get(a.id) {
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
        let sender = self.client_key(&a.sender).0;
        let receiver = a.receiver.as_deref().map(|r| self.client_key(r).0);
        let msg = Stored {
            context: a.context,
            created_at: a.created_at,
            deliver_at: a.deliver_at,
            expires_at: a.expires_at,
            sender,
            receiver: receiver.unwrap_or(NO_CLIENT),
            body_len: a.body_len,
            priority: a.priority,
            flags: PERSISTENT,
        };
        let queues: QueueKeys = slots.iter().map(|s| s.queue).collect();
        self.insert_entry(
            a.id,
            Entry {
                msg,
                place: Place::new(segment, offset, size),
                slots,
            },
            None,
            a.properties,
        );
        self.journal.add_live(segment, a.id, size);
        for qk in queues {
            self.place(a.id, qk);
        }
    }

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
