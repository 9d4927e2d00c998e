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
use super::super::writer::LogGuard;

/// Accounting of one segment.
#[derive(Debug, Default, Clone)]
pub struct SegmentStats {
    /// Bytes in the file (header included).
    pub total: u64,
    /// Bytes of `MessageAdded` records whose message still lives from this record.
    pub live: u64,
    /// Ids of the messages added here (some may have died or moved since).
    pub ids: Vec<MessageId>,
}

/// The log's shape as the state sees it (it runs ahead of the writer by the pending batch).
#[derive(Debug)]
pub struct Journal {
    /// The active segment.
    pub head: u64,
    head_len: u64,
    head_header_len: u64,
    segment_bytes: u64,
    /// Every segment on disk or about to be, oldest first.
    pub segments: BTreeMap<u64, SegmentStats>,
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
            segments: BTreeMap::new(),
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
        if self.head_len > self.head_header_len
            && self.head_len.saturating_add(grow) > self.segment_bytes
        {
            let next = self.head + 1;
            let header = header(next);
            let header_len = header.len() as u64;
            log.roll_at(start, next, header);
            self.head = next;
            self.head_len = header_len;
            self.head_header_len = header_len;
            self.segments.insert(
                next,
                SegmentStats {
                    total: header_len,
                    ..SegmentStats::default()
                },
            );
        }
        // Only now is the record's segment known: mask its CRC with it.
        if let Some(frame) = log.buf().get_mut(start..) {
            record::mask_crc(frame, record::segment_mask(self.head));
        }
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

    /// A `MessageAdded` record died (its message is gone or was rewritten elsewhere).
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
