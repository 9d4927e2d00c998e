//! Queue metadata in the state: creating, configuring, deleting and listing queues.

use std::sync::Arc;

use ferry_protocol::{QueueInfo, QueueOptions};

use super::super::format::record::{self, kind};
use super::super::writer::LogGuard;
use crate::error::StoreError;

use super::*;

impl State {
    /// The key of user queue `name` (not a subscription's).
    pub(super) fn user_queue(&self, name: &str) -> Option<QueueKey> {
        self.queue_keys
            .get(name)
            .copied()
            .filter(|qk| !is_subscription(*qk))
    }

    pub(super) fn insert_queue(&mut self, name: &str) {
        self.insert_queue_keyed(name, false);
    }

    /// Inserts a queue (a subscription's when `subscription`) unless it exists; returns its key.
    pub(super) fn insert_queue_keyed(&mut self, name: &str, subscription: bool) -> QueueKey {
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
        if !subscription {
            self.user_queue_count += 1;
        }
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

    pub(super) fn set_options(
        &mut self,
        name: &str,
        max_deliveries: u32,
        dead_letter: Option<&str>,
    ) {
        let Some(qk) = self.queue_keys.get(name) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(qk) {
            q.max_deliveries = max_deliveries;
            q.dead_letter = dead_letter.map(Arc::from);
        }
    }

    pub(super) fn set_expiry(&mut self, name: &str, expiry: Option<&str>) {
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

    pub(super) fn remove_queue(&mut self, qk: QueueKey) {
        if let Some(q) = self.queues.remove(&qk) {
            self.queue_keys.remove(&q.name);
            if !is_subscription(qk) {
                self.user_queue_count -= 1;
            }
        }
        self.forget_direct(qk);
    }

    /// How many user queues there are.
    pub fn queue_count(&self) -> usize {
        self.user_queue_count
    }

    /// Whether user queue `name` exists.
    pub fn has_queue(&self, name: &str) -> bool {
        self.user_queue(name).is_some()
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
}
