//! Transactions: a session's sends, publishes and acks applied all together.
//!
//! Everything is checked first (queues, topics, receivers, sizes, and that the session holds
//! every delivery it acks), so that an error changes nothing. Then, under the same hold of the
//! state lock, every change is applied while its records go into a buffer of their own instead
//! of the log; at the end that buffer becomes one `Group` record, whose single CRC covers all of
//! them. A group lies in one segment (a record is never split), and recovery applies it whole,
//! or, when a crash tore it, drops it like any torn record: a transaction survives a crash
//! entirely or not at all.

use ferry_protocol::{DeliveryId, MessageId};

use super::super::format::record;
use super::super::writer::LogGuard;
use super::{snapshot, Group, State, GROUPED};
use crate::api::{NewMessage, SessionId};
use crate::error::StoreError;

/// Largest group the format can frame (its length field is a u32).
const MAX_GROUP: usize = u32::MAX as usize - 64;

impl State {
    /// Commits a transaction of `session` (see [`crate::Transactions::commit`]); returns the ids of
    /// `msgs` in order.
    pub fn commit(
        &mut self,
        log: &mut LogGuard<'_>,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError> {
        let mut keys = Vec::with_capacity(msgs.len());
        let mut size = 0usize;
        let mut memo = super::messages::BatchMemo::default();
        for m in &msgs {
            keys.push(self.check_send(m, &mut memo)?);
            if m.persistent {
                size = size.saturating_add(self.added_len(m));
            }
        }
        let mut held = Vec::with_capacity(acks.len());
        let mut unknown = Vec::new();
        for &did in acks {
            if held.contains(&did) {
                continue;
            }
            match self.leases.get_held(session, did) {
                Some(lease) => {
                    held.push(did);
                    if self.persistent(lease.message) {
                        let queue = self.queues.get(&lease.queue).map_or(0, |q| q.name.len());
                        size = size.saturating_add(record::message_removed_len("") + queue);
                    }
                }
                None => unknown.push(did),
            }
        }
        if !unknown.is_empty() {
            return Err(StoreError::DeliveriesNotFound(unknown));
        }
        if size > MAX_GROUP {
            return Err(StoreError::InvalidArgument(
                "transaction too large to store".into(),
            ));
        }
        // Senders are registered outside the group: harmless if the group is lost, and it
        // keeps every record the group holds about messages.
        for m in &msgs {
            if !self.clients.contains_key(&m.sender) {
                self.register_client(log, &m.sender)?;
            }
        }
        self.group = Some(Group::default());
        let mut ids = Vec::with_capacity(msgs.len());
        let mut last = super::messages::BatchMemo::default();
        for (m, k) in msgs.into_iter().zip(keys) {
            match self.send_checked(log, m, k, &mut last) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    // Cannot happen after the checks above; keep the log in step with the
                    // state all the same.
                    self.end_group(log);
                    return Err(StoreError::Internal(format!(
                        "a checked transaction failed half way: {e}"
                    )));
                }
            }
        }
        self.settle(log, session, &held, false);
        self.end_group(log);
        Ok(ids)
    }

    /// Appends the group being built as one record (nothing if it is empty) and accounts for
    /// the messages added in it.
    fn end_group(&mut self, log: &mut LogGuard<'_>) {
        let Some(g) = self.group.take() else {
            return;
        };
        if g.buf.is_empty() {
            return;
        }
        let (segment, _) = self.journal.append(
            log,
            |b| record::encode_group(b, &g.buf),
            snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
        );
        // The group's records start after its frame prefix and kind byte.
        let records_at = self.journal.last_offset + record::FRAME_PREFIX as u64 + 1;
        for (id, at, size) in g.adds {
            if let Some(e) = self.messages.get_mut(id) {
                if e.segment() == GROUPED {
                    e.place = super::Place::new(segment, records_at + at, size);
                    self.journal.add_live(segment, id, size);
                }
            }
        }
    }
}
