//! Opening a log: replay every segment in order, validate, and repair a torn tail.
//!
//! - The oldest segment's header gives the metadata snapshot (next id, queues, clients) that
//!   replay starts from; its records and those of every later segment are applied in order.
//! - A record that is incomplete or fails its CRC in the **last** segment is what a crash in the
//!   middle of a write leaves: the file is truncated there on purpose (with a warning). Nothing
//!   acknowledged can be lost by that under `fsync = always`, because an acknowledged record
//!   was synced, and the sync covered everything before it.
//! - The same damage in any **other** segment cannot come from a crash (a segment is synced
//!   when it is sealed), so it is corruption: the store refuses to open rather than silently
//!   drop acknowledged messages.
//! - A record whose CRC matches but whose content makes no sense (unknown kind, bad field) is
//!   a bug or a newer format: the store refuses to open, whichever segment it is in.
//! - A last segment whose header is torn was being created at the crash: it holds nothing
//!   acknowledged and is removed.
//! - A transaction is one `Group` record whose CRC covers all of its records: torn, it is cut
//!   like any torn record and none of it is applied; intact, all of it is.
//! - Non-durable subscriptions are replayed like the others, then dropped (with their messages)
//!   once the store is open: the sessions that owned them ended with the previous run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::backend::Backend;
use super::format::header::{self, HeaderError};
use super::format::record::{self, Frame};
use super::state::journal::Journal;
use super::state::State;
use super::writer::Head;
use super::{parse_segment_name, segment_path};
use crate::error::StoreError;

fn io_error(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("{what} {}: {e}", path.display()))
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!(
        "corrupt log segment {}: {why}; refusing to open (restore the data directory from a \
         backup, or move the segment away to accept losing what it holds)",
        path.display()
    ))
}

/// Replays the log in `seg_dir` and opens its active segment for appending, creating the
/// first segment of a new store.
pub fn recover(
    backend: &Arc<dyn Backend>,
    seg_dir: &Path,
    segment_bytes: u64,
) -> Result<(State, Head), StoreError> {
    backend
        .create_dir_all(seg_dir)
        .map_err(|e| io_error("creating", seg_dir, e))?;
    let names = backend
        .list(seg_dir)
        .map_err(|e| io_error("listing", seg_dir, e))?;
    let mut numbers: Vec<u64> = names
        .iter()
        .filter_map(|n| {
            let parsed = parse_segment_name(n);
            if parsed.is_none() {
                tracing::warn!(file = %n, "ignoring a file that is not a log segment");
            }
            parsed
        })
        .collect();
    numbers.sort_unstable();

    let mut state = State::new(Journal::new(segment_bytes, 1, 0, 0));
    let mut head: Option<(u64, u64, u64, Option<u64>)> = None; // segment, len, header len, cut
    let mut first = true;
    let count = numbers.len();
    for (i, &n) in numbers.iter().enumerate() {
        let last = i + 1 == count;
        let path = segment_path(seg_dir, n);
        let bytes = backend
            .read(&path)
            .map_err(|e| io_error("reading", &path, e))?;
        let (h, header_len) = match header::decode(&bytes) {
            Ok(x) => x,
            Err(HeaderError::Torn(why)) if last => {
                tracing::warn!(segment = %path.display(), reason = %why,
                    "removing a last segment whose header was torn by a crash");
                backend
                    .remove(&path)
                    .map_err(|e| io_error("removing", &path, e))?;
                backend
                    .sync_dir(seg_dir)
                    .map_err(|e| io_error("syncing", seg_dir, e))?;
                break;
            }
            Err(e) => return Err(corrupt(&path, e)),
        };
        if h.segment != n {
            return Err(corrupt(&path, format!("header says segment {}", h.segment)));
        }
        if first {
            state.apply_snapshot(&h);
            first = false;
        } else {
            state.next_id = state.next_id.max(h.next_id);
        }
        state.journal.record(n, header_len as u64);
        let mut pos = header_len;
        let mut cut = None;
        loop {
            match record::next_frame(bytes.get(pos..).unwrap_or_default()) {
                Frame::End => break,
                Frame::Record {
                    kind,
                    payload,
                    size,
                } => {
                    let rec = record::decode(kind, payload).map_err(|e| {
                        corrupt(
                            &path,
                            format!("intact record at offset {pos} is invalid: {e}"),
                        )
                    })?;
                    state.replay(rec, n, size as u32);
                    pos += size;
                }
                Frame::Torn(why) if last => {
                    tracing::warn!(segment = %path.display(), offset = pos,
                        dropped_bytes = bytes.len() - pos, reason = why,
                        "truncating the torn or corrupt tail of the last segment");
                    cut = Some(pos as u64);
                    break;
                }
                Frame::Torn(why) => {
                    return Err(corrupt(&path, format!("{why} at offset {pos}")));
                }
            }
        }
        head = Some((n, pos as u64, header_len as u64, cut));
    }

    let head = match head {
        Some((n, len, header_len, cut)) => {
            let path = segment_path(seg_dir, n);
            let mut file = backend
                .open_append(&path)
                .map_err(|e| io_error("opening", &path, e))?;
            if let Some(len) = cut {
                file.truncate(len)
                    .and_then(|()| file.sync())
                    .map_err(|e| io_error("truncating", &path, e))?;
            }
            state.journal.set_head(n, len, header_len);
            Head {
                file,
                segment: n,
                len,
            }
        }
        None => {
            // A new store, or one whose only segment was torn while being created.
            let n = numbers.first().copied().unwrap_or(1).max(1);
            let path: PathBuf = segment_path(seg_dir, n);
            let header = state.header(n);
            let mut file = backend
                .create(&path)
                .map_err(|e| io_error("creating", &path, e))?;
            file.append(&header)
                .and_then(|()| file.sync())
                .and_then(|()| backend.sync_dir(seg_dir))
                .map_err(|e| io_error("writing", &path, e))?;
            let len = header.len() as u64;
            state.journal.record(n, len);
            state.journal.set_head(n, len, len);
            Head {
                file,
                segment: n,
                len,
            }
        }
    };
    Ok((state, head))
}
