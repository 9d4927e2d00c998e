//! Compaction (`maintain()`): reclaim the disk space of dead records.
//!
//! **The rule: only the oldest segment is ever deleted** (compaction removes a prefix of the
//! log). Why this is sound: replay starts from the oldest surviving segment's header, whose
//! metadata snapshot (next id, queues, clients) summarises every metadata record before it.
//! The only records whose loss could change the replayed state are
//! - `MessageAdded` records of messages still stored: before the oldest segment is deleted,
//!   each of them is re-appended at the head with the message's *current* state (remaining
//!   queues, delivery counts), which replay lets replace any earlier state of that id;
//! - removal and delivery records, which matter only while the `MessageAdded` they refer to
//!   survives. That add is always *older* than them (log order is state order), so when their
//!   segment is the oldest one, the add's segment is gone already or is this very segment.
//!
//! - `SubscriptionDeleted` and `TopicDeleted` records, which remove the messages still on the
//!   subscription queues at replay (no removal record per message): like removals, they are
//!   newer than the adds they cancel.
//!
//! Non-persistent messages have no record, are never in a segment's list of live messages, and
//! so are never rewritten. A transaction's `Group` record counts like the records it holds:
//! the adds inside it are live bytes of its segment, and are rewritten as plain `MessageAdded`
//! records.
//!
//! Deleting a segment in the middle would break the second point: a `MessageRemoved` in a
//! deleted segment could resurrect a message whose add lives in an older surviving segment.
//!
//! Before a segment is deleted, everything appended so far (the rewrites, and the removal
//! records that made the segment's messages dead) is forced to disk: otherwise a crash right
//! after the deletion could lose a message whose ack was never acknowledged.
//!
//! A deleted segment's file is kept as a spare for the writer to reuse while the pool has room
//! (see [`spares`](super::spares)).
//!
//! Registrations (`ClientRegistered` records of clients still registered) are live data like
//! stored messages: rewritten at the head before their segment goes. Replay does not depend on
//! where they are: a message names its sender and receiver itself.
//!
//! Policy, from the oldest sealed segment on, within a budget of bytes rewritten per call:
//! - no live bytes: delete it;
//! - at most half of its records live: rewrite its live records, then delete it;
//! - otherwise rewrite it anyway if the sealed log holds more dead than live bytes by more
//!   than two segments, which bounds disk use to about twice the live data even when an old,
//!   mostly live segment (a backlog nobody reads) sits in front of dead ones.
//!
//! Segment headers count as neither dead nor live: every segment has one. Each rewrite deletes
//! more dead record bytes than it writes, so on an idle store compaction comes to rest and
//! writes nothing more.

use std::sync::Arc;

use super::backend::Backend;
use super::store::EmbeddedStore;
use super::{segment_path, spare_path};

use crate::error::StoreError;

/// What to do with the oldest sealed segment.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Delete(u64),
    Rewrite(u64),
}

impl EmbeddedStore {
    /// Runs compaction steps until nothing is worth doing or the budget is spent.
    pub(super) async fn compact(&self) -> Result<(), StoreError> {
        let store = self;
        let _running = store.maintaining.lock().await;
        let mut budget = store.segment_bytes.saturating_mul(2);
        loop {
            store.writable().await?;
            let step = {
                let st = store.state();
                // On a full disk, rewrites go into the space reserve: only those that fit.
                let room = store.is_full().then(|| st.journal.room());
                next_step(&st.journal, room)
            };
            let Some(step) = step else {
                return Ok(());
            };
            // A rewrite copies the bodies of the live messages from the segment's file, read
            // here without the lock. The segment is sealed, and only compaction (this task,
            // alone) retires segments, so it is still there, unchanged, once locked again.
            let image = match step {
                Step::Rewrite(n) => Some(read_segment(store, n).await?),
                Step::Delete(_) => None,
            };
            let (segment, rewritten, ticket) = {
                let mut st = store.state();
                let mut log = store.log.lock();
                let (segment, rewritten) = match (step, &image) {
                    (Step::Rewrite(n), Some(image)) => (n, st.rewrite_segment(&mut log, n, image)?),
                    (Step::Rewrite(n) | Step::Delete(n), _) => (n, 0),
                };
                log.force_sync();
                (segment, rewritten, log.ticket())
            };
            ticket.wait().await?;
            retire_segment(store, segment).await?;
            store.state().journal.segments.remove(&segment);
            store
                .figures
                .compactions
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(segment, rewritten, "compacted log segment");
            budget = budget.saturating_sub(rewritten.max(1));
            if budget == 0 {
                return Ok(());
            }
        }
    }
}

/// The content of sealed segment `n`.
async fn read_segment(store: &EmbeddedStore, n: u64) -> Result<Vec<u8>, StoreError> {
    let backend: Arc<dyn Backend> = store.backend.clone();
    let path = segment_path(store.spares.dir(), n);
    tokio::task::spawn_blocking(move || backend.read(&path))
        .await
        .map_err(|e| StoreError::Internal(format!("compaction task failed: {e}")))?
        .map_err(|e| StoreError::Unavailable(format!("compaction: reading segment {n}: {e}")))
}

/// Retires a segment file, durably: renamed to a spare while the pool has room (the writer
/// will reuse it), deleted otherwise.
async fn retire_segment(store: &EmbeddedStore, segment: u64) -> Result<(), StoreError> {
    let backend: Arc<dyn Backend> = store.backend.clone();
    let spares = store.spares.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let dir = spares.dir();
        let path = segment_path(dir, segment);
        let kept = spares.has_room()
            && match backend.rename(&path, &spare_path(dir, segment)) {
                Ok(()) => true,
                Err(e) => {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(segment, error = %e,
                            "could not keep a compacted segment as a spare; deleting it");
                    }
                    false
                }
            };
        if !kept {
            match backend.remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err((false, format!("removing {}: {e}", path.display()))),
            }
        }
        backend
            .sync_dir(dir)
            .map_err(|e| (true, format!("fsync of directory {}: {e}", dir.display())))?;
        // Only a durable rename makes a spare: a crash must never find a reused file under
        // the name of the segment it used to be.
        if kept {
            spares.add(segment);
        }
        Ok(())
    })
    .await
    .map_err(|e| StoreError::Internal(format!("compaction task failed: {e}")))?;
    match outcome {
        Ok(()) => Ok(()),
        Err((fatal, why)) => {
            if fatal {
                // Whether the deletion is durable is unknown; see the writer on poisoning.
                store.log.poison(why.clone());
            }
            Err(StoreError::Unavailable(why))
        }
    }
}

/// Picks the next step for the oldest sealed segment; a rewrite only if it fits in `room`
/// when that is given (a full disk).
fn next_step(journal: &super::state::journal::Journal, room: Option<u64>) -> Option<Step> {
    let (&oldest, stats) = journal.segments.first_key_value()?;
    if oldest >= journal.head {
        return None;
    }
    if stats.live == 0 {
        return Some(Step::Delete(oldest));
    }
    if room.is_some_and(|room| stats.live > room / 2) {
        return None;
    }
    // Headers do not count: the rewritten records land in a segment that has one too, so a
    // segment whose dead bytes are mostly its header is not worth rewriting (with a large
    // header, rewriting it would only move its live records into ever new segments).
    if stats.live.saturating_mul(2) <= stats.total.saturating_sub(stats.header) {
        return Some(Step::Rewrite(oldest));
    }
    let (dead, live) = journal
        .segments
        .range(..journal.head)
        .fold((0u64, 0u64), |(d, l), (_, s)| (d + s.dead(), l + s.live));
    if dead > live.saturating_add(journal.segment_bytes().saturating_mul(2)) {
        return Some(Step::Rewrite(oldest));
    }
    None
}
