//! Where records go in the log, and how much of each segment is still live.
//!
//! The journal decides when the active segment is full (and rolls to a new one with a fresh
//! metadata snapshot), and keeps per segment its size, the bytes of its `MessageAdded` records
//! whose message is still stored, and the ids of the messages added there. Every other record
//! is dead as soon as it is written: its effect lives on in the state, the next segment headers
//! and the current `MessageAdded` records; compaction only ever deletes a *prefix* of the log,
//! so a removal record is never dropped while the add it cancels survives (see
//! [`compaction`](super::super::compaction)).

use std::collections::BTreeMap;

use ferry_protocol::MessageId;

use super::super::format::record;
use super::super::writer::{segment_capacity, LogGuard};
use super::ClientKey;

/// Accounting of one segment.
#[derive(Debug, Default, Clone)]
pub struct SegmentStats {
    /// Bytes in the file (header included).
    pub total: u64,
    /// Bytes of its header: dead, but rewriting the segment would not save them (every
    /// segment has one).
    pub header: u64,
    /// Bytes of `MessageAdded` records whose message still lives from this record, and of
    /// `ClientRegistered` records of registrations still current.
    pub live: u64,
    /// Ids of the messages added here (some may have died or moved since).
    pub ids: IdRuns,
    /// Keys of the clients registered here (some may have been forgotten or moved since).
    pub clients: Vec<ClientKey>,
}

/// Message ids in the order they were added, as runs of consecutive ids: the messages of a
/// segment mostly have consecutive ids, so a segment of a million messages costs a few runs
/// instead of a million ids.
#[derive(Debug, Default, Clone)]
pub struct IdRuns(Vec<(MessageId, u32)>);

impl IdRuns {
    /// Adds `id` after the others.
    pub fn push(&mut self, id: MessageId) {
        match self.0.last_mut() {
            Some((start, n)) if *n < u32::MAX && start.checked_add(u64::from(*n)) == Some(id) => {
                *n += 1
            }
            _ => self.0.push((id, 1)),
        }
    }

    /// The ids, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.0
            .iter()
            .flat_map(|&(start, n)| (0..u64::from(n)).map(move |i| start + i))
    }
}

impl SegmentStats {
    /// Bytes of its records that nothing needs any more.
    pub fn dead(&self) -> u64 {
        self.total
            .saturating_sub(self.header)
            .saturating_sub(self.live)
    }
}

/// The log's shape as the state sees it (it runs ahead of the writer by the pending batch).
#[derive(Debug)]
pub struct Journal {
    /// The active segment.
    pub head: u64,
    head_len: u64,
    head_header_len: u64,
    segment_bytes: u64,
    /// The next record opens a new segment, even if it would fit.
    roll_next: bool,
    /// Every segment on disk or about to be, oldest first.
    pub segments: BTreeMap<u64, SegmentStats>,
    /// Offset in its segment of the record [`Journal::append`] appended last.
    pub last_offset: u64,
}

impl Journal {
    /// A journal whose active segment is `head`, `head_len` bytes long, with a header of
    /// `header_len` bytes.
    pub fn new(segment_bytes: u64, head: u64, head_len: u64, header_len: u64) -> Self {
        Journal {
            head,
            head_len,
            head_header_len: header_len,
            segment_bytes,
            roll_next: false,
            segments: BTreeMap::new(),
            last_offset: 0,
        }
    }

    /// Appends one record: `encode` writes it into the log buffer and returns its size. If the
    /// active segment would grow past its limit (and holds at least one record, so a record
    /// larger than a segment still goes somewhere), the record opens a new segment whose
    /// header `header(n)` builds. The record's CRC is then masked with its segment's mask.
    /// Returns the segment the record is in and its size.
    pub fn append(
        &mut self,
        log: &mut LogGuard<'_>,
        encode: impl FnOnce(&mut Vec<u8>) -> u32,
        header: impl FnOnce(u64) -> Vec<u8>,
    ) -> (u64, u32) {
        let buf = log.buf();
        let start = buf.len();
        let size = encode(buf);
        let grow = u64::from(size);
        let capacity = segment_capacity(self.segment_bytes, self.head_header_len);
        let full =
            self.head_len > self.head_header_len && self.head_len.saturating_add(grow) > capacity;
        if full || self.roll_next {
            let next = self.head + 1;
            let header = header(next);
            let header_len = header.len() as u64;
            log.roll_at(start, next, header);
            self.head = next;
            self.head_len = header_len;
            self.head_header_len = header_len;
            self.roll_next = false;
            self.segments.insert(
                next,
                SegmentStats {
                    total: header_len,
                    header: header_len,
                    ..SegmentStats::default()
                },
            );
        }
        // Only now is the record's segment known: mask its CRC with it.
        if let Some(frame) = log.buf().get_mut(start..) {
            record::mask_crc(frame, record::segment_mask(self.head));
        }
        self.last_offset = self.head_len;
        self.head_len += grow;
        self.record(self.head, grow);
        (self.head, size)
    }

    /// Counts a record of `size` bytes in `segment` (also used by recovery).
    pub fn record(&mut self, segment: u64, size: u64) {
        self.segments.entry(segment).or_default().total += size;
    }

    /// Counts a live `MessageAdded` record.
    pub fn add_live(&mut self, segment: u64, id: MessageId, size: u32) {
        let s = self.segments.entry(segment).or_default();
        s.live += u64::from(size);
        s.ids.push(id);
    }

    /// Counts a live `ClientRegistered` record (or a client of a version 1 or 2 header).
    pub fn add_live_client(&mut self, segment: u64, key: ClientKey, size: u32) {
        let s = self.segments.entry(segment).or_default();
        s.live += u64::from(size);
        s.clients.push(key);
    }

    /// Counts the header of `segment` (recovery).
    pub fn header(&mut self, segment: u64, size: u64) {
        let s = self.segments.entry(segment).or_default();
        s.total += size;
        s.header += size;
    }

    /// `bytes` of `segment`'s header are live data (the clients of a version 1 or 2 header).
    pub fn header_holds_live(&mut self, segment: u64, bytes: u64) {
        if let Some(s) = self.segments.get_mut(&segment) {
            s.header = s.header.saturating_sub(bytes);
        }
    }

    /// Bytes the active segment holds at most.
    pub fn head_capacity(&self) -> u64 {
        segment_capacity(self.segment_bytes, self.head_header_len)
    }

    /// Bytes the active segment still has room for.
    pub fn room(&self) -> u64 {
        segment_capacity(self.segment_bytes, self.head_header_len).saturating_sub(self.head_len)
    }

    /// Makes the next record open a new segment (the active one could not be given its disk
    /// space ahead, see [`crate::embedded::backend::BackendFile::allocate`]).
    pub fn roll_before_next(&mut self) {
        self.roll_next = true;
    }

    /// A `MessageAdded` or `ClientRegistered` record died (its message is gone or was
    /// rewritten elsewhere, its registration ended or was rewritten).
    pub fn drop_live(&mut self, segment: u64, size: u32) {
        if let Some(s) = self.segments.get_mut(&segment) {
            s.live = s.live.saturating_sub(u64::from(size));
        }
    }

    /// Sets the active segment after recovery.
    pub fn set_head(&mut self, head: u64, len: u64, header_len: u64) {
        self.head = head;
        self.head_len = len;
        self.head_header_len = header_len;
    }

    /// The configured segment size.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_runs_keep_every_id_in_order_in_few_runs() {
        let mut runs = IdRuns::default();
        let ids: Vec<MessageId> = (10..1_000)
            .chain([5, 6, 2_000, 7])
            .chain(2_001..2_010)
            .collect();
        for &id in &ids {
            runs.push(id);
        }
        assert_eq!(runs.iter().collect::<Vec<_>>(), ids);
        // 10..1000, 5..7, 2000, 7, 2001..2010.
        assert_eq!(runs.0.len(), 5, "{runs:?}");
    }
}
