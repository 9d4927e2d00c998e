//! Compaction's part in the state: re-appending what is still live in a segment about to be
//! retired.

use std::sync::Arc;

use super::super::format::record::{self};
use super::super::writer::LogGuard;

use super::*;

impl State {
    /// Re-appends every live message whose current `MessageAdded` record is in `segment`, with
    /// its current queues and delivery counts, and every registration whose `ClientRegistered`
    /// record is there, so that the segment holds nothing live. Returns the bytes rewritten.
    pub fn rewrite_segment(&mut self, log: &mut LogGuard<'_>, segment: u64) -> u64 {
        let mut bytes = self.rewrite_registrations(log, segment);
        let ids = self
            .journal
            .segments
            .get_mut(&segment)
            .map(|s| std::mem::take(&mut s.ids))
            .unwrap_or_default();
        for id in ids {
            let Some(e) = self.messages.get(&id) else {
                continue;
            };
            if e.segment != segment {
                continue;
            }
            let msg = e.msg.clone();
            let slots: Vec<(Arc<str>, u32)> = e
                .slots
                .iter()
                .filter_map(|s| Some((self.queues.get(&s.queue)?.name.clone(), s.count)))
                .collect();
            let (old_segment, old_size) = (e.segment, e.size);
            // Never inside a transaction group: compaction runs on its own.
            let (seg, size) = self.journal.append(
                log,
                |b| {
                    record::encode_message_added(
                        b,
                        &msg.fields(),
                        slots.iter().map(|(q, c)| (&**q, *c)),
                    )
                },
                snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
            );
            self.journal.drop_live(old_segment, old_size);
            self.journal.add_live(seg, id, size);
            if let Some(e) = self.messages.get_mut(&id) {
                e.segment = seg;
                e.size = size;
            }
            bytes += u64::from(size);
        }
        bytes
    }
}
