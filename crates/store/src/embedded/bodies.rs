//! Reading a message's body back from the log.
//!
//! A persistent message's body (with its properties) lives only in its `MessageAdded` record;
//! the state keeps where that record is ([`Location`]). A delivery whose body is not in the
//! cache of recent messages (see `state::cache`) reads the record with one positional read
//! through the [`Backend`], without the state lock, and checks it before trusting it: intact
//! (its CRC, masked with its segment's mask, or plain inside a transaction's group) and the
//! `MessageAdded` of the right message. A record that fails the check was moved meanwhile
//! (compaction rewrote it and reused its file): the caller looks the location up again and
//! retries.
//!
//! Draining a backlog reads the log from one end to the other. Reads that follow each other
//! through a segment ask the backend to read ahead of them ([`READ_AHEAD`] bytes, asked for
//! again when half of it is used), so the disk keeps reading while the consumer waits for its
//! batch's removals to be synced and handles its messages, and the next batch's reads find the
//! page cache filled. A read elsewhere (another queue, a selector's pick) asks for nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ferry_protocol::{MessageId, Properties};

use super::backend::Backend;
use super::format::record::{self, Scan};
use super::segment_path;

/// Where a message's current `MessageAdded` record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Segment number.
    pub segment: u64,
    /// Offset of the record's frame in the segment file.
    pub offset: u64,
    /// Bytes of the record, frame included.
    pub size: u32,
}

/// Why a body could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The read itself failed (I/O error, file gone or shorter).
    Io(std::io::Error),
    /// The bytes there are not this message's record (moved by compaction, or corrupt).
    Mismatch(&'static str),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Mismatch(why) => f.write_str(why),
        }
    }
}

/// Reads message bodies from the segments of one store.
#[derive(Debug, Clone)]
pub struct BodyReader {
    backend: Arc<dyn Backend>,
    dir: PathBuf,
    /// The run of reads going through the log, shared by the reader's clones.
    run: Arc<Mutex<Run>>,
}

/// The last read, and how far ahead of it reading was asked for.
#[derive(Debug, Default)]
struct Run {
    /// Segment of the last read.
    segment: u64,
    /// Where the last read ended.
    end: u64,
    /// Where the read ahead asked for in this segment ends (0: none).
    ahead: u64,
}

/// Bytes read ahead of a run of reads through a segment.
pub const READ_AHEAD: u64 = 16 * 1024 * 1024;

impl Run {
    /// Notes a read of `start..end` of `segment`; returns the part to read ahead, if any: when
    /// the read follows the previous one (in the same segment, at most a read ahead past its
    /// end and not before it; or near the start of the next segment) and what was asked for
    /// before is half used.
    fn read(&mut self, segment: u64, start: u64, end: u64) -> Option<(u64, u64)> {
        // `end` is 0 before the first read: nothing to follow.
        let follows = self.end > 0
            && if segment == self.segment {
                start >= self.end && start <= self.end + READ_AHEAD
            } else {
                // The run goes on at the start of the next segment.
                segment == self.segment + 1 && start <= READ_AHEAD
            };
        if segment != self.segment {
            self.ahead = 0;
        }
        self.segment = segment;
        self.end = end;
        if !follows {
            self.ahead = 0;
            return None;
        }
        if self.ahead >= end + READ_AHEAD / 2 {
            return None;
        }
        let from = self.ahead.max(end);
        self.ahead = end + READ_AHEAD;
        Some((from, self.ahead - from))
    }
}

impl BodyReader {
    /// A reader of the segments in `dir`.
    pub fn new(backend: Arc<dyn Backend>, dir: &Path) -> Self {
        BodyReader {
            backend,
            dir: dir.to_owned(),
            run: Arc::default(),
        }
    }

    /// The body of message `id` from its record at `at`. Blocks: call it from a blocking
    /// thread (or on a rare path, such as an operator's browse).
    pub fn read(&self, id: MessageId, at: Location) -> Result<Bytes, ReadError> {
        self.read_with(id, at, body_of)
    }

    /// The properties of message `id` from its record at `at` (blocks, as [`BodyReader::read`]).
    pub fn read_properties(&self, id: MessageId, at: Location) -> Result<Properties, ReadError> {
        self.read_with(id, at, properties_of)
    }

    /// What `extract` takes from the record of message `id` at `at`.
    fn read_with<T>(
        &self,
        id: MessageId,
        at: Location,
        extract: impl Fn(&Bytes, MessageId, u64) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        let frame = self
            .backend
            .read_at(
                &segment_path(&self.dir, at.segment),
                at.offset,
                at.size as usize,
            )
            .map_err(ReadError::Io)?;
        let frame = Bytes::from(frame);
        extract(&frame, id, at.segment)
    }
}

/// Records this close together are read with one read (the bytes between them read and
/// dropped): a backlog's records lie back to back, so draining it reads the log sequentially in
/// large reads instead of one small read per message.
const COALESCE_GAP: u64 = 64 * 1024;

/// Largest span read at once.
const MAX_SPAN: u64 = 4 * 1024 * 1024;

impl BodyReader {
    /// What `extract` takes (a body, properties) from the records of several messages, each
    /// `(id, place)`, in the order given; neighbouring records of one segment are read together.
    pub fn read_many_with<T>(
        &self,
        wanted: &[(MessageId, Option<Location>)],
        extract: impl Fn(&Bytes, MessageId, u64) -> Result<T, ReadError>,
    ) -> Vec<Result<T, ReadError>> {
        let mut out: Vec<Option<Result<T, ReadError>>> = wanted.iter().map(|_| None).collect();
        // By place, so that neighbours are next to each other.
        let mut order: Vec<(usize, MessageId, Location)> = wanted
            .iter()
            .enumerate()
            .filter_map(|(i, (id, at))| Some((i, *id, (*at)?)))
            .collect();
        order.sort_unstable_by_key(|(_, _, at)| (at.segment, at.offset));
        let mut rest = order.as_slice();
        while let Some(((_, _, first), _)) = rest.split_first() {
            let (segment, start) = (first.segment, first.offset);
            let mut end = start + u64::from(first.size);
            let mut n = 1;
            for (_, _, at) in rest.iter().skip(1) {
                let next_end = at.offset + u64::from(at.size);
                if at.segment != segment
                    || at.offset > end + COALESCE_GAP
                    || next_end - start > MAX_SPAN
                {
                    break;
                }
                end = end.max(next_end);
                n += 1;
            }
            let (group, after) = rest.split_at(n);
            rest = after;
            // The bodies are handed out as slices of the span (no copy): deliveries are
            // encoded and dropped, so the span lives as long as the receive.
            let span = self
                .backend
                .read_at(
                    &segment_path(&self.dir, segment),
                    start,
                    (end - start) as usize,
                )
                .map(Bytes::from);
            self.note_read(segment, start, end);
            for (i, id, at) in group {
                let got = match &span {
                    Ok(bytes) => {
                        let from = (at.offset - start) as usize;
                        let to = (from + at.size as usize).min(bytes.len()).max(from);
                        let frame = if from <= bytes.len() {
                            bytes.slice(from..to)
                        } else {
                            Bytes::new()
                        };
                        extract(&frame, *id, segment)
                    }
                    // One failed read fails the span: each is tried again on its own.
                    Err(_) => self.read_with(*id, *at, &extract),
                };
                if let Some(slot) = out.get_mut(*i) {
                    *slot = Some(got);
                }
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or(Err(ReadError::Mismatch("the message has no record"))))
            .collect()
    }
}

impl BodyReader {
    /// Notes a read of `start..end` of `segment`, asking for a read ahead when it continues a
    /// run (see [`Run::read`]).
    fn note_read(&self, segment: u64, start: u64, end: u64) {
        let ahead = match self.run.lock() {
            Ok(mut run) => run.read(segment, start, end),
            Err(_) => None,
        };
        if let Some((from, len)) = ahead {
            self.backend
                .read_ahead(&segment_path(&self.dir, segment), from, len);
        }
    }
}

/// The body in `frame`, which must be the intact `MessageAdded` record of `id` written in
/// `segment` (its CRC masked with the segment's mask, or plain: a record inside a group). The
/// body is a slice of `frame`, not a copy.
pub fn body_of(frame: &Bytes, id: MessageId, segment: u64) -> Result<Bytes, ReadError> {
    body_in(frame, id, segment).map(|body| frame.slice_ref(body))
}

/// The properties in `frame`, which must be the intact `MessageAdded` record of `id` written in
/// `segment` (see [`body_of`]).
pub fn properties_of(frame: &Bytes, id: MessageId, segment: u64) -> Result<Properties, ReadError> {
    properties_in(frame, id, segment)
}

/// [`properties_of`], from a borrowed frame.
pub fn properties_in(frame: &[u8], id: MessageId, segment: u64) -> Result<Properties, ReadError> {
    let payload = added_payload(frame, segment)?;
    match record::decode_skipping_bodies(record::kind::MESSAGE_ADDED, payload) {
        Ok(record::Record::MessageAdded(a)) if a.id == id => Ok(a.properties),
        Ok(_) => Err(ReadError::Mismatch("the record there is another message's")),
        Err(_) => Err(ReadError::Mismatch("the record there does not decode")),
    }
}

/// The payload of the `MessageAdded` record in `frame` (see [`body_of`]).
fn added_payload(frame: &[u8], segment: u64) -> Result<&[u8], ReadError> {
    let scanned = match record::next_frame(frame, record::segment_mask(segment)) {
        Scan::Record { kind, payload, .. } => Some((kind, payload)),
        _ => match record::next_frame(frame, 0) {
            Scan::Record { kind, payload, .. } => Some((kind, payload)),
            _ => None,
        },
    };
    let Some((kind, payload)) = scanned else {
        return Err(ReadError::Mismatch(
            "no intact record at the message's place",
        ));
    };
    if kind != record::kind::MESSAGE_ADDED {
        return Err(ReadError::Mismatch("the record there is not a message"));
    }
    Ok(payload)
}

/// [`body_of`], borrowed from `frame`.
pub fn body_in(frame: &[u8], id: MessageId, segment: u64) -> Result<&[u8], ReadError> {
    let payload = added_payload(frame, segment)?;
    match record::added_body(payload) {
        Ok((found, body)) if found == id => Ok(body),
        Ok(_) => Err(ReadError::Mismatch("the record there is another message's")),
        Err(_) => Err(ReadError::Mismatch("the record there does not decode")),
    }
}
