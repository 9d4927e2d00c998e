//! The [`Store`] trait: what every storage engine offers the broker, in queue operations, split
//! by role: [`Queues`] (queues and their messages), [`Topics`] (topics and subscriptions),
//! [`Transactions`], [`Sessions`] (clients, sessions, nodes), [`Upkeep`] (timers and background
//! work), with [`Admin`] (the operator's) and [`Users`]. A caller asks the store for the role it
//! needs (`store.queues().send(msg)`); a wrapper that changes one role (fault injection, say)
//! implements that one and hands out the inner store's others.
//!
//! The trait speaks in queue operations rather than bytes because the PostgreSQL engine keeps its
//! state in the database, shared by every node, while the embedded engine keeps indexes in memory
//! and only a log on disk. The broker validates names, sizes and limits before calling the store;
//! the store checks existence (queues, clients) and keeps the guarantees of `docs/semantics.md`.
//!
//! Every mutating call returns only once its effect is as durable as the engine's fsync policy
//! promises (with `always`: on stable storage).

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use ferry_protocol::packed::PackedBodies;
use ferry_protocol::{
    AckMode, Delivery, DeliveryId, DeliveryView, MessageId, Name, Order, Properties, QueueInfo,
    QueueOptions, ReceiveMode, Source, SubscriptionOptions, TopicInfo,
};
use ferry_selector::Selector;

use crate::admin::Admin;
use crate::direct::DirectConsumer;
use crate::error::StoreError;
use crate::users::Users;

/// The names of a dead-lettered message's history (moved to the crate root; kept here for callers).
pub use crate::dead_letter;

/// Identifies the session that holds leases. Chosen by the broker, unique per store while the
/// broker runs (engines shared by several nodes qualify it with the node).
pub type SessionId = u64;

/// How a session's client name is registered by [`Sessions::claim_session`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Registration {
    /// The name stays registered after the session ends, until it expires (see
    /// [`Upkeep::expire_clients`]). A name registered ephemerally before becomes permanent.
    #[default]
    Permanent,
    /// The name is forgotten when its session ends, as soon as it holds nothing (no stored
    /// message sent by it or addressed to it, no durable subscription of its own). Nothing is
    /// written for it. A name registered permanently stays permanent.
    Ephemeral,
}

/// A message to store, with the fields the broker sets (sender, time) filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    /// Queues to place it on: all or none. Non-empty, no duplicates (the broker ensures it),
    /// unless `topic` is set; then empty.
    pub queues: Vec<String>,
    /// Publish: the message goes on the queue of every subscription of this topic whose
    /// selector is TRUE for it, evaluated by the store in the same atomic step that stores it
    /// (no matching subscription: it is stored nowhere, yet gets an id). `TopicNotFound` when
    /// the topic does not exist.
    pub topic: Option<Name>,
    /// `false`: kept in memory only where the engine can (never written to the log, lost on
    /// restart); the engine says in its docs what it does instead where it cannot. Settling
    /// such a message writes nothing either.
    pub persistent: bool,
    /// The sending client.
    pub sender: Arc<str>,
    /// If set, only this client may receive it; must be a known client.
    pub receiver: Option<String>,
    /// 1 to 10.
    pub priority: u8,
    /// Application context.
    pub context: u64,
    /// Properties.
    pub properties: Properties,
    /// Payload.
    pub body: Bytes,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// Delayed delivery: invisible to receives until this time, ms since the Unix epoch
    /// (`created_at` + delay). 0 = visible at once.
    pub deliver_at_ms: u64,
    /// Expiry: never delivered at or after this time, ms since the Unix epoch (`created_at` +
    /// time to live). 0 = never expires.
    pub expires_at_ms: u64,
}

/// A run of messages published to one topic that differ only in their bodies (a
/// `PublishBatch`): every other field is given once. See [`Queues::publish_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct PublishRun {
    /// The topic (see [`NewMessage::topic`]).
    pub topic: Name,
    /// As [`NewMessage::persistent`], for every message.
    pub persistent: bool,
    /// The sending client.
    pub sender: Arc<str>,
    /// 1 to 10.
    pub priority: u8,
    /// Properties every message carries (the broker's topic property among them).
    pub properties: Properties,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// As [`NewMessage::deliver_at_ms`].
    pub deliver_at_ms: u64,
    /// As [`NewMessage::expires_at_ms`].
    pub expires_at_ms: u64,
    /// One message each, in order.
    pub bodies: PackedBodies,
}

impl PublishRun {
    /// The run as one [`NewMessage`] per body.
    pub fn into_messages(self) -> Vec<NewMessage> {
        let PublishRun {
            topic,
            persistent,
            sender,
            priority,
            properties,
            created_at,
            deliver_at_ms,
            expires_at_ms,
            bodies,
        } = self;
        bodies
            .handles()
            .map(|body| NewMessage {
                queues: Vec::new(),
                topic: Some(topic.clone()),
                persistent,
                sender: sender.clone(),
                receiver: None,
                priority,
                context: 0,
                properties: properties.clone(),
                body,
                created_at,
                deliver_at_ms,
                expires_at_ms,
            })
            .collect()
    }
}

/// What [`Queues::publish_run`] did with a run's bodies.
#[derive(Debug, Clone, PartialEq)]
pub enum RunStored {
    /// Every body went in, with the ids `first`, `first + 1`, ... (`count` of them): what a
    /// run handed straight to its subscribers gets, without a result built per body.
    Consecutive {
        /// The first body's id.
        first: MessageId,
        /// How many bodies (all of them).
        count: u32,
    },
    /// Each body's own result, in order.
    Each(Vec<Result<MessageId, StoreError>>),
}

impl RunStored {
    /// The first id and count when every body went in with consecutive ids.
    pub fn consecutive(&self) -> Option<(MessageId, u32)> {
        match self {
            RunStored::Consecutive { first, count } => Some((*first, *count)),
            RunStored::Each(results) => {
                let first = *results.first()?.as_ref().ok()?;
                let consecutive = results
                    .iter()
                    .zip(first..)
                    .all(|(r, want)| matches!(r, Ok(id) if *id == want));
                Some((first, u32::try_from(results.len()).ok()?)).filter(|_| consecutive)
            }
        }
    }

    /// How many bodies it covers.
    pub fn len(&self) -> usize {
        match self {
            RunStored::Consecutive { count, .. } => *count as usize,
            RunStored::Each(results) => results.len(),
        }
    }

    /// Whether it covers none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each body's result, in order.
    pub fn into_results(self) -> Vec<Result<MessageId, StoreError>> {
        match self {
            RunStored::Consecutive { first, count } => {
                (first..first + u64::from(count)).map(Ok).collect()
            }
            RunStored::Each(results) => results,
        }
    }
}

/// What a receive asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiveSpec {
    /// A queue, or a sender across all queues.
    pub source: Source,
    /// Priority or time order.
    pub order: Order,
    /// Take or peek.
    pub mode: ReceiveMode,
    /// Auto or client ack (ignored for peeks).
    pub ack: AckMode,
    /// Auto-ack takes only: *hold* the taken messages for `session` instead of removing them.
    /// A held message is invisible to every other receive, nothing is written for it and its
    /// delivery count does not change; each gets a delivery id. The caller then settles it
    /// with [`Queues::ack`] (the removal an auto-ack take would have made) once the delivery is
    /// on its way to the client, or hands it back unchanged with [`Sessions::release_session`]
    /// when it cannot be delivered (no `redelivered` flag, no dead-lettering: it never left).
    /// Held messages have no lease deadline: they stay held until one of those, or until the
    /// store restarts (nothing was written, so they are ready again). Engines that cannot hold
    /// take as without it and report delivery id 0.
    pub hold: bool,
    /// The receiving client: only messages addressed to it or to nobody are eligible.
    pub client: String,
    /// The session that will hold the lease (client ack).
    pub session: SessionId,
    /// When a client-ack lease expires, ms since the Unix epoch.
    pub lease_until_ms: u64,
    /// Only messages this selector is TRUE for are eligible (parsed once by the broker). The
    /// others are passed over, in order, and stay where they are for other receivers. `None`:
    /// every message.
    pub selector: Option<Arc<Selector>>,
    /// The current time, ms since the Unix epoch, from the broker's clock: messages whose
    /// `deliver_at_ms` is later are not visible yet, and messages whose `expires_at_ms` is at
    /// or before it are never delivered.
    pub now_ms: u64,
    /// Most bytes of message bodies one receive hands out: messages are taken in order while
    /// the bodies taken so far and the next one's fit within it, and the receive stops at the
    /// first that does not (it stays where it is, first in line for the next receive; nothing
    /// after it is taken in its place). A receive still hands out one message whose body alone
    /// is bigger, so such a message is never stuck. `max` bounds the count as before. `None`:
    /// no limit. A caller that answers within a memory budget (a push batch, a reply) passes
    /// that budget here, so that the messages are never read before it could refuse them.
    pub max_bytes: Option<u64>,
}

impl ReceiveSpec {
    /// Whether a message whose body has `next` bytes is taken after `taken` messages with
    /// `bytes` of bodies, under [`ReceiveSpec::max_bytes`].
    pub fn fits(&self, taken: usize, bytes: u64, next: u64) -> bool {
        match self.max_bytes {
            Some(limit) => taken == 0 || bytes.saturating_add(next) <= limit,
            None => true,
        }
    }
}

/// The storage interface, by role: each accessor returns the part of the engine that plays
/// it. Implementations are shared between sessions (`Arc<dyn Store>`); an engine implements each
/// role where its work lives (on itself: [`engine_store!`](crate::engine_store) writes the accessors; or on a part it
/// holds), while a wrapper (fault injection, say) implements only the roles it changes and hands
/// out the inner store's for the others.
pub trait Store: Send + Sync + 'static {
    /// Queues and their messages.
    fn queues(&self) -> &dyn Queues;

    /// Topics and their subscriptions.
    fn topics(&self) -> &dyn Topics;

    /// Transactions.
    fn transactions(&self) -> &dyn Transactions;

    /// Clients, sessions and nodes.
    fn sessions(&self) -> &dyn Sessions;

    /// Timers and background work.
    fn upkeep(&self) -> &dyn Upkeep;

    /// The operator's role: figures, browsing, purge, move, settings.
    fn admin(&self) -> &dyn Admin;

    /// Users and their grants.
    fn users(&self) -> &dyn Users;
}

/// Implements [`Store`] for an engine that plays every role itself (each accessor returns
/// `self`): `ferry_store::engine_store!(MyEngine);` once the engine implements [`Queues`],
/// [`Topics`], [`Transactions`], [`Sessions`], [`Upkeep`], [`Admin`] and [`Users`].
#[macro_export]
macro_rules! engine_store {
    ($engine:ty) => {
        impl $crate::Store for $engine {
            fn queues(&self) -> &dyn $crate::Queues {
                self
            }

            fn topics(&self) -> &dyn $crate::Topics {
                self
            }

            fn transactions(&self) -> &dyn $crate::Transactions {
                self
            }

            fn sessions(&self) -> &dyn $crate::Sessions {
                self
            }

            fn upkeep(&self) -> &dyn $crate::Upkeep {
                self
            }

            fn admin(&self) -> &dyn $crate::Admin {
                self
            }

            fn users(&self) -> &dyn $crate::Users {
                self
            }
        }
    };
}

/// Queues and their messages: create, delete and list queues; send, receive and settle.
#[async_trait]
pub trait Queues: Send + Sync {
    /// Creates a queue with default settings. `QueueExists` if it does.
    async fn create_queue(&self, name: &str) -> Result<(), StoreError> {
        self.create_queue_with(name, &QueueOptions::default()).await
    }

    /// Creates a queue with settings. `QueueExists` if it does; `QueueNotFound` when the
    /// dead-letter or expiry queue does not exist; `InvalidArgument` when one is the queue
    /// itself.
    async fn create_queue_with(&self, name: &str, options: &QueueOptions)
        -> Result<(), StoreError>;

    /// Deletes a queue. `QueueNotFound`; `QueueNotEmpty` when it holds ready or in-flight
    /// messages and `force` is false. With `force`, its messages are dropped from it (a message
    /// also on other queues stays there) and its in-flight deliveries become unknown.
    async fn delete_queue(&self, name: &str, force: bool) -> Result<(), StoreError>;

    /// Every queue with its depth, sorted by name.
    async fn list_queues(&self) -> Result<Vec<QueueInfo>, StoreError>;

    /// How many queues `list_queues` would list, without counting their messages (the broker
    /// checks its queue limit with it on every create).
    async fn count_queues(&self) -> Result<usize, StoreError> {
        Ok(self.list_queues().await?.len())
    }

    /// Whether queue `name` exists (a subscription's queue is not one), without listing them.
    async fn queue_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.list_queues().await?.iter().any(|q| q.name == name))
    }

    /// Stores one message on every named queue atomically. `QueueNotFound` names the first
    /// missing queue, `ClientNotFound` an unknown receiver; either way nothing changes.
    async fn send(&self, msg: NewMessage) -> Result<MessageId, StoreError>;

    /// Stores many messages; each succeeds or fails on its own. One durability wait covers all.
    async fn send_batch(&self, msgs: Vec<NewMessage>) -> Vec<Result<MessageId, StoreError>>;

    /// Publishes a run of bodies that share every other field: exactly
    /// [`Queues::send_batch`] of [`PublishRun::into_messages`], which is what engines without
    /// a faster way do. The embedded engine hands a run its subscribers can take directly
    /// over in one step, without a message of its own per body.
    async fn publish_run(&self, run: PublishRun) -> RunStored {
        RunStored::Each(self.send_batch(run.into_messages()).await)
    }

    /// Receives up to `max` messages (at least one is asked for) matching `spec` (its source,
    /// the receiving client and its selector), in order.
    /// Takes with auto ack remove the message from that queue; takes with client ack lease it to
    /// `spec.session` until acked, nacked, released or expired. Peeks change nothing.
    /// `QueueNotFound` for an unknown queue; `ClientNotFound` for an unknown sender.
    async fn receive(&self, spec: &ReceiveSpec, max: usize) -> Result<Vec<Delivery>, StoreError>;

    /// [`Queues::receive`], passing each delivery, borrowed and in order, to `sink` instead of
    /// returning owned ones, with how many deliveries this receive hands out in all (to size
    /// buffers); returns that number. Engines that hold messages in memory
    /// override it so that a push subscription encodes deliveries without building them first.
    ///
    /// `taker` is the push subscription's consumer if the engine took it with
    /// [`Topics::attach_direct`]: the engine then calls its [`DirectConsumer::begin_take`] under
    /// the same lock that picks the batch, picks at most the credit that returns, and calls
    /// [`DirectConsumer::end_take`]`(0)` itself when it picks nothing. The caller calls
    /// `end_take` once a batch it got is on its way to the client. Engines that never take the
    /// offer ignore it.
    async fn receive_with(
        &self,
        spec: &ReceiveSpec,
        max: usize,
        taker: Option<&dyn DirectConsumer>,
        sink: &mut (dyn for<'v> FnMut(usize, DeliveryView<'v>) + Send),
    ) -> Result<usize, StoreError> {
        let _ = taker;
        let ds = self.receive(spec, max).await?;
        for d in &ds {
            sink(ds.len(), d.view());
        }
        Ok(ds.len())
    }

    /// Settles deliveries held by `session`. Known ids are settled even when some are unknown;
    /// then `DeliveriesNotFound` lists the unknown ones.
    async fn ack(&self, session: SessionId, ids: &[DeliveryId]) -> Result<(), StoreError>;

    /// Returns deliveries held by `session` to their queues in their old position, flagged
    /// redelivered (`requeue`), or drops them (`!requeue`). Returns the queues that got messages
    /// back. Unknown ids as for [`Queues::ack`].
    async fn nack(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Result<Vec<String>, StoreError>;

    /// Names of the queues holding ready messages addressed to `client`, sorted. A delayed
    /// message counts once it is due at `now_ms`.
    async fn waiting_queues(&self, client: &str, now_ms: u64) -> Result<Vec<String>, StoreError>;

    /// About the bytes of message data this engine keeps in the broker's memory (bodies,
    /// properties, per-message overhead), for the broker's memory budget. Read often: it must
    /// not block. 0 for engines that keep messages elsewhere (the default).
    fn memory_bytes(&self) -> u64 {
        0
    }

    /// Memory is short (`short`), or no longer is: an engine that keeps what it can read back
    /// (the embedded engine's cache of recent message bodies) lets it go first, and keeps it
    /// empty while memory stays short. Returns whether that freed memory. Called by the
    /// broker's memory watcher: it must not block for long. The default has nothing to free.
    fn relieve_memory(&self, short: bool) -> bool {
        let _ = short;
        false
    }
}

/// Topics and their subscriptions: create, delete and list topics; subscribe and unsubscribe;
/// who consumes a subscription; direct delivery of non-persistent publishes.
#[async_trait]
pub trait Topics: Send + Sync {
    /// Creates a topic. `TopicExists` if it does.
    async fn create_topic(&self, name: &str) -> Result<(), StoreError>;

    /// Deletes a topic with all of its subscriptions. `TopicNotFound`; `TopicNotEmpty` when a
    /// subscription holds ready or in-flight messages and `force` is false.
    async fn delete_topic(&self, name: &str, force: bool) -> Result<(), StoreError>;

    /// Every topic with its subscriptions (and their depths), sorted by name.
    async fn list_topics(&self) -> Result<Vec<TopicInfo>, StoreError>;

    /// Creates subscription `name` on `topic`, or checks that the existing one has the same
    /// `durable`, `shared` and `selector` (`InvalidArgument` naming the difference otherwise:
    /// nothing is dropped implicitly). `TopicNotFound`. Returns the name of its queue
    /// ([`ferry_protocol::subscription_queue`]), which receives, acks and leases use like any
    /// queue; `options.queue` sets that queue's maximum delivery count and dead-letter and
    /// expiry queues (`QueueNotFound` when those do not exist).
    ///
    /// A subscription is placed only messages published after it exists. A non-durable one
    /// belongs to `owner` (a client): the broker removes it with [`Topics::unsubscribe`] when
    /// its consumer ends, and an engine removes it by itself when the owner's session ends
    /// without that (crash recovery, a dead node's claims being freed). Creating a non-durable
    /// subscription under a name that exists replaces it.
    async fn subscribe_topic(
        &self,
        topic: &str,
        name: &str,
        options: &SubscriptionOptions,
        owner: &str,
    ) -> Result<String, StoreError>;

    /// Removes a subscription and its messages (in-flight deliveries of it become unknown).
    /// `TopicNotFound`, `SubscriptionNotFound`, `SubscriptionInUse` while a session consumes it
    /// (see [`Topics::attach_consumer`]).
    async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), StoreError>;

    /// Records that `session` consumes subscription `name` of `topic`. A subscription that is
    /// not shared has one consumer at a time, across every node sharing the store:
    /// `SubscriptionInUse` when it has one already, or when any consumer or this one is not
    /// shared. `SubscriptionNotFound` (or `TopicNotFound`) when it does not exist. The record
    /// ends with [`Topics::detach_consumer`], with the session ([`Sessions::release_session`]), or
    /// with its node (taken for dead, or leaving).
    async fn attach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
        shared: bool,
    ) -> Result<(), StoreError>;

    /// Ends one consumer of subscription `name` of `topic` by `session` (a no-op when there is
    /// none, or no such subscription or topic). A shared non-durable subscription whose last
    /// consumer this was is removed with its messages.
    async fn detach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
    ) -> Result<(), StoreError>;

    /// Offers `consumer`, the one push consumer of subscription queue `queue` (`topic:name`)
    /// on this session, for direct delivery of non-persistent publishes (see
    /// [`crate::direct`]). Returns whether the engine took the offer; the default ignores it,
    /// and messages go through the queue. A taken consumer stays attached until
    /// [`Topics::detach_direct`] or until the queue is deleted.
    fn attach_direct(&self, queue: &str, consumer: Arc<dyn DirectConsumer>) -> bool {
        let _ = (queue, consumer);
        false
    }

    /// Takes back a consumer given to [`Topics::attach_direct`]; once this returns, no publish
    /// hands it anything more.
    fn detach_direct(&self, consumer: &Arc<dyn DirectConsumer>) {
        let _ = consumer;
    }
}

/// Transactions: a session's sends, publishes and acks committed all or nothing.
#[async_trait]
pub trait Transactions: Send + Sync {
    /// Commits a transaction of `session`: stores every message of `msgs` (sends and
    /// publishes, in order) and settles every delivery of `acks` (held by `session`), all or
    /// nothing, atomically also across a crash. Returns the ids of `msgs` in order. Any error
    /// (`QueueNotFound`, `TopicNotFound`, `ClientNotFound`, `DeliveriesNotFound` for an ack of
    /// a delivery the session does not hold, ...) leaves everything unchanged.
    async fn commit(
        &self,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError>;
}

/// Clients, sessions and the nodes sharing the store: client names, the one live session per
/// name, what a session holds, and the heartbeat between nodes.
#[async_trait]
pub trait Sessions: Send + Sync {
    /// Registers a client name permanently; idempotent.
    async fn register_client(&self, name: &str) -> Result<(), StoreError>;

    /// Whether a client name is registered (and was not forgotten since).
    async fn client_exists(&self, name: &str) -> Result<bool, StoreError>;

    /// Returns every delivery `session` holds to its queue (disconnect). Returns those queues.
    async fn release_session(&self, session: SessionId) -> Result<Vec<String>, StoreError>;

    /// Registers `client` as `registration` says and claims it for `session`: one live
    /// session per client name, across every node sharing the store. `AlreadyOnline` when
    /// another session holds it; claiming again for the session holding it succeeds.
    /// Connecting a known name writes nothing, so it works on a full disk; registering a new
    /// permanent one is refused there (`ResourceExhausted`).
    async fn claim_session(
        &self,
        client: &str,
        session: SessionId,
        registration: Registration,
    ) -> Result<(), StoreError>;

    /// Frees the claim on `client` if `session` holds it (a no-op otherwise), and drops the
    /// non-durable subscriptions the client made that nobody consumes (left by a failure: the
    /// broker removes its own as their consumers end; on the embedded engine none are left).
    /// An ephemeral name that holds nothing is forgotten; any other starts counting towards
    /// its expiry.
    async fn end_session(&self, client: &str, session: SessionId) -> Result<(), StoreError>;

    /// Tells the other nodes sharing the store that this one is alive, and frees what nodes
    /// silent for longer than `node_timeout_ms` held: their claims end and their leased
    /// deliveries return to their queues, flagged redelivered. Reports those queues, and
    /// whether this node itself had been taken for dead. A no-op for an engine that only one
    /// node uses.
    async fn heartbeat(&self, node_timeout_ms: u64) -> Result<Heartbeat, StoreError>;

    /// A clean stop (after every session ended): frees whatever this node still holds and
    /// takes it out of the nodes the others watch, so they need not wait for its heartbeat to
    /// time out. A no-op for an engine that only one node uses.
    async fn leave(&self) -> Result<(), StoreError>;

    /// Queues that other nodes changed (messages arrived or came back), as they are reported;
    /// an empty list means "anything may have changed" (e.g. after reconnecting). `None` for an
    /// engine that only one node uses.
    fn subscribe_changes(&self) -> Option<tokio::sync::broadcast::Receiver<Vec<String>>>;
}

/// Work the broker's timers and background jobs do: expiry of leases, messages and client
/// names, delayed messages coming due, compaction, and flushing at shutdown.
#[async_trait]
pub trait Upkeep: Send + Sync {
    /// Forgets the registered names that hold nothing (no stored message sent by them or
    /// addressed to them, no durable subscription they own) and have no session: ephemeral
    /// ones whatever their age, permanent ones whose last session ended (or, for names of an
    /// earlier run of the embedded engine, whose store opened) at `now_ms - idle_ms` or
    /// earlier. Returns how many went. A forgotten name is registered again by its next
    /// session; until then messages cannot be addressed to it (`ClientNotFound`).
    async fn expire_clients(&self, now_ms: u64, idle_ms: u64) -> Result<u64, StoreError>;

    /// Returns every delivery whose lease ended at or before `now_ms`. Returns those queues.
    async fn expire_leases(&self, now_ms: u64) -> Result<Vec<String>, StoreError>;

    /// The earliest lease deadline, if any delivery is leased (so the expiry job can sleep).
    async fn next_lease_deadline(&self) -> Result<Option<u64>, StoreError>;

    /// Delayed messages: the queues (sorted, deduplicated) holding messages whose delivery
    /// time is in `(after_ms, until_ms]` (they became visible in that span, so their waiters
    /// are to be woken), and the earliest delivery time after `until_ms`, if any (so the job
    /// that wakes them can sleep until then).
    async fn delayed_due(
        &self,
        after_ms: u64,
        until_ms: u64,
    ) -> Result<(Vec<String>, Option<u64>), StoreError>;

    /// Removes the ready messages whose expiry time is at or before `now_ms` from their queues
    /// (receives never deliver them anyway; this frees their space). Returns how many queue
    /// entries went.
    async fn purge_expired(&self, now_ms: u64) -> Result<u64, StoreError>;

    /// Background upkeep (compaction of dead log space and the like); cheap when there is none.
    async fn maintain(&self) -> Result<(), StoreError>;

    /// Makes everything written so far durable, whatever the fsync policy (shutdown).
    async fn flush(&self) -> Result<(), StoreError>;
}

/// What a [`Sessions::heartbeat`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// Queues whose deliveries came back from nodes taken for dead (their waiters should wake).
    pub returned: Vec<String>,
    /// This node's own heartbeat had been late and another node took it for dead: every claim
    /// and lease this node held was freed, so its sessions that are still open no longer own
    /// their client names. Reported once, by the first heartbeat after it happened.
    pub was_taken_for_dead: bool,
}
