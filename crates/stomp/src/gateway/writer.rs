//! A connection's way out: one task writes what the session's outbound queue holds (MESSAGE
//! frames the broker's subscriptions encoded, the connection's receipts and replies,
//! heart-beats), in order, and gives up when the peer takes nothing for the write timeout.
//!
//! The queue is the broker session's own ([`Pushes`]): its bytes count against the session's
//! outbound budget until they are written, so a client that stops reading holds up its
//! subscriptions (they stop taking) and its connection (no more frames are read) instead of
//! growing memory. Auto-ack deliveries are settled right before they are handed here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferry_broker::local::{LocalSession, Pushes};
use tokio::time::Instant;

use super::wire::FrameSink;
use crate::codec::HEARTBEAT;

/// When the writer last wrote, in ms since `start`.
pub struct LastWrite {
    start: Instant,
    ms: AtomicU64,
}

impl LastWrite {
    /// Now.
    pub fn new() -> Arc<LastWrite> {
        Arc::new(LastWrite {
            start: Instant::now(),
            ms: AtomicU64::new(0),
        })
    }

    fn mark(&self) {
        self.ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn since(&self) -> Duration {
        let at = Duration::from_millis(self.ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(at)
    }
}

/// Writes the session's frames to `sink` until the session ends; gives the sink back (for a
/// last frame: the receipt of a DISCONNECT, an ERROR).
pub async fn run<W: FrameSink>(
    mut sink: W,
    mut pushes: Pushes,
    write_timeout: Duration,
    last: Arc<LastWrite>,
) -> W {
    let mut frames: Vec<Bytes> = Vec::new();
    while let Some(n) = pushes.next(&mut frames).await {
        let written = tokio::time::timeout(write_timeout, sink.write(&frames)).await;
        frames.clear();
        pushes.written(n);
        match written {
            Ok(Ok(())) => last.mark(),
            Ok(Err(e)) => {
                pushes.fail(format!("write failed: {e}"), false);
                break;
            }
            Err(_) => {
                pushes.fail(
                    format!(
                        "the client took nothing for {} ms",
                        write_timeout.as_millis()
                    ),
                    true,
                );
                break;
            }
        }
    }
    sink
}

/// Sends a heart-beat whenever nothing went out for `every`, until the session ends.
pub async fn heartbeats(session: Arc<LocalSession>, every: Duration, last: Arc<LastWrite>) {
    let closing = session.closing();
    loop {
        let wait = every
            .saturating_sub(last.since())
            .max(Duration::from_millis(10));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = closing.cancelled() => return,
        }
        // Frames waiting to be written will do as a heart-beat.
        if last.since() >= every
            && session.queued_bytes() == 0
            && !session.send_frames(Bytes::from_static(HEARTBEAT))
        {
            return;
        }
    }
}
