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
//! - at most half of its records live: rewrite its live records, then delete it; but not
//!   the newest sealed segment, unless the disk is full: it holds the messages sent last,
//!   which consumers that keep up take moments later (reading the file back to copy them into
//!   the head would be wasted). Once the next segment is sealed it is usually dead, and
//!   deleted without a copy;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
            let (step, span) = {
                let st = store.state();
                // On a full disk, rewrites go into the space reserve: only those that fit.
                let room = store.is_full().then(|| st.journal.room());
                let step = next_step(&st.journal, room);
                let span = match step {
                    Some(Step::Rewrite(n)) => st.live_span(n),
                    _ => None,
                };
                (step, span)
            };
            let Some(step) = step else {
                return Ok(());
            };
            // A rewrite copies the bodies of the live messages from the segment's file: only
            // the part that holds them (nothing if only registrations are live: those are in
            // memory), read here without the lock. The segment is sealed, and only compaction
            // (this task, alone) retires segments; messages only ever move out of it (to the
            // head), so that part is still there, unchanged, once locked again, and messages
            // that died or moved meanwhile are skipped.
            let image = match (step, span) {
                (Step::Rewrite(n), Some(span)) => Some((read_span(store, n, span).await?, span.0)),
                (Step::Rewrite(_), None) => Some((Vec::new(), 0)),
                (Step::Delete(_), _) => None,
            };
            let (segment, rewritten, ticket) = {
                let mut st = store.state();
                let mut log = store.log.lock();
                let (segment, rewritten) = match (step, &image) {
                    (Step::Rewrite(n), Some((image, base))) => {
                        (n, st.rewrite_segment(&mut log, n, image, *base)?)
                    }
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

/// The bytes `start..end` of sealed segment `n`.
async fn read_span(
    store: &EmbeddedStore,
    n: u64,
    (start, end): (u64, u64),
) -> Result<Vec<u8>, StoreError> {
    let backend: Arc<dyn Backend> = store.backend.clone();
    let path = segment_path(store.spares.dir(), n);
    let len = usize::try_from(end - start)
        .map_err(|_| StoreError::Internal(format!("compaction: segment {n} too large to read")))?;
    tokio::task::spawn_blocking(move || backend.read_at(&path, start, len))
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
    // The newest sealed segment holds the messages sent last, which consumers that keep up
    // take moments later: rewriting it would read the file back and copy those messages into
    // the head just before they die. It waits until the next segment is sealed (by then it is
    // usually dead and deleted without a copy), unless the disk is full.
    if room.is_none() && oldest.saturating_add(1) == journal.head {
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

#[cfg(test)]
mod tests {
    use ferry_protocol::{AckMode, ReceiveMode};

    use super::super::engine_tests::{bodies, message, open, spec};
    use super::super::state::journal::{Journal, SegmentStats};
    use super::super::FaultyBackend;
    use super::*;
    use crate::api::Store;

    /// A journal whose active segment is `head`, with sealed segments of 1,000 bytes (a
    /// 100-byte header) holding `live` live bytes each.
    fn journal(head: u64, live: &[(u64, u64)]) -> Journal {
        let mut j = Journal::new(1000, head, 100, 100);
        for &(n, live) in live {
            let stats = SegmentStats {
                total: 1000,
                header: 100,
                live,
                ..SegmentStats::default()
            };
            j.segments.insert(n, stats);
        }
        j.segments.insert(head, SegmentStats::default());
        j
    }

    #[test]
    fn the_newest_sealed_segment_is_left_to_the_consumers_until_the_next_one_is_sealed() {
        // Mostly dead, but sealed last: its live messages are the ones sent last.
        assert_eq!(next_step(&journal(2, &[(1, 50)]), None), None);
        // Once another segment is sealed after it, it is rewritten.
        assert_eq!(
            next_step(&journal(3, &[(1, 50), (2, 900)]), None),
            Some(Step::Rewrite(1))
        );
        // Dead, it is deleted at once: nothing to copy.
        assert_eq!(
            next_step(&journal(2, &[(1, 0)]), None),
            Some(Step::Delete(1))
        );
    }

    #[test]
    fn on_a_full_disk_the_newest_sealed_segment_is_rewritten_at_once() {
        assert_eq!(
            next_step(&journal(2, &[(1, 50)]), Some(1000)),
            Some(Step::Rewrite(1))
        );
        // Only a rewrite that fits in the room left.
        assert_eq!(next_step(&journal(2, &[(1, 50)]), Some(60)), None);
    }

    #[test]
    fn an_older_segment_is_rewritten_when_at_most_half_live_or_the_log_mostly_dead() {
        // More than half live, and the sealed log not mostly dead: left alone.
        assert_eq!(next_step(&journal(3, &[(1, 600), (2, 900)]), None), None);
        let mut sealed: Vec<(u64, u64)> = vec![(1, 600)];
        sealed.extend((2..=6).map(|n| (n, 0)));
        // 600 live against 300 + 5 * 900 dead bytes: more than two segments' worth.
        assert_eq!(
            next_step(&journal(7, &sealed), None),
            Some(Step::Rewrite(1))
        );
    }

    #[tokio::test]
    async fn the_last_messages_of_a_sealed_segment_are_left_to_a_consumer_that_keeps_up() {
        let disk = FaultyBackend::new();
        let store = open(&disk, 4096).await;
        store.sessions().register_client("c").await.unwrap();
        store.queues().create_queue("q").await.unwrap();
        let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
        let head = || *store.segments().last().unwrap();
        let (mut sent, mut taken) = (0, 0);
        let send = async |i: usize| {
            let m = message(&["q"], None, &format!("message {i:04}"), "x");
            store.queues().send(m).await.unwrap();
        };
        // A consumer two messages behind, until a few segments are sealed.
        let first = head();
        while head() < first + 3 {
            send(sent).await;
            sent += 1;
            while sent - taken > 2 {
                taken += store.queues().receive(&take, 1).await.unwrap().len();
            }
        }
        let sealed = head() - 1;
        {
            let st = store.state();
            let s = &st.journal.segments[&sealed];
            assert!(
                s.live > 0 && s.live * 2 <= s.total - s.header,
                "the newest sealed segment holds a few live messages: {s:?}"
            );
        }
        for _ in 0..3 {
            store.upkeep().maintain().await.unwrap();
        }
        assert_eq!(
            store.segments().first(),
            Some(&sealed),
            "the dead segments are deleted, the newest sealed one is not rewritten"
        );
        // Once the next segment is sealed, its live messages are rewritten.
        while head() == sealed + 1 {
            send(sent).await;
            sent += 1;
        }
        store.upkeep().maintain().await.unwrap();
        assert!(
            !store.segments().contains(&sealed),
            "{:?}",
            store.segments()
        );
        let expected: Vec<String> = (taken..sent).map(|i| format!("message {i:04}")).collect();
        assert_eq!(bodies(&store, "q").await, expected);
    }
}
