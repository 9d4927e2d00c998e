//! Where a message stands on each queue: placed ready or delayed, made ready when due, taken
//! off the indexes, and its entry stored and dropped.

use ferry_protocol::MessageId;

use super::*;

impl State {
    /// Places a message that arrived (send, recovery) on queue `qk`: ready, or waiting for its
    /// delivery time.
    pub(super) fn place(&mut self, id: MessageId, qk: QueueKey) {
        let Some(msg) = self.messages.get(id).map(|e| e.msg) else {
            return;
        };
        self.place_stored(id, &msg, qk);
    }

    /// [`State::place`] for a message at hand (no lookup: a publish places one message on
    /// many queues).
    pub(super) fn place_stored(&mut self, id: MessageId, m: &Stored, qk: QueueKey) {
        let deliver_at = m.deliver_at;
        if let Some(q) = self.queues.get_mut(&qk) {
            q.entered += 1;
        }
        if deliver_at == 0 {
            self.make_ready_stored(id, m, qk);
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
    pub(super) fn undelay_queue(&mut self, qk: QueueKey) -> Vec<MessageId> {
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

    /// See [`crate::Upkeep::delayed_due`]: makes the messages due by `until_ms` ready and names
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
    pub(super) fn make_ready(&mut self, id: MessageId, qk: QueueKey) {
        let Some(m) = self.messages.get(id).map(|e| e.msg) else {
            return;
        };
        self.make_ready_stored(id, &m, qk);
    }

    /// [`State::make_ready`] for a message at hand.
    pub(super) fn make_ready_stored(&mut self, id: MessageId, m: &Stored, qk: QueueKey) {
        if let Some(q) = self.queues.get_mut(&qk) {
            q.ready.insert(m.receiver_key(), m.priority, id);
            q.ready_count += 1;
            q.ready_bytes += u64::from(m.body_len);
            if m.expires_at != 0 {
                q.expiring += 1;
            }
        }
        // By-sender receives do not search subscription queues.
        if !is_subscription(qk) {
            self.senders.entry(m.sender).or_default().insert(
                m.receiver_key(),
                m.priority,
                (id, qk),
            );
        }
    }

    /// Takes message `id` on queue `qk` out of the delayed set; whether it was there.
    pub(super) fn undelay(&mut self, id: MessageId, qk: QueueKey) -> bool {
        let Some(at) = self.messages.get(id).map(|e| e.msg.deliver_at) else {
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
    pub(super) fn unready(&mut self, id: MessageId, qk: QueueKey) -> bool {
        let Some(m) = self.messages.get(id).map(|e| e.msg) else {
            return false;
        };
        self.unready_stored(id, &m, qk)
    }

    /// [`State::unready`] for a message at hand.
    pub(super) fn unready_stored(&mut self, id: MessageId, m: &Stored, qk: QueueKey) -> bool {
        let mut found = false;
        if let Some(q) = self.queues.get_mut(&qk) {
            found = q.ready.remove(m.receiver_key(), m.priority, id);
            if found {
                q.ready_count -= 1;
                q.ready_bytes = q.ready_bytes.saturating_sub(u64::from(m.body_len));
                if m.expires_at != 0 {
                    q.expiring = q.expiring.saturating_sub(1);
                }
            }
        }
        if is_subscription(qk) {
            return found;
        }
        if let Some(s) = self.senders.get_mut(&m.sender) {
            s.remove(m.receiver_key(), m.priority, (id, qk));
            if s.is_empty() {
                self.senders.remove(&m.sender);
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

    /// Stores a message's entry, with its body if it is not in the log and its properties
    /// (those of a persistent message beyond the properties budget stay in its record only),
    /// and indexes it by expiry time if it has one. Its sender and receiver now hold it. A
    /// message with the same id must be gone first (see `replay_added`).
    pub(super) fn insert_entry(
        &mut self,
        id: MessageId,
        mut entry: Entry,
        unlogged: Option<Bytes>,
        properties: Properties,
    ) {
        let m = &mut entry.msg;
        if m.expires_at != 0 {
            self.by_expiry.insert((m.expires_at, id));
        }
        self.clients.hold(m.sender);
        if let Some(r) = m.receiver_key() {
            self.clients.hold(r);
        }
        let mut bytes = self.memory_bytes + MESSAGE_OVERHEAD;
        if let Some(body) = unlogged {
            bytes += body.len() as u64;
            self.unlogged.insert(id, body);
        }
        if !properties.is_empty() {
            let size = properties_footprint(&properties);
            if !m.persistent() {
                bytes += size;
                m.flags |= PROPERTIES_IN_MEMORY;
                self.properties.insert(id, properties);
            } else if self.properties_bytes + size <= self.properties_budget {
                bytes += size;
                self.properties_bytes += size;
                m.flags |= PROPERTIES_IN_MEMORY;
                self.properties.insert(id, properties);
            } else {
                m.flags |= PROPERTIES_LOGGED;
            }
        }
        self.messages.insert(id, entry);
        self.set_memory(bytes);
    }

    /// Removes message `id` from queue `qk` for good (it must be out of the ready indexes);
    /// forgets the message when no queue holds it any more.
    pub(super) fn drop_slot(&mut self, id: MessageId, qk: QueueKey) {
        let Some(e) = self.messages.get_mut(id) else {
            return;
        };
        e.slots.retain(|s| s.queue != qk);
        let emptied = e.slots.is_empty();
        if let Some(q) = self.queues.get_mut(&qk) {
            q.left += 1;
        }
        if let Some(e) = emptied.then(|| self.messages.remove(id)).flatten() {
            let (segment, size) = (e.segment(), e.place.size);
            let msg = e.msg;
            self.cache.remove(id);
            let mut freed = MESSAGE_OVERHEAD;
            if let Some(body) = self.unlogged.remove(&id) {
                freed += body.len() as u64;
            }
            if msg.has_properties() {
                if let Some(p) = self.properties.remove(&id) {
                    let size = properties_footprint(&p);
                    freed += size;
                    if msg.persistent() {
                        self.properties_bytes = self.properties_bytes.saturating_sub(size);
                    }
                }
            }
            let bytes = self.memory_bytes.saturating_sub(freed);
            self.set_memory(bytes);
            self.clients.release(msg.sender);
            if let Some(r) = msg.receiver_key() {
                self.clients.release(r);
            }
            if msg.expires_at != 0 {
                self.by_expiry.remove(&(msg.expires_at, id));
            }
            if segment != UNLOGGED {
                self.journal.drop_live(segment, size);
            }
        }
    }
}
