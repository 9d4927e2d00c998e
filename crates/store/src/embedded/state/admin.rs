//! The operator's operations on the embedded state: queue figures and settings, browsing,
//! purging, moving and deleting messages (see [`crate::admin::Admin`]).
//!
//! They follow the state's one rule: records go into the log buffer under the same lock that
//! changes the state. A move re-appends the message's `MessageAdded` record with its new
//! queues (as compaction does), so it is one atomic record: a crash leaves the message either
//! where it was or where it went, never on both or neither.

use std::cmp::Reverse;
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{Message, MessageId, Order, Properties, QueueOptions, Source};

use super::index::Cursor;
use super::{
    record_fields, selectable, selectable_with, snapshot, Place, QueueKey, Slot, State, Stored,
    UNLOGGED,
};
use crate::admin::{
    forms_cycle, origin_of, BrowseCursor, BrowsePage, BrowseSpec, BrowsedMessage, MoveReport,
    MoveTarget, QueueDetails,
};
use crate::embedded::format::record;
use crate::embedded::writer::LogGuard;
use crate::error::StoreError;

/// The index cursor for a browse cursor's position.
fn to_cursor<K>(order: Order, priority: u8, key: K) -> Cursor<K> {
    match order {
        Order::Time => Cursor::Time(key),
        Order::Priority => Cursor::Priority(Reverse(priority), key),
    }
}

/// Priority (0 in time order) and key of an index cursor.
fn cursor_parts<K>(c: Cursor<K>) -> (u8, K) {
    match c {
        Cursor::Time(k) => (0, k),
        Cursor::Priority(Reverse(p), k) => (p, k),
    }
}

impl State {
    /// Figures and settings of every queue, by name.
    pub fn queue_details(&self) -> Vec<QueueDetails> {
        self.queue_keys
            .iter()
            .filter_map(|(name, qk)| {
                let q = self.queues.get(qk)?;
                let oldest = q
                    .ready
                    .oldest()
                    .and_then(|id| self.messages.get(id))
                    .map(|e| e.msg.created_at);
                Some(QueueDetails {
                    name: name.to_string(),
                    ready: q.ready_count,
                    delayed: q.delayed,
                    in_flight: q.in_flight,
                    ready_bytes: Some(q.ready_bytes),
                    oldest_created_at: oldest,
                    options: QueueOptions {
                        max_deliveries: q.max_deliveries,
                        dead_letter_queue: q.dead_letter.as_deref().map(str::to_owned),
                        expiry_queue: q.expiry.as_deref().map(str::to_owned),
                    },
                    entered_total: Some(q.entered),
                    left_total: Some(q.left),
                })
            })
            .collect()
    }

    /// Every registered client name.
    pub fn client_names(&self) -> Vec<String> {
        self.clients
            .iter()
            .map(|(_, r)| r.name.to_string())
            .collect()
    }

    /// The dead-letter and expiry queues queue `name` names now.
    fn targets_of(&self, name: &str) -> Vec<String> {
        self.queue_keys
            .get(name)
            .and_then(|qk| self.queues.get(qk))
            .map(|q| {
                [&q.dead_letter, &q.expiry]
                    .into_iter()
                    .flatten()
                    .map(|t| t.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `QueueInUse` naming the first queue (by name) whose dead-letter or expiry queue is
    /// `name`, if any.
    pub fn user_of(&self, name: &str) -> Option<StoreError> {
        self.queue_keys.iter().find_map(|(user, qk)| {
            let q = self.queues.get(qk)?;
            let role = if q.dead_letter.as_deref() == Some(name) {
                "dead-letter"
            } else if q.expiry.as_deref() == Some(name) {
                "expiry"
            } else {
                return None;
            };
            Some(StoreError::QueueInUse {
                name: name.to_owned(),
                role,
                used_by: user.to_string(),
            })
        })
    }

    /// Changes queue `name`'s settings (see [`crate::admin::Admin::set_queue_options`]).
    pub fn set_queue_options(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
        options: &QueueOptions,
    ) -> Result<(), StoreError> {
        if !self.queue_keys.contains_key(name) {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        }
        for (what, other) in [
            ("dead-letter", &options.dead_letter_queue),
            ("expiry", &options.expiry_queue),
        ] {
            let Some(d) = other else { continue };
            if d == name {
                return Err(StoreError::InvalidArgument(format!(
                    "queue '{name}' cannot be its own {what} queue"
                )));
            }
            if self.user_queue(d).is_none() {
                return Err(StoreError::QueueNotFound(d.clone()));
            }
        }
        if let Some(q) = forms_cycle(name, options, |q| self.targets_of(q)) {
            return Err(StoreError::InvalidArgument(format!(
                "queue '{q}' leads back to '{name}' through dead-letter or expiry queues; \
                 a cycle is refused"
            )));
        }
        let dlq = options.dead_letter_queue.as_deref();
        let exp = options.expiry_queue.as_deref();
        self.append(log, |b| {
            record::encode_queue_options(b, name, options.max_deliveries, dlq, exp)
        });
        self.set_options(name, options.max_deliveries, dlq);
        self.set_expiry(name, exp);
        Ok(())
    }

    fn queue_key(&self, name: &str) -> Result<QueueKey, StoreError> {
        self.queue_keys
            .get(name)
            .copied()
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))
    }

    /// Removes every ready and delayed message of queue `name`; returns how many.
    pub fn purge_queue(&mut self, log: &mut LogGuard<'_>, name: &str) -> Result<u64, StoreError> {
        let qk = self.queue_key(name)?;
        let ready = self
            .queues
            .get(&qk)
            .map(|q| q.ready.all())
            .unwrap_or_default();
        let mut n = 0;
        for id in ready {
            if self.unready(id, qk) {
                self.log_removed(log, id, name);
                self.drop_slot(id, qk);
                n += 1;
            }
        }
        for id in self.undelay_queue(qk) {
            self.log_removed(log, id, name);
            self.drop_slot(id, qk);
            n += 1;
        }
        Ok(n)
    }

    /// Removes message `id` from queue `name` if it is ready or delayed there.
    pub fn delete_message(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
        id: MessageId,
    ) -> Result<(), StoreError> {
        let qk = self.queue_key(name)?;
        if !(self.unready(id, qk) || self.undelay(id, qk)) {
            return Err(StoreError::MessageNotFound {
                queue: name.to_owned(),
                id,
            });
        }
        self.log_removed(log, id, name);
        self.drop_slot(id, qk);
        Ok(())
    }

    /// The message `id` as it stands on queue `qk`.
    /// Its body may have to be read from the log, under the lock: browsing is an operator's
    /// tool, a page at a time.
    fn browsed(&self, id: MessageId, qk: QueueKey) -> Result<Option<BrowsedMessage>, StoreError> {
        let (Some(e), Some(q)) = (self.messages.get(id), self.queues.get(&qk)) else {
            return Ok(None);
        };
        let body = self.load_body(id)?;
        let count = e
            .slots
            .iter()
            .find(|s| s.queue == qk)
            .map_or(0, |s| s.count);
        let m = &e.msg;
        let (sender, receiver) = self.names(m);
        let properties = self.load_properties(id)?;
        Ok(Some(BrowsedMessage {
            message: Message {
                id,
                queue: q.name.to_string().into(),
                sender: sender.to_string().into(),
                receiver: receiver.as_deref().map(str::to_owned),
                priority: m.priority,
                context: m.context,
                properties,
                body,
                created_at: m.created_at,
                delivery_count: count,
                expires_at: m.expires_at,
            },
        }))
    }

    /// A page of ready messages (see [`crate::admin::Admin::browse`]), examining at most
    /// `budget` entries.
    pub fn browse(&self, spec: &BrowseSpec, budget: usize) -> Result<BrowsePage, StoreError> {
        let limit = spec.limit.clamp(1, crate::admin::MAX_BROWSE_PAGE);
        let now = spec.now_ms;
        // Expired messages still indexed until the upkeep purges them are never delivered, so
        // they are not shown either.
        let accept = |id: MessageId| {
            self.messages.get(id).is_some_and(|e| {
                (e.msg.expires_at == 0 || e.msg.expires_at > now)
                    && spec
                        .selector
                        .as_ref()
                        .is_none_or(|sel| self.browse_selects(sel, id, &e.msg))
            })
        };
        let order = spec.order;
        let mut page = BrowsePage::default();
        match &spec.source {
            Source::Queue(name) => {
                let qk = self.queue_key(name)?;
                let Some(q) = self.queues.get(&qk) else {
                    return Ok(page);
                };
                let from = spec
                    .after
                    .as_ref()
                    .map(|c| to_cursor(order, c.priority, c.id));
                let mut ids = Vec::new();
                let (last, end) = q
                    .ready
                    .browse(spec.order, from, limit, budget, &mut ids, |id| accept(*id));
                page.messages = ids
                    .iter()
                    .filter_map(|id| self.browsed(*id, qk).transpose())
                    .collect::<Result<_, _>>()?;
                if !end {
                    page.next = last.map(|l| {
                        let (priority, id) = cursor_parts(l);
                        BrowseCursor {
                            priority,
                            id,
                            queue: None,
                        }
                    });
                }
            }
            Source::Sender(sender) => {
                let Some(&ck) = self.clients.get(sender.as_str()) else {
                    return Err(StoreError::ClientNotFound(sender.clone()));
                };
                let Some(index) = self.senders.get(&ck) else {
                    return Ok(page);
                };
                let from = spec.after.as_ref().map(|c| {
                    let qk = c
                        .queue
                        .as_deref()
                        .and_then(|q| self.queue_keys.get(q).copied())
                        .unwrap_or(0);
                    to_cursor(order, c.priority, (c.id, qk))
                });
                let mut keys = Vec::new();
                let (last, end) =
                    index.browse(spec.order, from, limit, budget, &mut keys, |k| accept(k.0));
                page.messages = keys
                    .iter()
                    .filter_map(|(id, qk)| self.browsed(*id, *qk).transpose())
                    .collect::<Result<_, _>>()?;
                if !end {
                    page.next = last.map(|l| {
                        let (priority, (id, qk)) = cursor_parts(l);
                        BrowseCursor {
                            priority,
                            id,
                            queue: self.queues.get(&qk).map(|q| q.name.to_string()),
                        }
                    });
                }
            }
        }
        Ok(page)
    }

    /// Moves ready messages of `from` (see [`crate::admin::Admin::move_messages`]).
    pub fn move_messages(
        &mut self,
        log: &mut LogGuard<'_>,
        from: &str,
        target: &MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<MoveReport, StoreError> {
        let from_qk = self.queue_key(from)?;
        let fixed = match target {
            MoveTarget::Queue(t) => Some(self.queue_key(t)?),
            MoveTarget::Origin => None,
        };
        let candidates: Vec<MessageId> = match ids {
            Some(ids) => ids.to_vec(),
            None => {
                let mut out = Vec::new();
                if let Some(q) = self.queues.get(&from_qk) {
                    q.ready
                        .browse(Order::Time, None, limit, usize::MAX, &mut out, |_| true);
                }
                out
            }
        };
        let mut report = MoveReport::default();
        for id in candidates {
            let to_qk = match fixed {
                Some(qk) => Ok(qk),
                None => self.origin_key(id),
            };
            let to_qk = match to_qk {
                Ok(qk) if qk == from_qk => {
                    report
                        .skipped
                        .push((id, "it is on its target queue already".into()));
                    continue;
                }
                Ok(qk) => qk,
                Err(why) => {
                    report.skipped.push((id, why));
                    continue;
                }
            };
            // The move writes the message again, body included: read it first (under the
            // lock: an operator's move), so that a failed read leaves it where it is.
            let loaded = self
                .messages
                .get(id)
                .map(|_| Ok::<_, StoreError>((self.load_body(id)?, self.load_properties(id)?)));
            let (body, properties) = match loaded {
                Some(Ok(loaded)) => loaded,
                Some(Err(e)) => {
                    report.skipped.push((id, e.to_string()));
                    continue;
                }
                None => (Bytes::new(), Properties::new()),
            };
            if !self.unready(id, from_qk) {
                report
                    .skipped
                    .push((id, format!("not ready on queue '{from}'")));
                continue;
            }
            self.relocate(log, id, from_qk, to_qk, &body, &properties);
            let to = self
                .queues
                .get(&to_qk)
                .map(|q| q.name.to_string())
                .unwrap_or_default();
            report.moved.push((id, to));
        }
        Ok(report)
    }

    /// Whether a browse's selector takes message `id` (`msg`); properties in the log only
    /// are read under the lock (an operator's tool, a page at a time).
    fn browse_selects(
        &self,
        selector: &ferry_selector::Selector,
        id: MessageId,
        msg: &Stored,
    ) -> bool {
        match selectable(&self.clients, &self.properties, None, id, msg).verdict(selector) {
            Some(verdict) => verdict,
            None => match self.load_properties(id) {
                Ok(p) => selector.matches(&selectable_with(&self.clients, msg, Some(&p))),
                Err(e) => {
                    tracing::warn!(id, error = %e, "browse: properties unreadable; not shown");
                    false
                }
            },
        }
    }

    /// The queue a dead letter came from, or why it cannot go back.
    fn origin_key(&self, id: MessageId) -> Result<QueueKey, String> {
        if !self.messages.contains_key(id) {
            return Err("no such message".into());
        }
        let probe = Message {
            id,
            queue: String::new().into(),
            sender: String::new().into(),
            receiver: None,
            priority: 0,
            context: 0,
            properties: self.load_properties(id).map_err(|e| e.to_string())?,
            body: Default::default(),
            created_at: 0,
            delivery_count: 0,
            expires_at: 0,
        };
        let Some(origin) = origin_of(&probe) else {
            return Err("it has no ferry_original_queue property (not a dead letter)".into());
        };
        self.queue_keys
            .get(origin)
            .copied()
            .ok_or_else(|| format!("its original queue '{origin}' does not exist"))
    }

    /// Moves message `id` (out of `from`'s ready index already) from queue `from` to `to` with
    /// one `MessageAdded` record listing its queues now.
    fn relocate(
        &mut self,
        log: &mut LogGuard<'_>,
        id: MessageId,
        from: QueueKey,
        to: QueueKey,
        body: &[u8],
        properties: &Properties,
    ) {
        let Some(e) = self.messages.get_mut(id) else {
            return;
        };
        e.slots.retain(|s| s.queue != from);
        let already = e.slots.iter().any(|s| s.queue == to);
        if !already {
            e.slots.push(Slot {
                queue: to,
                count: 0,
                lease: None,
            });
        }
        let msg = e.msg;
        let (old_segment, old_size) = (e.segment(), e.place.size);
        let slots: Vec<(Arc<str>, u32)> = e
            .slots
            .iter()
            .filter_map(|s| Some((self.queues.get(&s.queue)?.name.clone(), s.count)))
            .collect();
        if let Some(q) = self.queues.get_mut(&from) {
            q.left += 1;
        }
        if msg.persistent() {
            let fields = record_fields(&self.clients, properties, id, &msg, body);
            // Never inside a transaction group: operators' moves run on their own.
            let (seg, size) = self.journal.append(
                log,
                |b| record::encode_message_added(b, &fields, slots.iter().map(|(q, c)| (&**q, *c))),
                snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
            );
            if old_segment != UNLOGGED {
                self.journal.drop_live(old_segment, old_size);
            }
            let offset = self.journal.last_offset;
            self.journal.add_live(seg, id, size);
            if let Some(e) = self.messages.get_mut(id) {
                e.place = Place::new(seg, offset, size);
            }
        }
        if !already {
            self.place_stored(id, &msg, to);
        }
    }
}
