//! The on-disk format of the embedded log, drawn byte by byte in `docs/storage-format.md`.
//!
//! - [`codec`]: little-endian field writers and a checked reader that never panics;
//! - [`header`]: the segment header with its metadata snapshot;
//! - [`record`]: record framing (length, CRC-32C, kind) and every record kind;
//! - [`subscription`]: a subscription's definition, in its record and in segment headers.
//!
//! The format is deliberately independent of the wire protocol's codec: the wire may evolve
//! with protocol versions, while bytes on disk must stay readable under their format version.

pub mod codec;
pub mod header;
pub mod record;
pub mod subscription;

/// Version of the segment format written by this code. Bumped on any incompatible change.
///
/// Version 2 masks each record's CRC with its segment's number ([`record::segment_mask`]), so
/// that a segment file can be reused: stale records of the file's previous life can never pass
/// as records of the new segment.
///
/// Version 3 takes the client registry out of the segment header (its client count is always
/// 0): a registration lives in its `ClientRegistered` record, which counts as live data of its
/// segment (compaction rewrites it like a stored message) until a `ClientForgotten` record ends
/// it. So a header no longer grows with the number of clients.
pub const FORMAT_VERSION: u16 = 3;

/// The oldest segment format version this code still reads. Version 1 records carry a plain
/// CRC (mask 0); a store written in version 1 continues in a new segment of the current
/// version. The clients of an older header are registrations of that segment (see
/// [`FORMAT_VERSION`]): compaction rewrites them as records before it deletes the segment.
pub const MIN_FORMAT_VERSION: u16 = 1;

/// Why bytes read from disk could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The bytes end before the field does.
    #[error("truncated: {0}")]
    Truncated(&'static str),
    /// A field holds a value outside its domain.
    #[error("invalid {field}: {value}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A string is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    Utf8(&'static str),
    /// Bytes left after the last field of a record.
    #[error("{0} trailing bytes after the last field")]
    Trailing(usize),
}
