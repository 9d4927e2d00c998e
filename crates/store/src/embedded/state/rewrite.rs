//! Compaction's part in the state: re-appending what is still live in a segment about to be
//! retired. The bodies come from the segment's file, read by the caller without the lock: they
//! are copied from record to record, never loaded into the state.

use std::sync::Arc;

use super::super::bodies::{body_in, properties_in};
use super::super::format::record::{self};
use super::super::writer::LogGuard;

use super::*;

impl State {
    /// The offsets `start..end` of segment `segment` that hold the `MessageAdded` records of
    /// its live messages (the only part of the file a rewrite reads), if it holds any.
    pub fn live_span(&self, segment: u64) -> Option<(u64, u64)> {
        let s = self.journal.segments.get(&segment)?;
        s.ids
            .iter()
            .filter_map(|id| self.messages.get(id).filter(|e| e.segment() == segment))
            .map(|e| {
                let start = e.place.offset();
                (start, start + u64::from(e.place.size))
            })
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    }

    /// Re-appends every live message whose current `MessageAdded` record is in `segment`, with
    /// its current queues and delivery counts, and every registration whose `ClientRegistered`
    /// record is there, so that the segment holds nothing live. `image` is the part of the
    /// segment file from offset `base` that holds its live records ([`State::live_span`];
    /// sealed, it no longer changes). Returns the bytes rewritten; an error, before anything
    /// is appended, when a live record in the image is not what the state says it is.
    pub fn rewrite_segment(
        &mut self,
        log: &mut LogGuard<'_>,
        segment: u64,
        image: &[u8],
        base: u64,
    ) -> Result<u64, StoreError> {
        // Every body first, so that a bad image changes nothing.
        let mut bodies: IdMap<MessageId, Bytes> = IdMap::default();
        // And the properties that are in the log only.
        let mut logged: IdMap<MessageId, Properties> = IdMap::default();
        if let Some(s) = self.journal.segments.get(&segment) {
            for id in s.ids.iter() {
                let Some(e) = self.messages.get(id).filter(|e| e.segment() == segment) else {
                    continue;
                };
                let offset = e.place.offset();
                let frame = offset
                    .checked_sub(base)
                    .and_then(|at| usize::try_from(at).ok())
                    .and_then(|at| image.get(at..)?.get(..e.place.size as usize))
                    .unwrap_or_default();
                let broken = |why| {
                    StoreError::Internal(format!(
                        "compaction: the record of message {id} in segment {segment} at offset \
                         {offset}: {why}"
                    ))
                };
                let body = body_in(frame, id, segment)
                    .map(Bytes::copy_from_slice)
                    .map_err(broken)?;
                if e.msg.properties_logged() {
                    logged.insert(id, properties_in(frame, id, segment).map_err(broken)?);
                }
                bodies.insert(id, body);
            }
        }
        let mut bytes = self.rewrite_registrations(log, segment);
        let ids = self
            .journal
            .segments
            .get_mut(&segment)
            .map(|s| std::mem::take(&mut s.ids))
            .unwrap_or_default();
        for id in ids.iter() {
            let Some(e) = self.messages.get(id) else {
                continue;
            };
            if e.segment() != segment {
                continue;
            }
            let Some(body) = bodies.get(&id).cloned() else {
                continue;
            };
            let msg = e.msg;
            let slots: Vec<(Arc<str>, u32)> = e
                .slots
                .iter()
                .filter_map(|s| Some((self.queues.get(&s.queue)?.name.clone(), s.count)))
                .collect();
            let (old_segment, old_size) = (e.segment(), e.place.size);
            static NONE: Properties = Properties::new();
            let properties = match logged.get(&id) {
                Some(p) => p,
                None => self.properties.get(&id).unwrap_or(&NONE),
            };
            let fields = record_fields(&self.clients, properties, id, &msg, &body);
            // Never inside a transaction group: compaction runs on its own.
            let (seg, size) = self.journal.append(
                log,
                |b| record::encode_message_added(b, &fields, slots.iter().map(|(q, c)| (&**q, *c))),
                snapshot(self.next_id, &self.queue_keys, &self.queues, &self.topics),
            );
            self.journal.drop_live(old_segment, old_size);
            let offset = self.journal.last_offset;
            self.journal.add_live(seg, id, size);
            if let Some(e) = self.messages.get_mut(id) {
                e.place = Place::new(seg, offset, size);
            }
            bytes += u64::from(size);
        }
        Ok(bytes)
    }
}
