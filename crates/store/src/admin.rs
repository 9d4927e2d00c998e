//! The [`Admin`] role of a store: what operators need beyond messaging. Queue figures and
//! settings, browsing a backlog without consuming it, purging, moving and deleting messages,
//! the registered clients, and the engine's own figures for metrics.
//!
//! Every engine implements it (the [`crate::Store`] trait requires it), and the conformance
//! suite's `admin` area checks both engines against the same expectations.

use std::sync::Arc;

use async_trait::async_trait;
use ferry_protocol::{Message, MessageId, Order, QueueOptions, Source};
use ferry_selector::Selector;

use crate::error::StoreError;

/// Most entries one browse call examines (a selector may pass over many): a page may come back
/// short, with a cursor to go on from.
pub const BROWSE_BUDGET: usize = 10_000;

/// Most messages on one browse page.
pub const MAX_BROWSE_PAGE: usize = 1000;

/// Figures and settings of one queue (or one subscription's queue, `topic:name`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueDetails {
    /// The queue's name.
    pub name: String,
    /// Messages ready to be taken (delayed messages not yet due excluded).
    pub ready: u64,
    /// Messages waiting for their delivery time.
    pub delayed: u64,
    /// Messages handed out with client ack and not yet settled.
    pub in_flight: u64,
    /// Bytes of the bodies of the ready messages; `None` where the engine does not keep it.
    pub ready_bytes: Option<u64>,
    /// Arrival time of the oldest ready message, ms since the Unix epoch.
    pub oldest_created_at: Option<u64>,
    /// Maximum deliveries, dead-letter and expiry queues.
    pub options: QueueOptions,
    /// Messages that entered the queue since the store opened (sends, publishes, moves,
    /// dead letters); `None` where the engine does not count them.
    pub entered_total: Option<u64>,
    /// Messages that left the queue for good since the store opened (acked, taken with auto
    /// ack, expired, moved, dead-lettered, purged); `None` where not counted.
    pub left_total: Option<u64>,
}

/// Where a browse resumes: the last message of the previous page, in the page's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowseCursor {
    /// Its priority (priority order) or 0 (time order).
    pub priority: u8,
    /// Its id.
    pub id: MessageId,
    /// Its queue, for a browse by sender (a message may be on several of the sender's queues).
    pub queue: Option<String>,
}

/// What a browse asks for.
#[derive(Debug, Clone)]
pub struct BrowseSpec {
    /// One queue, or one sender across every queue.
    pub source: Source,
    /// Priority order (highest first, oldest first within a priority) or time order.
    pub order: Order,
    /// Resume after this message; `None`: from the start.
    pub after: Option<BrowseCursor>,
    /// Most messages to return (at most [`MAX_BROWSE_PAGE`]).
    pub limit: usize,
    /// Only messages it is TRUE for.
    pub selector: Option<Arc<Selector>>,
    /// The current time, ms since the Unix epoch, from the broker's clock: as for a receive,
    /// messages not due yet and messages expired at this time are not shown.
    pub now_ms: u64,
}

/// One browsed message: as a receive would hand it out, nothing changed.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedMessage {
    /// The message (`delivery_count`: client-ack deliveries so far on this queue).
    pub message: Message,
}

/// A page of a browse.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrowsePage {
    /// The messages, in order.
    pub messages: Vec<BrowsedMessage>,
    /// Where the next page starts; `None` at the end of the backlog.
    pub next: Option<BrowseCursor>,
}

/// Where moved messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveTarget {
    /// One queue.
    Queue(String),
    /// Each message back to the queue it was dead-lettered or expired from (its
    /// `ferry_original_queue` property): a redrive.
    Origin,
}

/// What a move did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MoveReport {
    /// Messages moved, with the queue each went to.
    pub moved: Vec<(MessageId, String)>,
    /// Messages asked for and left where they are, with why.
    pub skipped: Vec<(MessageId, String)>,
}

/// A registered client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRecord {
    /// Its name.
    pub name: String,
    /// The node holding its live session, if it is online (`""` on an engine used by one
    /// node).
    pub node: Option<String>,
}

/// What happened to messages that left their queue other than by a consumer, counted by the
/// engine since it opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageCounters {
    /// Moved to a dead-letter queue after their queue's maximum number of deliveries.
    pub dead_lettered_max_deliveries: u64,
    /// Moved to an expiry queue when they expired.
    pub dead_lettered_expired: u64,
    /// Messages that expired (moved to an expiry queue or dropped).
    pub expired: u64,
    /// Dropped because the dead-letter or expiry queue their queue names no longer exists.
    pub dropped_target_missing: u64,
}

impl MessageCounters {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &MessageCounters) {
        self.dead_lettered_max_deliveries += other.dead_lettered_max_deliveries;
        self.dead_lettered_expired += other.dead_lettered_expired;
        self.expired += other.expired;
        self.dropped_target_missing += other.dropped_target_missing;
    }
}

/// A histogram with fixed upper bounds, as the engine keeps it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    /// Upper bounds of the buckets, ascending (the last bucket, +Inf, is implied).
    pub bounds: Vec<f64>,
    /// Observations per bucket (not cumulative); one more than `bounds` (+Inf).
    pub counts: Vec<u64>,
    /// Sum of every observation.
    pub sum: f64,
}

/// The engine's own figures, for metrics. Fields an engine does not have are `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EngineStats {
    /// The engine's name (`embedded`, `postgres`).
    pub engine: &'static str,
    /// Bytes of the log on disk (segments).
    pub log_bytes: Option<u64>,
    /// Segment files of the log.
    pub segments: Option<u64>,
    /// Live bytes over the log's bytes.
    pub live_ratio: Option<f64>,
    /// Spare segment files kept for reuse.
    pub spare_segments: Option<u64>,
    /// Seconds per fsync.
    pub fsync_seconds: Option<Histogram>,
    /// Appends per group commit.
    pub commit_batch: Option<Histogram>,
    /// Compaction runs that rewrote or deleted segments.
    pub compactions: Option<u64>,
    /// How long recovery took when the store opened, in seconds.
    pub recovery_seconds: Option<f64>,
    /// Messages found by recovery.
    pub recovered_messages: Option<u64>,
    /// Whether the store refuses writes (poisoned after a failed fsync, or degraded).
    pub refusing_writes: bool,
    /// See [`MessageCounters`].
    pub counters: MessageCounters,
    /// Bytes still available on the filesystem holding the store's files.
    pub disk_free_bytes: Option<u64>,
    /// Bytes of that filesystem.
    pub disk_total_bytes: Option<u64>,
    /// Bytes the engine's in-memory index of the stored messages takes, about (the messages'
    /// bookkeeping, without the bodies in the log).
    pub index_bytes: Option<u64>,
    /// Bytes of message bodies held in the engine's cache of recent bodies.
    pub cache_bytes: Option<u64>,
    /// Deliveries whose body was in the cache.
    pub cache_hits: Option<u64>,
    /// Deliveries whose body was read from the log.
    pub cache_misses: Option<u64>,
}

/// Below this many free bytes on its filesystem an engine that writes files is not ready
/// (`/readyz`): a send would soon fail for want of space.
pub const MIN_FREE_BYTES: u64 = 64 << 20;

/// The operator's role of a store (see the module docs).
#[async_trait]
pub trait Admin: Send + Sync {
    /// Figures and settings of every queue, subscription queues included, sorted by name.
    /// Cheap enough to call once a second with many thousands of queues.
    async fn queue_details(&self) -> Result<Vec<QueueDetails>, StoreError>;

    /// Changes a queue's maximum delivery count, dead-letter and expiry queues (a user queue
    /// or a subscription's queue). The new settings apply from now on: a delivery that comes
    /// back later is counted against the new maximum; messages already moved stay where they
    /// are. `QueueNotFound` (the queue, or a named target); `InvalidArgument` when a target is
    /// the queue itself or the change would make the dead-letter and expiry queues form a
    /// cycle.
    async fn set_queue_options(&self, name: &str, options: &QueueOptions)
        -> Result<(), StoreError>;

    /// Removes every ready and delayed message of a queue (in-flight deliveries stay and are
    /// settled as usual). Returns how many went. `QueueNotFound`.
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError>;

    /// A page of a queue's or a sender's ready messages, in order, changing nothing: no lease,
    /// no delivery count, no reordering. Messages addressed to any client are shown. At most
    /// [`BROWSE_BUDGET`] entries are examined per call. `QueueNotFound`, `ClientNotFound` (an
    /// unknown sender).
    async fn browse(&self, spec: &BrowseSpec) -> Result<BrowsePage, StoreError>;

    /// Removes one ready (or delayed) message from a queue. `QueueNotFound`;
    /// [`StoreError::MessageNotFound`] when it is neither ready nor delayed there.
    async fn delete_message(&self, queue: &str, id: MessageId) -> Result<(), StoreError>;

    /// Moves ready messages of queue `from` (the ones in `ids`, or up to `limit` from the head
    /// in time order when `ids` is `None`) to `target`, each in one atomic step: the message
    /// keeps its id, body and properties (a dead letter keeps its history), its delivery count
    /// starts again at 0. Messages not ready on `from`, or whose target does not exist, are
    /// skipped with a reason. `QueueNotFound` for `from` or a named target queue.
    async fn move_messages(
        &self,
        from: &str,
        target: &MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<MoveReport, StoreError>;

    /// Every registered client, sorted by name, with the node of its live session.
    async fn list_clients(&self) -> Result<Vec<ClientRecord>, StoreError>;

    /// Forgets the registration of offline client `name` at once, as expiry would once its
    /// time comes (see [`crate::Upkeep::expire_clients`]). `ClientNotFound`; `AlreadyOnline`
    /// while a session holds the name (on any node); `InvalidArgument` while stored messages
    /// were sent by it or are addressed to it, or it owns a durable subscription.
    async fn forget_client(&self, name: &str) -> Result<(), StoreError>;

    /// The engine's figures (cheap; no I/O).
    fn engine_stats(&self) -> EngineStats;

    /// Whether the store accepts writes now (readiness): not poisoned, not out of disk
    /// ([`MIN_FREE_BYTES`]), the database answers.
    async fn check_ready(&self) -> Result<(), StoreError>;
}

/// Whether giving queue `name` the dead-letter and expiry queues of `options` would close a
/// cycle, given `targets(q)`, the targets queue `q` has now: the first of `options`' targets
/// that leads back to `name`, if any.
pub fn forms_cycle(
    name: &str,
    options: &QueueOptions,
    targets: impl Fn(&str) -> Vec<String>,
) -> Option<String> {
    let direct = [&options.dead_letter_queue, &options.expiry_queue]
        .into_iter()
        .flatten();
    for first in direct {
        let mut stack = vec![first.clone()];
        let mut seen: Vec<String> = Vec::new();
        while let Some(q) = stack.pop() {
            if q == name {
                return Some(first.clone());
            }
            if seen.contains(&q) {
                continue;
            }
            stack.extend(targets(&q));
            seen.push(q);
        }
    }
    None
}

/// The queue a dead letter or expired copy came from (its `ferry_original_queue` property).
pub fn origin_of(message: &Message) -> Option<&str> {
    message.properties.iter().find_map(|(n, v)| match v {
        ferry_protocol::PropertyValue::Str(s) if n == crate::dead_letter::ORIGINAL_QUEUE => {
            Some(s.as_str())
        }
        _ => None,
    })
}
