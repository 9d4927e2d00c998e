//! The writer task: drains everything queued into one buffer and writes it with one
//! `write_all`; sends queued back to back become one request (see [`super::coalesce`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferry_protocol::HEADER_LEN;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::coalesce::SendRun;
use super::{CloseReason, Out, Shared};

/// Stop draining the channel into one write past this many bytes.
const MAX_WRITE_BATCH: usize = 256 * 1024;

pub(super) async fn write_loop(
    shared: Arc<Shared>,
    mut wr: super::WriteSide,
    mut rx: mpsc::UnboundedReceiver<Out>,
) {
    let mut batch = BytesMut::new();
    let mut sends = SendRun::default();
    // Encodes the gathered sends behind what is already queued for this write.
    let flush = |lone: &mut Option<Bytes>, sends: &mut SendRun, batch: &mut BytesMut| {
        if !sends.is_empty() {
            if let Some(l) = lone.take() {
                batch.extend_from_slice(&l);
            }
            shared.flush_sends(sends, batch);
        }
    };
    // The last write carried more than one item: several callers are sending at once.
    let mut busy = false;
    while let Some(first) = rx.recv().await {
        if busy {
            // Let the tasks that are ready run first (callers about to queue more requests):
            // the next write then carries more of them, with fewer system calls. This waits
            // for no timer, and a lone caller (every write carries one item) never pays it.
            tokio::task::yield_now().await;
        }
        let mut items = 0usize;
        // Take everything queued: one write for the lot. A lone frame is written as it is,
        // without a copy. Sends queued back to back become one request.
        let max_count = shared.batch_limit.load(Ordering::Relaxed) as usize;
        let room =
            (shared.send_limit.load(Ordering::Relaxed) as usize).saturating_sub(HEADER_LEN + 4);
        let mut lone: Option<Bytes> = None;
        let mut closing = false;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            items += 1;
            match item {
                Out::Close => {
                    closing = true;
                    break;
                }
                Out::Send(s) => {
                    if !sends.fits(s.len, max_count, room) {
                        flush(&mut lone, &mut sends, &mut batch);
                    }
                    sends.push(s);
                }
                Out::Frame(f) => {
                    flush(&mut lone, &mut sends, &mut batch);
                    if lone.is_none() && batch.is_empty() {
                        lone = Some(f);
                    } else {
                        if let Some(l) = lone.take() {
                            batch.extend_from_slice(&l);
                        }
                        batch.extend_from_slice(&f);
                    }
                }
            }
            if batch.len() >= MAX_WRITE_BATCH {
                break;
            }
            next = rx.try_recv().ok();
        }
        flush(&mut lone, &mut sends, &mut batch);
        busy = items > 1;
        shared.wrote.store(true, Ordering::Relaxed);
        let result = match lone {
            Some(frame) => wr.write_all(&frame).await,
            None if batch.is_empty() => Ok(()),
            None => {
                let r = wr.write_all(&batch).await;
                batch.clear();
                r
            }
        };
        // TLS keeps what it could not write yet in its buffer until flushed (a no-op on TCP).
        let result = match result {
            Ok(()) => wr.flush().await,
            e => e,
        };
        if let Err(e) = result {
            tracing::debug!("write failed: {e}");
            shared.shutdown(CloseReason::Closed, false);
            return;
        }
        if closing {
            let _ = wr.shutdown().await;
            return;
        }
    }
}
