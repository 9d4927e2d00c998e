//! Background writeback of the active segment for the `never` and `interval` fsync policies.
//!
//! Under those policies the writer syncs seldom: when it seals a segment, at each interval, and
//! when compaction asks for a sync. Meanwhile the segment's written pages pile up in the page
//! cache, and each of those syncs had to write them all while the writer, and every request
//! behind it, waited: under a heavy load, sealing a 64 MiB segment took 30-40 ms. The flusher
//! syncs the active segment from a thread of its own each time [`FLUSH_EVERY_BYTES`] more have
//! been written, so the writer's own syncs find little left to write.
//!
//! It makes nothing durable that a sync would not have made durable, and nothing waits for it.
//! Its failures are only logged: the writer's next sync meets the same error (Linux reports a
//! writeback error to every open description of the file, so the flusher's seeing it first
//! hides it from nobody), and the writer's sync failure is what poisons the store.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::backend::{Backend, Syncer};
use super::segment_path;

/// Bytes written between two background syncs.
pub const FLUSH_EVERY_BYTES: u64 = 4 * 1024 * 1024;

/// The writer's side: counts what it writes and hands the flusher thread a sync to do.
pub struct Flusher {
    requests: Option<SyncSender<(u64, PathBuf)>>,
    thread: Option<JoinHandle<()>>,
    /// Bytes written since the last request.
    unflushed: u64,
}

impl Flusher {
    /// Starts the flusher thread.
    pub fn spawn(backend: Arc<dyn Backend>) -> io::Result<Flusher> {
        // Room for one request: while a sync runs, one more may wait; further ones are
        // dropped (that sync covers their bytes too).
        let (tx, rx) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("ferry-log-flush".into())
            .spawn(move || run(backend.as_ref(), rx))?;
        Ok(Flusher {
            requests: Some(tx),
            thread: Some(thread),
            unflushed: 0,
        })
    }

    /// Notes `bytes` written to segment `segment` (in `seg_dir`); asks for a background sync
    /// of it once [`FLUSH_EVERY_BYTES`] have been written since the last request.
    pub fn written(&mut self, seg_dir: &Path, segment: u64, bytes: u64) {
        self.unflushed = self.unflushed.saturating_add(bytes);
        if self.unflushed < FLUSH_EVERY_BYTES {
            return;
        }
        let Some(tx) = &self.requests else {
            return;
        };
        match tx.try_send((segment, segment_path(seg_dir, segment))) {
            Ok(()) | Err(TrySendError::Full(_)) => self.unflushed = 0,
            Err(TrySendError::Disconnected(_)) => self.requests = None,
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Closing the channel ends the thread once its current sync is done.
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The flusher thread: syncs each requested segment, keeping the last one's handle open.
fn run(backend: &dyn Backend, requests: Receiver<(u64, PathBuf)>) {
    let mut open: Option<(u64, Syncer)> = None;
    while let Ok((segment, path)) = requests.recv() {
        if open.as_ref().map(|(n, _)| *n) != Some(segment) {
            open = None;
            match backend.open_syncer(&path) {
                Ok(syncer) => open = Some((segment, syncer)),
                Err(e) => {
                    tracing::debug!(error = %e, segment, "background writeback: cannot open the segment");
                    continue;
                }
            }
        }
        if let Some((_, sync)) = open.as_mut() {
            if let Err(e) = sync() {
                tracing::debug!(error = %e, segment, "background writeback failed; the writer's next sync will tell");
            }
        }
    }
}
