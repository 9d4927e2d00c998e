//! Settlement in the state: acks and nacks, messages coming back or dead-lettered, expiry
//! moves, leases released with their session or expired.

use std::sync::Arc;

use ferry_protocol::{DeliveryId, MessageId};

use super::super::writer::LogGuard;
use super::messages::*;
use super::{QueueKey, State};
use crate::api::{dead_letter, NewMessage, SessionId};
use crate::error::StoreError;

impl State {
    /// Ends lease `did` (the caller checked it is held); returns its message and queue.
    pub(super) fn end_lease(&mut self, did: DeliveryId) -> Option<(MessageId, QueueKey)> {
        let lease = self.leases.remove(did)?;
        if let Some(q) = self.queues.get_mut(&lease.queue) {
            q.in_flight = q.in_flight.saturating_sub(1);
        }
        if let Some(slot) = self
            .messages
            .get_mut(lease.message)
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
                if let Some(back) = self.come_back(log, id, qk) {
                    settled.wrote |= back.1;
                    settled.requeued.push(back.0);
                }
            } else {
                let Some(queue) = self.queues.get(&qk).map(|q| q.name.clone()) else {
                    continue;
                };
                settled.wrote |= self.log_removed(log, id, &queue);
                self.drop_slot(id, qk);
            }
        }
        settled.requeued.retain(|q| !q.is_empty());
        settled.requeued.sort_unstable();
        settled.requeued.dedup();
        settled
    }

    /// A delivery of message `id` on queue `qk` came back (its lease ended): it is ready again
    /// there, or, when it had its queue's maximum number of deliveries, it goes to the
    /// dead-letter queue (a copy with its history; dropped without one). Returns the queue that
    /// got it, if any, and whether records were written.
    pub(super) fn come_back(
        &mut self,
        log: &mut LogGuard<'_>,
        id: MessageId,
        qk: QueueKey,
    ) -> Option<(String, bool)> {
        let (name, max, dlq) = {
            let q = self.queues.get(&qk)?;
            (q.name.clone(), q.max_deliveries, q.dead_letter.clone())
        };
        let count = self
            .messages
            .get(id)?
            .slots
            .iter()
            .find(|s| s.queue == qk)
            .map_or(0, |s| s.count);
        if max == 0 || count < max {
            self.make_ready(id, qk);
            return Some((name.to_string(), false));
        }
        // The copy first, then the removal: a crash between them leaves the message on both
        // queues (delivered again, never lost).
        let persistent = self.persistent(id);
        let Ok(got) = self.copy_to(log, dlq, id, &name, count, dead_letter::MAX_DELIVERIES) else {
            // Its body could not be read for the copy: it stays, ready again.
            self.make_ready(id, qk);
            return Some((name.to_string(), false));
        };
        self.log_removed(log, id, &name);
        self.drop_slot(id, qk);
        Some((got.unwrap_or_default(), persistent))
    }

    /// Stores a copy of message `id` (leaving `queue` after `count` deliveries for `reason`)
    /// with its history on `target`, if that queue exists; returns its name then. An error
    /// when its body, in the log, cannot be read (it is read under the lock: dead letters and
    /// expiry copies are rare); the caller then keeps the message.
    pub(super) fn copy_to(
        &mut self,
        log: &mut LogGuard<'_>,
        target: Option<Arc<str>>,
        id: MessageId,
        queue: &str,
        count: u32,
        reason: &str,
    ) -> Result<Option<String>, StoreError> {
        let configured = target.clone();
        let Some(target) = target.filter(|t| self.queue_keys.contains_key(&**t)) else {
            if let Some(gone) = configured {
                let c = &mut self.counters;
                c.dropped_target_missing += 1;
                let n = c.dropped_target_missing;
                // Counted always, logged with a limit: a deleted dead-letter queue can make a
                // storm of these.
                if n <= 10 || n.is_power_of_two() {
                    tracing::warn!(
                        id,
                        %queue,
                        target = %gone,
                        reason,
                        dropped_so_far = n,
                        "message dropped: its {} queue no longer exists",
                        if reason == dead_letter::EXPIRED { "expiry" } else { "dead-letter" }
                    );
                }
            }
            return Ok(None);
        };
        let Some(msg) = self.messages.get(id).map(|e| e.msg) else {
            return Ok(None);
        };
        let (sender, receiver) = self.names(&msg);
        let body = self.load_body(id).inspect_err(|e| {
            tracing::warn!(id, error = %e, "cannot copy a message to {target}; it stays");
        })?;
        let properties = self.load_properties(id).inspect_err(|e| {
            tracing::warn!(id, error = %e, "cannot copy a message to {target}; it stays");
        })?;
        let copy = NewMessage {
            queues: vec![target.to_string()],
            topic: None,
            // A copy of a non-persistent message is not persistent either.
            persistent: msg.persistent(),
            sender,
            receiver: receiver.as_deref().map(str::to_owned),
            priority: msg.priority,
            context: msg.context,
            properties: dead_letter::history(&properties, queue, id, count, reason),
            body,
            created_at: msg.created_at,
            deliver_at_ms: 0,
            expires_at_ms: 0,
        };
        match self.send(log, copy) {
            Ok(_) => {
                if reason == dead_letter::EXPIRED {
                    self.counters.dead_lettered_expired += 1;
                } else {
                    self.counters.dead_lettered_max_deliveries += 1;
                }
                Ok(Some(target.to_string()))
            }
            Err(e) => {
                tracing::warn!(id, error = %e, "cannot move a message to {target}; dropped");
                Ok(None)
            }
        }
    }

    /// Moves expired message `id` on queue `qk` (already out of its ready or delayed index) to
    /// the queue's expiry queue, if it has one, and removes it from `qk`.
    pub(super) fn expire_from(
        &mut self,
        log: &mut LogGuard<'_>,
        id: MessageId,
        qk: QueueKey,
        queue: &str,
    ) {
        self.counters.expired += 1;
        let target = self.queues.get(&qk).and_then(|q| q.expiry.clone());
        if target.is_some() {
            let count = self
                .messages
                .get(id)
                .and_then(|e| e.slots.iter().find(|s| s.queue == qk))
                .map_or(0, |s| s.count);
            match self.copy_to(log, target, id, queue, count, dead_letter::EXPIRED) {
                Ok(Some(t)) => self.expired_to.push(t),
                Ok(None) => {}
                Err(_) => {
                    // Its body could not be read for the copy: it stays until a later try.
                    self.counters.expired -= 1;
                    self.make_ready(id, qk);
                    return;
                }
            }
        }
        self.log_removed(log, id, queue);
        self.drop_slot(id, qk);
    }

    /// Returns deliveries to their queues (disconnect, expiry); returns the queues and whether
    /// records were written (dead-lettering).
    pub(super) fn requeue_all(
        &mut self,
        log: &mut LogGuard<'_>,
        ids: Vec<DeliveryId>,
    ) -> (Vec<String>, bool) {
        let mut queues = Vec::new();
        let mut wrote = false;
        for did in ids {
            if let Some((id, qk)) = self.end_lease(did) {
                if let Some((queue, w)) = self.come_back(log, id, qk) {
                    queues.push(queue);
                    wrote |= w;
                }
            }
        }
        queues.retain(|q| !q.is_empty());
        queues.sort_unstable();
        queues.dedup();
        (queues, wrote)
    }

    /// Returns every delivery `session` holds.
    pub fn release_session(
        &mut self,
        log: &mut LogGuard<'_>,
        session: SessionId,
    ) -> (Vec<String>, bool) {
        let ids = self.leases.of_session(session);
        let back = self.requeue_all(log, ids);
        self.leases.forget_session(session);
        back
    }

    /// Returns every delivery whose lease ended at or before `now_ms`.
    pub fn expire_leases(&mut self, log: &mut LogGuard<'_>, now_ms: u64) -> (Vec<String>, bool) {
        let ids = self.leases.expired(now_ms);
        self.requeue_all(log, ids)
    }

    /// The earliest lease deadline.
    pub fn next_lease_deadline(&self) -> Option<u64> {
        self.leases.next_deadline()
    }
}
