//! [`EmbeddedStore`]: the [`Store`](crate::Store) implementation of the embedded engine.
//!
//! Every call follows the same shape: lock the state, change it and encode the records into the
//! log buffer, take the batch's ticket, unlock, then wait for the ticket (group commit). The
//! state mutex is a `std::sync::Mutex` because it is never held across an `.await`: holding it
//! is pure in-memory work, measured in microseconds.
//!
//! Message calls (send, publish, receive, ack, commit) wait only when they wrote records or
//! hand out persistent messages: non-persistent messages never wait for the disk.
//!
//! Before it changes anything, a call that would write is admitted by its [`Class`]: on a full
//! disk (the space reserve in use, see [`Space`]) calls that grow the log are refused with
//! `ResourceExhausted`, and calls that lead to freeing space go on.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ferry_protocol::{
    subscription_queue, Delivery, DeliveryId, DeliveryView, MessageId, QueueInfo, QueueOptions,
    SubscriptionOptions, TopicInfo,
};

use super::backend::Backend;
use super::bodies::BodyReader;
use super::claims::Claims;
use super::config::EmbeddedConfig;
use super::consumers::ConsumerClaims;
use super::figures::EngineFigures;
use super::recovery;
use super::space::Space;
use super::spares::Spares;
use super::state::cache::CacheFigures;
use super::state::messages::BatchMemo;
use super::state::State;
use super::writer::{self, Files, Log};
use super::SEGMENTS_DIR;
use crate::api::{
    Heartbeat, NewMessage, PublishRun, Queues, ReceiveSpec, Registration, RunStored, SessionId,
    Sessions, Topics, Transactions, Upkeep,
};
use crate::direct::DirectConsumer;
use crate::error::StoreError;

/// What a writing call does to the log's size, for its admission on a full disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// It may grow the log (sends, publishes, new queues, topics, subscriptions and permanent
    /// client names): refused while the disk is full.
    Grows,
    /// It leads to freeing space (takes, acks, nacks, deletes, expiry, compaction): it may
    /// write into the space reserve.
    Frees,
    /// It writes nothing (non-persistent messages, a known client name): never refused.
    Quiet,
}

impl Class {
    /// The class of storing `msgs`: only persistent messages grow the log.
    fn of_messages<'m>(mut msgs: impl Iterator<Item = &'m NewMessage>) -> Class {
        if msgs.any(|m| m.persistent) {
            Class::Grows
        } else {
            Class::Quiet
        }
    }
}

/// The refusal of a call that would grow the log on a full disk.
fn disk_full() -> StoreError {
    StoreError::ResourceExhausted(
        "the disk is full: sends, publishes and new queues, topics, subscriptions and client \
         names are refused until space is freed; consumers may go on draining"
            .into(),
    )
}

/// The embedded storage engine. Open it with [`EmbeddedStore::open`]; share the `Arc`.
pub struct EmbeddedStore {
    /// Never held across an `.await`.
    pub(super) state: Mutex<State>,
    pub(super) log: Log,
    pub(super) backend: Arc<dyn Backend>,
    pub(super) seg_dir: PathBuf,
    pub(super) segment_bytes: u64,
    /// Compacted segment files kept for reuse: compaction adds, the writer takes.
    pub(super) spares: Arc<Spares>,
    /// The space reserve for operations that free space on a full disk.
    pub(super) space: Arc<Space>,
    /// Serialises compaction runs.
    pub(super) maintaining: tokio::sync::Mutex<()>,
    /// Which session holds each client name.
    pub(super) claims: Claims,
    /// Fsync latency, commit sizes, compactions and recovery time, for metrics.
    pub(super) figures: Arc<EngineFigures>,
    /// Messages found by recovery at open.
    pub(super) recovered_messages: u64,
    /// Which sessions consume each topic subscription.
    consumers: ConsumerClaims,
    /// The bytes messages take in memory (the state's gauge, read without its lock).
    memory: Arc<AtomicU64>,
    /// Reads message bodies that are no longer cached from their records.
    pub(super) bodies: BodyReader,
    /// The body cache's figures (read without the state lock).
    pub(super) cache: Arc<CacheFigures>,
    /// Users and their grants (see [`super::user_file`]).
    pub(super) users: super::user_file::UserFile,
    /// Held for the store's life so no other process writes the same log.
    _dir_lock: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("seg_dir", &self.seg_dir)
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Removes subscription `name` of `topic` when it is shared, not durable and nobody consumes
    /// it any more: such a subscription lives as long as it has consumers.
    async fn drop_if_unconsumed_shared(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        let queue = subscription_queue(topic, name);
        if self.consumers.in_use(&queue) || !self.state().is_shared_non_durable(topic, name) {
            return Ok(()); // nothing to write, nothing to wait for
        }
        let consumers = &self.consumers;
        self.mutate(Class::Frees, |st, log| {
            st.drop_unconsumed_shared(log, topic, name, |q| consumers.in_use(q));
            Ok(())
        })
        .await
    }

    /// Opens (or creates) the store in `cfg.dir`, replaying its log. Blocking file I/O runs on
    /// tokio's blocking pool.
    pub async fn open(cfg: EmbeddedConfig) -> Result<Arc<EmbeddedStore>, StoreError> {
        let store = tokio::task::spawn_blocking(move || Self::open_blocking(cfg))
            .await
            .map_err(|e| StoreError::Internal(format!("opening the store panicked: {e}")))??;
        // Non-durable subscriptions belonged to sessions of the previous run, all gone now.
        let dropped = store
            .mutate(Class::Frees, |st, log| Ok(st.drop_non_durable(log)))
            .await?;
        if dropped > 0 {
            tracing::info!(
                subscriptions = dropped,
                "dropped the non-durable subscriptions of the previous run"
            );
        }
        Ok(store)
    }

    fn open_blocking(cfg: EmbeddedConfig) -> Result<Arc<EmbeddedStore>, StoreError> {
        let backend = cfg.backend.clone();
        backend
            .create_dir_all(&cfg.dir)
            .map_err(|e| StoreError::Unavailable(format!("creating {}: {e}", cfg.dir.display())))?;
        let dir_lock = backend
            .lock_dir(&cfg.dir)
            .map_err(|e| StoreError::Unavailable(format!("locking {}: {e}", cfg.dir.display())))?;
        let users = super::user_file::UserFile::load(backend.clone(), &cfg.dir)?;
        let seg_dir = cfg.dir.join(SEGMENTS_DIR);
        let segment_bytes = cfg.segment_bytes.max(1);
        let recovery_started = std::time::Instant::now();
        let recovery::Recovered {
            mut state,
            mut head,
            spares,
        } = recovery::recover(
            &backend,
            &seg_dir,
            segment_bytes,
            cfg.spare_segments,
            cfg.properties_bytes,
        )?;
        // Appends must never meet a full disk: the active segment's space is allocated ahead.
        // Where it cannot be (no room, or no allocation ahead on this filesystem), the next
        // record starts a new segment, whose file comes with its space or is the reserve.
        match head.file.allocate(state.journal.head_capacity()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot allocate the active segment's space; \
                    the next record starts a new segment");
                state.journal.roll_before_next();
            }
        }
        let recovery_took = recovery_started.elapsed();
        let recovered_messages = state.message_count() as u64;
        let figures = Arc::new(EngineFigures::new(recovery_took));
        tracing::info!(
            dir = %cfg.dir.display(),
            recovery_ms = recovery_took.as_millis() as u64,
            segments = state.journal.segments.len(),
            messages = state.message_count(),
            next_id = state.next_id,
            fsync = %cfg.fsync,
            spare_segments = spares.len(),
            "embedded store opened"
        );
        let spares = Arc::new(Spares::new(seg_dir.clone(), cfg.spare_segments, spares));
        let space = Arc::new(Space::new(backend.clone(), &seg_dir, segment_bytes));
        if !space.replenish(&spares) {
            tracing::warn!(
                "no room for the log space reserve: sends and publishes are refused until \
                 space is freed"
            );
        }
        let files = Files {
            spares: spares.clone(),
            space: space.clone(),
            segment_bytes,
        };
        let log = Log::start(
            backend.clone(),
            seg_dir.clone(),
            cfg.fsync,
            head,
            files,
            figures.clone(),
        )
        .map_err(|e| StoreError::Unavailable(format!("starting the log writer: {e}")))?;
        let memory = state.memory_gauge();
        let bodies = BodyReader::new(backend.clone(), &seg_dir);
        state.set_bodies(cfg.cache_bytes, bodies.clone());
        let cache = state.cache_figures();
        Ok(Arc::new(EmbeddedStore {
            bodies,
            cache,
            memory,
            state: Mutex::new(state),
            log,
            backend,
            seg_dir,
            segment_bytes,
            spares,
            space,
            maintaining: tokio::sync::Mutex::new(()),
            claims: Claims::default(),
            consumers: ConsumerClaims::default(),
            figures,
            recovered_messages,
            users,
            _dir_lock: dir_lock,
        }))
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // State changes are applied step by step without panicking code in between; if a bug
        // did panic, refusing every later call would take the broker down for no gain.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fails when the store cannot take writes: poisoned, or degraded and the retry of the
    /// failed write fails again.
    pub(super) async fn writable(&self) -> Result<(), StoreError> {
        self.log.check_writable()?;
        if self.log.is_degraded() {
            self.log.probe().await?;
        }
        Ok(())
    }

    /// About the bytes the in-memory index of stored messages takes (bodies in the log and in
    /// the cache not counted).
    pub fn index_bytes(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }

    /// Number of messages stored (each counted once, whatever its number of queues).
    pub fn message_count(&self) -> usize {
        self.state().message_count()
    }

    /// Number of registered client names (diagnostics and tests).
    pub fn client_count(&self) -> usize {
        self.state().client_count()
    }

    /// Number of spare segment files kept for reuse (diagnostics and tests).
    pub fn spare_segments(&self) -> usize {
        self.spares.len()
    }

    /// Numbers of the segment files the log currently consists of (diagnostics and tests).
    pub fn segments(&self) -> Vec<u64> {
        self.state().journal.segments.keys().copied().collect()
    }

    /// Whether the store is full (its space reserve in use or missing): only operations that
    /// free space may write.
    pub fn is_full(&self) -> bool {
        self.space.is_full()
    }

    /// Admits a writing call of class `class` (see [`Class`]) before it changes anything.
    pub(super) async fn admit(&self, class: Class) -> Result<(), StoreError> {
        if !self.space.is_full() || class == Class::Quiet {
            return Ok(());
        }
        if class == Class::Grows {
            return Err(disk_full());
        }
        if self.has_room() {
            return Ok(());
        }
        // Short of room even for what frees space: compact first (segments drained by the
        // consumers give their files back, and one may become the reserve again).
        if let Err(e) = self.compact().await {
            tracing::warn!(error = %e, "compaction on a full disk failed");
        }
        if !self.space.is_full() || self.has_room() {
            return Ok(());
        }
        Err(StoreError::ResourceExhausted(
            "the disk is full and the space reserve is used up: retry once space is freed".into(),
        ))
    }

    /// Whether an operation that frees space still finds room on a full disk: a spare file
    /// for the next segment, or a quarter of a segment left in the active one.
    fn has_room(&self) -> bool {
        self.spares.len() > 0 || self.state().journal.room() >= self.segment_bytes / 4
    }

    /// Runs `f` on the locked state with the log buffer, then waits for the batch if `f`
    /// wrote to it. `class` says whether a full disk refuses it.
    pub(super) async fn mutate<T>(
        &self,
        class: Class,
        f: impl FnOnce(&mut State, &mut writer::LogGuard<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.admit(class).await?;
        self.writable().await?;
        let (value, ticket) = {
            let mut st = self.state();
            let mut log = self.log.lock();
            let value = f(&mut st, &mut log);
            st.flush_direct();
            (value?, log.ticket_if_pending())
        };
        writer::wait(ticket).await?;
        Ok(value)
    }

    /// As [`EmbeddedStore::mutate`], but waits only if `f` appended records (a call on
    /// non-persistent messages only returns at once).
    async fn mutate_lean<T>(
        &self,
        class: Class,
        f: impl FnOnce(&mut State, &mut writer::LogGuard<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.admit(class).await?;
        self.writable().await?;
        let (value, ticket) = {
            let mut st = self.state();
            let mut log = self.log.lock();
            let value = f(&mut st, &mut log);
            st.flush_direct();
            let value = value?;
            let ticket = log.ticket_if_appended();
            (value, ticket)
        };
        writer::wait(ticket).await?;
        Ok(value)
    }
}

impl EmbeddedStore {
    /// Returns deliveries to their queues with `f`; waits for durability only when `f` wrote
    /// (dead-lettering), so returning works even while writes are refused.
    async fn settle_back(
        &self,
        f: impl FnOnce(&mut State, &mut writer::LogGuard<'_>) -> (Vec<String>, bool),
    ) -> Result<Vec<String>, StoreError> {
        let (queues, ticket) = {
            let mut st = self.state();
            let mut log = self.log.lock();
            let (queues, wrote) = f(&mut st, &mut log);
            (queues, if wrote { log.ticket_if_pending() } else { None })
        };
        writer::wait(ticket).await?;
        Ok(queues)
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        self.log.shutdown();
    }
}

// Every role is played by the engine itself.
crate::engine_store!(EmbeddedStore);

#[async_trait]
impl Queues for EmbeddedStore {
    async fn create_queue_with(
        &self,
        name: &str,
        options: &QueueOptions,
    ) -> Result<(), StoreError> {
        self.mutate(Class::Grows, |st, log| st.create_queue(log, name, options))
            .await
    }

    async fn delete_queue(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.mutate(Class::Frees, |st, log| st.delete_queue(log, name, force))
            .await
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>, StoreError> {
        Ok(self.state().list_queues())
    }

    async fn count_queues(&self) -> Result<usize, StoreError> {
        Ok(self.state().queue_count())
    }

    async fn queue_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.state().has_queue(name))
    }

    async fn send(&self, msg: NewMessage) -> Result<MessageId, StoreError> {
        let class = Class::of_messages(std::iter::once(&msg));
        self.mutate_lean(class, |st, log| st.send(log, msg)).await
    }

    async fn send_batch(&self, msgs: Vec<NewMessage>) -> Vec<Result<MessageId, StoreError>> {
        let n = msgs.len();
        if let Err(e) = self.admit(Class::of_messages(msgs.iter())).await {
            return vec![Err(e); n];
        }
        if let Err(e) = self.writable().await {
            return vec![Err(e); n];
        }
        let (mut results, ticket) = {
            let mut st = self.state();
            let mut log = self.log.lock();
            let mut last = BatchMemo::default();
            st.expect_publishes(n);
            let results: Vec<_> = msgs
                .into_iter()
                .map(|m| st.send_next(&mut log, m, &mut last))
                .collect();
            st.flush_direct();
            let ticket = log.ticket_if_appended();
            (results, ticket)
        };
        if let Err(e) = writer::wait(ticket).await {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.clone());
            }
        }
        results
    }

    async fn publish_run(&self, run: PublishRun) -> RunStored {
        if let Some(stored) = self.publish_run_direct(&run).await {
            return stored;
        }
        RunStored::Each(self.send_batch(run.into_messages()).await)
    }

    async fn receive(&self, spec: &ReceiveSpec, max: usize) -> Result<Vec<Delivery>, StoreError> {
        self.receive_deliveries(spec, max).await
    }

    async fn receive_with(
        &self,
        spec: &ReceiveSpec,
        max: usize,
        taker: Option<&dyn DirectConsumer>,
        sink: &mut (dyn for<'v> FnMut(usize, DeliveryView<'v>) + Send),
    ) -> Result<usize, StoreError> {
        self.receive_into(spec, max, taker, sink).await
    }

    async fn ack(&self, session: SessionId, ids: &[DeliveryId]) -> Result<(), StoreError> {
        let unknown = self
            .mutate_lean(Class::Frees, |st, log| {
                Ok(st.settle(log, session, ids, false).unknown)
            })
            .await?;
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(StoreError::DeliveriesNotFound(unknown))
        }
    }

    async fn nack(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Result<Vec<String>, StoreError> {
        let settled = if requeue {
            // A requeue writes nothing (after a crash every leased message comes back anyway),
            // so it works even while writes are refused; only dead-lettering writes.
            let (settled, ticket) = {
                let mut st = self.state();
                let mut log = self.log.lock();
                let settled = st.settle(&mut log, session, ids, true);
                let ticket = if settled.wrote {
                    log.ticket_if_pending()
                } else {
                    None
                };
                (settled, ticket)
            };
            writer::wait(ticket).await?;
            settled
        } else {
            self.mutate_lean(Class::Frees, |st, log| {
                Ok(st.settle(log, session, ids, false))
            })
            .await?
        };
        if settled.unknown.is_empty() {
            Ok(settled.requeued)
        } else {
            Err(StoreError::DeliveriesNotFound(settled.unknown))
        }
    }

    fn memory_bytes(&self) -> u64 {
        // The index (what the state keeps per message) and the cache of recent bodies.
        self.memory.load(Ordering::Relaxed) + self.cache.bytes.load(Ordering::Relaxed)
    }

    fn relieve_memory(&self, short: bool) -> bool {
        let held = self.cache.bytes.load(Ordering::Relaxed);
        let limited = self.cache.capacity.load(Ordering::Relaxed) == 0;
        if short == limited && (held == 0 || !short) {
            return false;
        }
        self.state().limit_cache(short.then_some(0));
        short && held > 0
    }

    async fn waiting_queues(&self, client: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        Ok(self.state().waiting_queues(client, now_ms))
    }
}

#[async_trait]
impl Topics for EmbeddedStore {
    async fn create_topic(&self, name: &str) -> Result<(), StoreError> {
        self.mutate(Class::Grows, |st, log| st.create_topic(log, name))
            .await
    }

    async fn delete_topic(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.mutate(Class::Frees, |st, log| st.delete_topic(log, name, force))
            .await
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>, StoreError> {
        Ok(self.state().list_topics())
    }

    async fn subscribe_topic(
        &self,
        topic: &str,
        name: &str,
        options: &SubscriptionOptions,
        owner: &str,
    ) -> Result<String, StoreError> {
        // Subscribing again to an existing subscription writes nothing (or, replacing a
        // non-durable one, little): that works on a full disk.
        let class = if self.state().check_subscription(topic, name).is_ok() {
            Class::Frees
        } else {
            Class::Grows
        };
        // Waits even when nothing was written: an existing subscription may still be pending.
        self.mutate(class, |st, log| {
            st.subscribe(log, topic, name, options, owner)
        })
        .await
    }

    async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        let queue = subscription_queue(topic, name);
        if self.consumers.in_use(&queue) {
            return Err(StoreError::SubscriptionInUse(queue));
        }
        self.mutate(Class::Frees, |st, log| st.unsubscribe(log, topic, name))
            .await
    }

    async fn attach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
        shared: bool,
    ) -> Result<(), StoreError> {
        // Under the state lock, so that a shared non-durable subscription losing its last
        // consumer (dropped under the same lock) cannot lose one that attaches meanwhile.
        let state = self.state();
        state.check_subscription(topic, name)?;
        self.consumers
            .attach(&subscription_queue(topic, name), session, shared)
    }

    async fn detach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
    ) -> Result<(), StoreError> {
        self.consumers
            .detach(&subscription_queue(topic, name), session);
        self.drop_if_unconsumed_shared(topic, name).await
    }

    fn attach_direct(&self, queue: &str, consumer: Arc<dyn DirectConsumer>) -> bool {
        self.state().attach_direct(queue, consumer)
    }

    fn detach_direct(&self, consumer: &Arc<dyn DirectConsumer>) {
        self.state().detach_direct(consumer);
    }
}

#[async_trait]
impl Transactions for EmbeddedStore {
    async fn commit(
        &self,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError> {
        let class = match Class::of_messages(msgs.iter()) {
            Class::Quiet => Class::Frees, // its acks
            grows => grows,
        };
        self.mutate_lean(class, |st, log| st.commit(log, session, msgs, acks))
            .await
    }
}

#[async_trait]
impl Sessions for EmbeddedStore {
    async fn register_client(&self, name: &str) -> Result<(), StoreError> {
        // A known permanent name writes nothing: that works on a full disk too.
        let class = if self.state().registration_writes(name) {
            Class::Grows
        } else {
            Class::Quiet
        };
        self.mutate(class, |st, log| st.register_client(log, name))
            .await
    }

    async fn client_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.state().client_exists(name))
    }

    async fn release_session(&self, session: SessionId) -> Result<Vec<String>, StoreError> {
        for queue in self.consumers.release(session) {
            if let Some((topic, name)) = queue.split_once(':') {
                self.drop_if_unconsumed_shared(topic, name).await?;
            }
        }
        self.settle_back(|st, log| st.release_session(log, session))
            .await
    }

    async fn claim_session(
        &self,
        client: &str,
        session: SessionId,
        registration: Registration,
    ) -> Result<(), StoreError> {
        // Claim first, so a name already online is refused without writing anything.
        self.claims.claim(client, session)?;
        let registered = match registration {
            Registration::Permanent => self.register_client(client).await,
            Registration::Ephemeral => self.state().register_ephemeral(client),
        };
        if registered.is_err() {
            self.claims.end(client, session);
        }
        registered
    }

    async fn end_session(&self, client: &str, session: SessionId) -> Result<(), StoreError> {
        if self.claims.end(client, session) {
            let claims = &self.claims;
            self.state()
                .session_ended(client, |name| claims.is_online(name));
        }
        Ok(())
    }

    async fn heartbeat(&self, _node_timeout_ms: u64) -> Result<Heartbeat, StoreError> {
        // One process owns the store: there are no other nodes to tell or to outlive.
        Ok(Heartbeat::default())
    }

    async fn leave(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn subscribe_changes(&self) -> Option<tokio::sync::broadcast::Receiver<Vec<String>>> {
        None
    }
}

#[async_trait]
impl Upkeep for EmbeddedStore {
    async fn expire_clients(&self, now_ms: u64, idle_ms: u64) -> Result<u64, StoreError> {
        let cut = now_ms.saturating_sub(idle_ms);
        let claims = &self.claims;
        let forgotten = self
            .mutate_lean(Class::Frees, |st, log| {
                Ok(st.expire_clients(log, cut, |name| claims.is_online(name)))
            })
            .await?;
        if forgotten > 0 {
            tracing::info!(forgotten, "forgot client names that held nothing");
        }
        Ok(forgotten)
    }

    async fn expire_leases(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.settle_back(|st, log| st.expire_leases(log, now_ms))
            .await
    }

    async fn next_lease_deadline(&self) -> Result<Option<u64>, StoreError> {
        Ok(self.state().next_lease_deadline())
    }

    async fn delayed_due(
        &self,
        _after_ms: u64,
        until_ms: u64,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        // The state remembers which delayed messages it made ready and reports each once.
        Ok(self.state().delayed_due(until_ms))
    }

    async fn purge_expired(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.mutate(Class::Frees, |st, log| Ok(st.purge_expired(log, now_ms)))
            .await
    }

    async fn maintain(&self) -> Result<(), StoreError> {
        self.compact().await?;
        if self.space.is_full() {
            let (space, spares) = (self.space.clone(), self.spares.clone());
            tokio::task::spawn_blocking(move || space.replenish(&spares))
                .await
                .map_err(|e| StoreError::Internal(format!("making the space reserve: {e}")))?;
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.log.check_writable()?;
        self.log.flush().await
    }
}
