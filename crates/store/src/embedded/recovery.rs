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
//! - A last segment whose header is torn, or names another segment, was being created at the
//!   crash (a reused spare file still has its old header until the new one is written): it
//!   holds nothing acknowledged and is removed.
//! - Records are checked against their segment's CRC mask (none in format version 1), so the
//!   old records a reused file may hold past the real end read as a torn tail. A store whose
//!   last segment is of version 1 continues in a new segment of the current version.
//! - Spare files (`<n>.spare`) are handed to the pool, up to its limit; the rest are removed.
//! - A transaction is one `Group` record whose CRC covers all of its records: torn, it is cut
//!   like any torn record and none of it is applied; intact, all of it is.
//! - Non-durable subscriptions are replayed like the others, then dropped (with their messages)
//!   once the store is open: the sessions that owned them ended with the previous run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::backend::Backend;
use super::format::header::{self, HeaderError};
use super::format::record::{self, Scan};
use super::format::FORMAT_VERSION;
use super::space::RESERVE_FILE;
use super::state::journal::Journal;
use super::state::State;
use super::writer::Head;
use super::{parse_segment_name, parse_spare_name, segment_path, spare_path};
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

/// What recovery found and opened.
pub struct Recovered {
    /// The replayed state.
    pub state: State,
    /// The active segment, open for appending.
    pub head: Head,
    /// The spare files kept (their former segment numbers).
    pub spares: Vec<u64>,
}

/// How often a long recovery logs its progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Replays the log in `seg_dir` and opens its active segment for appending, creating the
/// first segment of a new store. Keeps up to `spare_limit` spare files, and up to
/// `properties_bytes` of persistent messages' properties in memory.
pub fn recover(
    backend: &Arc<dyn Backend>,
    seg_dir: &Path,
    segment_bytes: u64,
    spare_limit: usize,
    properties_bytes: u64,
) -> Result<Recovered, StoreError> {
    backend
        .create_dir_all(seg_dir)
        .map_err(|e| io_error("creating", seg_dir, e))?;
    let names = backend
        .list(seg_dir)
        .map_err(|e| io_error("listing", seg_dir, e))?;
    let mut numbers = Vec::new();
    let mut spares = Vec::new();
    for name in &names {
        if let Some(n) = parse_segment_name(name) {
            numbers.push(n);
        } else if let Some(n) = parse_spare_name(name) {
            spares.push(n);
        } else if name == RESERVE_FILE {
            // The space reserve: `Space` takes it over.
        } else {
            tracing::warn!(file = %name, "ignoring a file that is not a log segment");
        }
    }
    numbers.sort_unstable();
    let spares = keep_spares(backend, seg_dir, spares, spare_limit)?;

    let mut state = State::new(Journal::new(segment_bytes, 1, 0, 0));
    // The properties budget applies as messages are replayed.
    state.set_properties_budget(properties_bytes);
    // Segments are read one ahead, on a thread of their own, while the previous one is
    // replayed: the reads of a cold log overlap with the replay's work.
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<Vec<u8>>>(1);
    let paths: Vec<PathBuf> = numbers.iter().map(|&n| segment_path(seg_dir, n)).collect();
    let reading = backend.clone();
    let reader = std::thread::Builder::new()
        .name("ferry-recovery-read".into())
        .spawn(move || {
            for path in paths {
                // Stops when replay no longer listens (it failed, or ended early).
                if tx.send(reading.read(&path)).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| StoreError::Internal(format!("starting the recovery reader: {e}")))?;
    let replayed = replay_segments(backend, seg_dir, &numbers, &rx, &mut state);
    // Whatever happened, the reader is told to stop, and waited for.
    drop(rx);
    if reader.join().is_err() {
        return Err(StoreError::Internal("the recovery reader panicked".into()));
    }
    let head = replayed?;

    let head = match head {
        Some((n, len, header_len, cut, version)) => {
            let path = segment_path(seg_dir, n);
            let mut file = backend
                .open_append(&path)
                .map_err(|e| io_error("opening", &path, e))?;
            if let Some(len) = cut {
                file.truncate(len)
                    .and_then(|()| file.sync())
                    .map_err(|e| io_error("truncating", &path, e))?;
            }
            if version < FORMAT_VERSION {
                // Its records have unmasked CRCs: seal it (synced, like any sealed segment)
                // and append the new records to a new segment.
                tracing::info!(
                    segment = n,
                    version,
                    "continuing a log of an older format version in a new segment"
                );
                file.sync().map_err(|e| io_error("syncing", &path, e))?;
                drop(file);
                start_segment(backend, seg_dir, &mut state, n + 1)?
            } else {
                state.journal.set_head(n, len, header_len);
                Head {
                    file,
                    segment: n,
                    len,
                }
            }
        }
        None => {
            // A new store, or one whose only segment was torn while being created.
            let n = numbers.first().copied().unwrap_or(1).max(1);
            start_segment(backend, seg_dir, &mut state, n)?
        }
    };
    // Names that only messages since removed brought in hold nothing.
    state.forget_unheld();
    Ok(Recovered {
        state,
        head,
        spares,
    })
}

/// The end of the log that replay found: the last segment, its length, its header's length,
/// where a torn tail was cut, and its format version.
type LogEnd = (u64, u64, u64, Option<u64>, u16);

/// Replays segments `numbers` into `state`, in order, their contents read ahead by another
/// thread and received from `rx`; returns the end of the log (`None`: no segment to go on
/// with).
fn replay_segments(
    backend: &Arc<dyn Backend>,
    seg_dir: &Path,
    numbers: &[u64],
    rx: &std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    state: &mut State,
) -> Result<Option<LogEnd>, StoreError> {
    // segment, len, header len, cut, format version
    let mut head: Option<LogEnd> = None;
    let mut first = true;
    let count = numbers.len();
    // A long recovery says how far it got, every few seconds.
    let started = std::time::Instant::now();
    let mut reported = started;
    for (i, &n) in numbers.iter().enumerate() {
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = std::time::Instant::now();
            tracing::info!(
                segment = i + 1,
                segments = count,
                messages = state.message_count(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "recovering the log"
            );
        }
        let last = i + 1 == count;
        let path = segment_path(seg_dir, n);
        let bytes = rx
            .recv()
            .map_err(|_| StoreError::Internal("the recovery reader stopped".into()))?
            .map_err(|e| io_error("reading", &path, e))?;
        let being_created = match header::decode(&bytes) {
            Ok((h, header_len)) if h.segment == n => Ok((h, header_len)),
            Ok((h, _)) if last => Err(format!(
                "the header is still the one of segment {} (a reused file)",
                h.segment
            )),
            Ok((h, _)) => return Err(corrupt(&path, format!("header says segment {}", h.segment))),
            Err(HeaderError::Torn(why)) if last => Err(why),
            Err(e) => return Err(corrupt(&path, e)),
        };
        let (h, header_len) = match being_created {
            Ok(x) => x,
            Err(why) => {
                tracing::warn!(segment = %path.display(), reason = %why,
                    "removing a last segment whose header a crash left unwritten");
                remove_durably(backend, seg_dir, &[path])?;
                break;
            }
        };
        let mask = if h.version >= 2 {
            record::segment_mask(n)
        } else {
            0
        };
        state.journal.header(n, header_len as u64);
        if first {
            state.apply_snapshot(&h);
            first = false;
        } else {
            state.next_id = state.next_id.max(h.next_id);
        }
        let mut pos = header_len;
        let mut cut = None;
        loop {
            match record::next_frame(bytes.get(pos..).unwrap_or_default(), mask) {
                Scan::End => break,
                Scan::Record {
                    kind,
                    payload,
                    size,
                } => {
                    // The state keeps where each body is, not the body: none is copied.
                    let rec = record::decode_skipping_bodies(kind, payload).map_err(|e| {
                        corrupt(
                            &path,
                            format!("intact record at offset {pos} is invalid: {e}"),
                        )
                    })?;
                    state.replay(rec, n, pos as u64, size as u32);
                    pos += size;
                }
                Scan::Torn(why) if last => {
                    tracing::warn!(segment = %path.display(), offset = pos,
                        dropped_bytes = bytes.len() - pos, reason = why,
                        "truncating the torn or corrupt tail of the last segment");
                    cut = Some(pos as u64);
                    break;
                }
                Scan::Torn(why) => {
                    return Err(corrupt(&path, format!("{why} at offset {pos}")));
                }
            }
        }
        head = Some((n, pos as u64, header_len as u64, cut, h.version));
    }
    Ok(head)
}

/// Creates segment `n` with a header of the current state and makes it the active one.
fn start_segment(
    backend: &Arc<dyn Backend>,
    seg_dir: &Path,
    state: &mut State,
    n: u64,
) -> Result<Head, StoreError> {
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
    state.journal.header(n, len);
    state.journal.set_head(n, len, len);
    Ok(Head {
        file,
        segment: n,
        len,
    })
}

/// Keeps up to `limit` of the spare files found, removing the others.
fn keep_spares(
    backend: &Arc<dyn Backend>,
    seg_dir: &Path,
    mut found: Vec<u64>,
    limit: usize,
) -> Result<Vec<u64>, StoreError> {
    found.sort_unstable();
    if found.len() <= limit {
        return Ok(found);
    }
    let extra: Vec<PathBuf> = found
        .get(limit..)
        .unwrap_or_default()
        .iter()
        .map(|&n| spare_path(seg_dir, n))
        .collect();
    remove_durably(backend, seg_dir, &extra)?;
    found.truncate(limit);
    Ok(found)
}

/// Removes files of `seg_dir` and makes their removal durable.
fn remove_durably(
    backend: &Arc<dyn Backend>,
    seg_dir: &Path,
    paths: &[PathBuf],
) -> Result<(), StoreError> {
    for path in paths {
        backend
            .remove(path)
            .map_err(|e| io_error("removing", path, e))?;
    }
    backend
        .sync_dir(seg_dir)
        .map_err(|e| io_error("syncing", seg_dir, e))
}
