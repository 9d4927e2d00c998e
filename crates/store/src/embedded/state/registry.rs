//! The client registry: which client names are registered, whether permanently (with a live
//! `ClientRegistered` record in the log) or in memory only, what each one holds, and since when
//! it has been offline, so that names holding nothing can be forgotten.
//!
//! - A **permanent** registration has a `ClientRegistered` record, counted as live data of its
//!   segment: compaction rewrites it at the head like a stored message, so the registry is in
//!   the log once, not in every segment header. A `ClientForgotten` record ends it.
//! - An **in-memory** registration has no record: an ephemeral session's name, or a name that
//!   replay found only in stored messages (their sender or receiver). It is forgotten as soon
//!   as it holds nothing and has no session.
//!
//! A name *holds* something while a stored message names it as its sender or its receiver
//! (counted here as messages come and go) or while it owns a durable subscription (looked up in
//! the topics when it matters). A key is reused once its name is forgotten: nothing refers to a
//! name that holds nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::super::format::record::{self, kind};
use super::super::writer::LogGuard;
use super::{check_name, snapshot, ClientKey, State};
use crate::clock::wall_ms;
use crate::error::StoreError;

/// Segment and size of a record.
type Record = (u64, u32);

/// One registered name.
#[derive(Debug)]
pub struct Registration {
    /// The name, shared with the messages that name it.
    pub name: Arc<str>,
    /// Segment and size of its live `ClientRegistered` record; `None` when it is registered in
    /// memory only.
    pub record: Option<Record>,
    /// Stored messages that name it as their sender or receiver.
    pub holds: u32,
    /// Since when (wall clock, ms) it has had no session: the end of its last session, or when
    /// it was registered or the store opened, whichever is later.
    pub offline_since: u64,
}

/// Every registered name, by name and by key.
#[derive(Debug, Default)]
pub struct Registry {
    by_name: HashMap<Arc<str>, ClientKey>,
    slots: Vec<Option<Registration>>,
    /// Keys of forgotten names, to reuse.
    free: Vec<ClientKey>,
}

impl Registry {
    /// The key of `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&ClientKey> {
        self.by_name.get(name)
    }

    /// Whether `name` is registered.
    pub fn contains_key(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Number of registered names.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The key and shared name of `name`, registering it in memory if it is new.
    pub fn key(&mut self, name: &str) -> (ClientKey, Arc<str>) {
        if let Some((n, k)) = self.by_name.get_key_value(name) {
            return (*k, n.clone());
        }
        let name: Arc<str> = name.into();
        let registration = Registration {
            name: name.clone(),
            record: None,
            holds: 0,
            offline_since: wall_ms(),
        };
        let key = match self.free.pop() {
            Some(k) => {
                if let Some(slot) = self.slots.get_mut(k as usize) {
                    *slot = Some(registration);
                }
                k
            }
            None => {
                self.slots.push(Some(registration));
                (self.slots.len() - 1) as ClientKey
            }
        };
        self.by_name.insert(name.clone(), key);
        (key, name)
    }

    /// The registration of `key`.
    pub fn entry(&self, key: ClientKey) -> Option<&Registration> {
        self.slots.get(key as usize).and_then(Option::as_ref)
    }

    /// The registration of `key`, to change.
    pub fn entry_mut(&mut self, key: ClientKey) -> Option<&mut Registration> {
        self.slots.get_mut(key as usize).and_then(Option::as_mut)
    }

    /// A stored message now names `key`.
    pub fn hold(&mut self, key: ClientKey) {
        if let Some(r) = self.entry_mut(key) {
            r.holds = r.holds.saturating_add(1);
        }
    }

    /// A stored message that named `key` is gone.
    pub fn release(&mut self, key: ClientKey) {
        if let Some(r) = self.entry_mut(key) {
            r.holds = r.holds.saturating_sub(1);
        }
    }

    /// Forgets `key`'s name; its key may be given to another name.
    pub fn forget(&mut self, key: ClientKey) -> Option<Registration> {
        let r = self.slots.get_mut(key as usize)?.take()?;
        self.by_name.remove(&r.name);
        self.free.push(key);
        Some(r)
    }

    /// Every registration with its key.
    pub fn iter(&self) -> impl Iterator<Item = (ClientKey, &Registration)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(k, r)| Some((k as ClientKey, r.as_ref()?)))
    }
}

impl State {
    /// The key and shared name of `name`, registering it in memory if it is new.
    pub(super) fn client_key(&mut self, name: &str) -> (ClientKey, Arc<str>) {
        self.clients.key(name)
    }

    /// Whether `name` is registered.
    pub fn client_exists(&self, name: &str) -> bool {
        self.clients.contains_key(name)
    }

    /// Number of registered names (tests and diagnostics).
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Registers `name` permanently: logs a `ClientRegistered` record unless it has a live one
    /// (a name registered in memory only becomes permanent).
    pub fn register_client(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
    ) -> Result<(), StoreError> {
        check_name("client", name)?;
        let (key, name) = self.clients.key(name);
        if self.clients.entry(key).is_some_and(|r| r.record.is_none()) {
            self.append_registered(log, key, &name);
        }
        Ok(())
    }

    /// Registers `name` in memory only, unless it is registered already (a permanent name
    /// stays permanent). Writes nothing.
    pub fn register_ephemeral(&mut self, name: &str) -> Result<(), StoreError> {
        check_name("client", name)?;
        self.clients.key(name);
        Ok(())
    }

    /// Whether registering `name` permanently would write a record.
    pub fn registration_writes(&self, name: &str) -> bool {
        self.clients
            .get(name)
            .and_then(|k| self.clients.entry(*k))
            .is_none_or(|r| r.record.is_none())
    }

    /// Appends the `ClientRegistered` record of `key` (never inside a transaction group: it is
    /// live data of its segment) and makes it the registration's record.
    fn append_registered(&mut self, log: &mut LogGuard<'_>, key: ClientKey, name: &str) {
        let (segment, size) = self.journal.append(
            log,
            |b| record::encode_name(b, kind::CLIENT_REGISTERED, name),
            snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
        );
        self.set_record(key, segment, size);
    }

    /// Makes the record at `segment` (`size` bytes) the live one of `key`'s registration.
    fn set_record(&mut self, key: ClientKey, segment: u64, size: u32) {
        let Some(r) = self.clients.entry_mut(key) else {
            return;
        };
        if let Some((old, old_size)) = r.record.replace((segment, size)) {
            self.journal.drop_live(old, old_size);
        }
        self.journal.add_live_client(segment, key, size);
    }

    /// The session of `name` ended (the store's wall clock says when): an in-memory name that
    /// holds nothing is forgotten at once, any other name starts counting towards its expiry.
    /// Nothing happens if `online` says a new session holds the name already.
    pub fn session_ended(&mut self, name: &str, online: impl Fn(&str) -> bool) {
        let Some(&key) = self.clients.get(name) else {
            return;
        };
        if online(name) {
            return;
        }
        let Some(r) = self.clients.entry_mut(key) else {
            return;
        };
        r.offline_since = wall_ms();
        if r.record.is_none() && r.holds == 0 && !self.owns_durable(name) {
            self.clients.forget(key);
        }
    }

    /// Whether `name` owns a durable subscription.
    fn owns_durable(&self, name: &str) -> bool {
        self.topics
            .values()
            .any(|t| t.durable_owners().any(|o| &*o == name))
    }

    /// Forgets the registrations that hold nothing and have no session (`online` says which
    /// names have one): in-memory ones whatever their age, permanent ones offline since
    /// `cut_ms` or earlier (a `ClientForgotten` record for each). Returns how many went.
    pub fn expire_clients(
        &mut self,
        log: &mut LogGuard<'_>,
        cut_ms: u64,
        online: impl Fn(&str) -> bool,
    ) -> u64 {
        let owners = self.durable_owners();
        let doomed: Vec<(ClientKey, Arc<str>, Option<Record>)> = self
            .clients
            .iter()
            .filter(|(_, r)| {
                r.holds == 0
                    && (r.record.is_none() || r.offline_since <= cut_ms)
                    && !owners.contains(&r.name)
                    && !online(&r.name)
            })
            .map(|(k, r)| (k, r.name.clone(), r.record))
            .collect();
        for (key, name, record) in &doomed {
            if let Some((segment, size)) = record {
                self.append(log, |b| {
                    record::encode_name(b, kind::CLIENT_FORGOTTEN, name)
                });
                self.journal.drop_live(*segment, *size);
            }
            self.clients.forget(*key);
        }
        doomed.len() as u64
    }

    /// Forgets offline client `name` now (see [`crate::Admin::forget_client`]); `online` says
    /// which names have a session.
    pub fn forget_client(
        &mut self,
        log: &mut LogGuard<'_>,
        name: &str,
        online: impl Fn(&str) -> bool,
    ) -> Result<(), StoreError> {
        let Some(&key) = self.clients.get(name) else {
            return Err(StoreError::ClientNotFound(name.to_owned()));
        };
        if online(name) {
            return Err(StoreError::AlreadyOnline(name.to_owned()));
        }
        let (holds, record) = match self.clients.entry(key) {
            Some(r) => (r.holds, r.record),
            None => return Err(StoreError::ClientNotFound(name.to_owned())),
        };
        if holds > 0 {
            return Err(StoreError::InvalidArgument(format!(
                "client '{name}' still has {holds} stored messages sent by it or addressed to \
                 it; forget it once they are gone"
            )));
        }
        if self.owns_durable(name) {
            return Err(StoreError::InvalidArgument(format!(
                "client '{name}' owns a durable subscription; unsubscribe it first"
            )));
        }
        if let Some((segment, size)) = record {
            self.append(log, |b| {
                record::encode_name(b, kind::CLIENT_FORGOTTEN, name)
            });
            self.journal.drop_live(segment, size);
        }
        self.clients.forget(key);
        Ok(())
    }

    /// Owners of durable subscriptions (they hold their names).
    fn durable_owners(&self) -> HashSet<Arc<str>> {
        self.topics
            .values()
            .flat_map(|t| t.durable_owners())
            .collect()
    }

    /// Replay: a `ClientRegistered` record at `segment`.
    pub(super) fn replay_registered(&mut self, name: &str, segment: u64, size: u32) {
        let (key, _) = self.clients.key(name);
        self.set_record(key, segment, size);
    }

    /// Replay: a `ClientForgotten` record. A name that still holds messages (which a log
    /// written by this code never shows) stays, in memory only.
    pub(super) fn replay_forgotten(&mut self, name: &str) {
        let Some(&key) = self.clients.get(name) else {
            return;
        };
        let Some(r) = self.clients.entry_mut(key) else {
            return;
        };
        let (record, holds) = (r.record.take(), r.holds);
        if let Some((segment, size)) = record {
            self.journal.drop_live(segment, size);
        }
        if holds == 0 {
            self.clients.forget(key);
        }
    }

    /// Replay: the clients listed by the header of `segment` (format versions 1 and 2), the
    /// oldest segment's. They count as registrations recorded in that segment (live bytes of
    /// it, no longer header bytes), so compaction rewrites them as records before it deletes
    /// it.
    pub(super) fn snapshot_registrations(&mut self, names: &[String], segment: u64) {
        for name in names {
            let (key, _) = self.clients.key(name);
            let size = record::name_len(name) as u32;
            self.set_record(key, segment, size);
            self.journal.header_holds_live(segment, u64::from(size));
        }
    }

    /// End of recovery: names found only in messages that are gone since hold nothing.
    pub fn forget_unheld(&mut self) {
        let owners = self.durable_owners();
        let doomed: Vec<ClientKey> = self
            .clients
            .iter()
            .filter(|(_, r)| r.record.is_none() && r.holds == 0 && !owners.contains(&r.name))
            .map(|(k, _)| k)
            .collect();
        for key in doomed {
            self.clients.forget(key);
        }
    }

    /// Re-appends the registrations whose record is in `segment` (compaction); returns the
    /// bytes written.
    pub(super) fn rewrite_registrations(&mut self, log: &mut LogGuard<'_>, segment: u64) -> u64 {
        let keys = self
            .journal
            .segments
            .get_mut(&segment)
            .map(|s| std::mem::take(&mut s.clients))
            .unwrap_or_default();
        let mut bytes = 0;
        for key in keys {
            let Some(r) = self.clients.entry(key) else {
                continue;
            };
            if r.record.map(|(s, _)| s) != Some(segment) {
                continue;
            }
            let name = r.name.clone();
            self.append_registered(log, key, &name);
            bytes += record::name_len(&name) as u64;
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_keys_that_are_reused_once_forgotten() {
        let mut reg = Registry::default();
        let (a, _) = reg.key("a");
        let (b, _) = reg.key("b");
        assert_ne!(a, b);
        assert_eq!(reg.key("a").0, a, "a known name keeps its key");
        reg.hold(a);
        reg.hold(a);
        reg.release(a);
        assert_eq!(reg.entry(a).unwrap().holds, 1);
        let gone = reg.forget(b).unwrap();
        assert_eq!(&*gone.name, "b");
        assert!(!reg.contains_key("b") && reg.entry(b).is_none());
        assert!(reg.forget(b).is_none(), "forgetting twice is a no-op");
        let (c, _) = reg.key("c");
        assert_eq!(c, b, "the freed key is reused");
        assert_eq!(reg.len(), 2);
        assert_eq!(
            reg.iter().map(|(_, r)| &*r.name).collect::<Vec<_>>(),
            ["a", "c"]
        );
    }
}
