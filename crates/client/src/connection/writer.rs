//! The writer task: drains everything queued and writes it with one vectored write (small
//! frames gathered into one buffer, large ones from their own); sends queued back to back
//! become one request (see [`super::coalesce`]).

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use ferry_protocol::HEADER_LEN;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::coalesce::SendRun;
use super::{CloseReason, Out, Shared};

/// Stop draining the channel into one write past this many bytes.
const MAX_WRITE_BATCH: usize = 256 * 1024;

/// A frame (or part) smaller than this is copied into the write's buffer; a larger one is
/// written from its own memory, one slice of a vectored write (copying it would cost more
/// than the slice).
const COPY_BELOW: usize = 4 * 1024;

/// The most slices one vectored write is given.
const MAX_IOVECS: usize = 64;

pub(super) async fn write_loop(
    shared: Arc<Shared>,
    mut wr: super::WriteSide,
    mut rx: mpsc::UnboundedReceiver<Out>,
) {
    let mut small = BytesMut::new();
    let mut chunks: VecDeque<Bytes> = VecDeque::new();
    let mut sends = SendRun::default();
    // Encodes the gathered sends behind what is already queued for this write.
    let flush = |sends: &mut SendRun, small: &mut BytesMut| {
        if !sends.is_empty() {
            shared.flush_sends(sends, small);
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
        // Take everything queued: one write for the lot. Large frames are written from their
        // own buffers, small ones gathered. Sends queued back to back become one request.
        let max_count = shared.batch_limit.load(Ordering::Relaxed) as usize;
        let room =
            (shared.send_limit.load(Ordering::Relaxed) as usize).saturating_sub(HEADER_LEN + 4);
        let mut queued = 0usize;
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
                        flush(&mut sends, &mut small);
                    }
                    queued += s.len;
                    sends.push(s);
                }
                Out::Frame(f) => {
                    flush(&mut sends, &mut small);
                    queued += gather(&mut small, &mut chunks, f);
                }
                Out::Split(head, tail) => {
                    flush(&mut sends, &mut small);
                    queued += gather(&mut small, &mut chunks, head);
                    queued += gather(&mut small, &mut chunks, tail);
                }
            }
            if queued >= MAX_WRITE_BATCH {
                break;
            }
            next = rx.try_recv().ok();
        }
        flush(&mut sends, &mut small);
        if !small.is_empty() {
            chunks.push_back(small.split().freeze());
        }
        busy = items > 1;
        shared.wrote.store(true, Ordering::Relaxed);
        let result = write_chunks(&mut wr, &mut chunks).await;
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

/// Queues `frame` for the next write: copied into `small` when it is small, as a chunk of its
/// own otherwise (after what `small` holds, to keep the order). Returns its length.
fn gather(small: &mut BytesMut, chunks: &mut VecDeque<Bytes>, frame: Bytes) -> usize {
    let len = frame.len();
    if len < COPY_BELOW {
        small.extend_from_slice(&frame);
    } else {
        if !small.is_empty() {
            chunks.push_back(small.split().freeze());
        }
        chunks.push_back(frame);
    }
    len
}

/// Writes every chunk, in order, with as few system calls as the socket allows.
async fn write_chunks(
    wr: &mut super::WriteSide,
    chunks: &mut VecDeque<Bytes>,
) -> std::io::Result<()> {
    while !chunks.is_empty() {
        let written = {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let mut n = 0;
            for (slot, chunk) in iov.iter_mut().zip(chunks.iter()) {
                *slot = IoSlice::new(chunk);
                n += 1;
            }
            wr.write_vectored(iov.get(..n).unwrap_or_default()).await?
        };
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Drop what was written: whole chunks, then the front of a partly written one.
        let mut left = written;
        while left > 0 {
            let Some(front) = chunks.front_mut() else {
                break;
            };
            if front.len() <= left {
                left -= front.len();
                chunks.pop_front();
            } else {
                front.advance(left);
                left = 0;
            }
        }
    }
    Ok(())
}
