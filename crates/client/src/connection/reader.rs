//! The reader task: cuts every complete frame of each read at once, decodes pushes in place
//! and hands the rest to the routing; when the connection ends it shuts the connection down.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use ferry_protocol::{frames_in, split_frames};
use tokio::io::AsyncReadExt;

use super::{CloseReason, Shared};
use crate::pushes::{decode_push, PushBatches};

/// Room the reader makes in its buffer before a read.
const READ_CHUNK: usize = 256 * 1024;

/// Makes room for a read of at least `READ_CHUNK / 4` bytes behind the unread tail of `buf`.
///
/// It asks for a buffer of `READ_CHUNK` bytes in all rather than for `READ_CHUNK` more: then,
/// once the frames cut from the buffer are gone, `bytes` reuses its allocation by moving the
/// unread tail (less than a frame) to the front. Asking for more than the allocation holds
/// grows it by a reallocation that copies every byte read into it so far, consumed or not:
/// at a million deliveries a second, that copy was several percent of the reader's time.
fn make_room(buf: &mut BytesMut) {
    buf.reserve(READ_CHUNK.saturating_sub(buf.len()).max(READ_CHUNK / 4));
}

pub(super) async fn read_loop(shared: Arc<Shared>, mut rd: super::ReadSide) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut pushes = PushBatches::default();
    let reason = 'conn: loop {
        // Every complete frame of what was read, cut at once; pushes are decoded in place.
        let (run, cut) = split_frames(&mut buf, shared.recv_limit.load(Ordering::Relaxed));
        for frame in frames_in(&run) {
            let behind = run.len() - frame.payload.end + buf.len();
            match decode_push(&run, &frame, &mut pushes, behind) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => break 'conn CloseReason::Protocol(e),
            }
            // Any other frame may concern a subscription (its reply, its end): the deliveries
            // pushed before it are handed over first.
            if !pushes.is_empty() {
                shared.route_pushes(&mut pushes);
            }
            if let Err(reason) = shared.dispatch(frame.to_raw(&run)) {
                break 'conn reason;
            }
        }
        // A bad frame length behind the complete frames ends the connection after them.
        if let Err(e) = cut {
            break 'conn CloseReason::Protocol(e);
        }
        if !pushes.is_empty() {
            shared.route_pushes(&mut pushes);
        }
        // Big reads: a subscription's pushes arrive in batches of hundreds of KiB, and each
        // read is a system call.
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            make_room(&mut buf);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break CloseReason::Closed,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!("read failed: {e}");
                break CloseReason::Closed;
            }
        }
    };
    // What arrived before the end is still delivered, ahead of the end itself.
    if !pushes.is_empty() {
        shared.route_pushes(&mut pushes);
    }
    match &reason {
        CloseReason::Protocol(e) => tracing::warn!("closing connection: broker sent {e}"),
        CloseReason::Server(e) => tracing::debug!("broker closed the connection: {e}"),
        CloseReason::Closed => tracing::debug!("connection closed"),
    }
    shared.shutdown(reason, false);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A buffer as the reader leaves it: filled to `READ_CHUNK - 100`, every frame but a
    /// 50-byte tail cut off. Returns the buffer and the cut frames.
    fn nearly_full() -> (BytesMut, BytesMut) {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        buf.extend((0..READ_CHUNK - 100).map(|i| i as u8));
        let cut = buf.split_to(READ_CHUNK - 150);
        (buf, cut)
    }

    #[test]
    fn making_room_once_the_frames_are_gone_reuses_the_buffer_without_growing_it() {
        let (mut buf, cut) = nearly_full();
        let tail = buf.to_vec();
        drop(cut);
        make_room(&mut buf);
        assert_eq!(&buf[..], &tail[..], "the unread tail is kept");
        assert!(buf.capacity() - buf.len() >= READ_CHUNK / 4);
        // Growing would have doubled the allocation, copying all it had read.
        assert_eq!(buf.capacity(), READ_CHUNK);
    }

    #[test]
    fn making_room_while_frames_are_alive_keeps_the_tail_and_them() {
        let (mut buf, cut) = nearly_full();
        let tail = buf.to_vec();
        make_room(&mut buf);
        assert_eq!(&buf[..], &tail[..]);
        assert!(buf.capacity() - buf.len() >= READ_CHUNK / 4);
        assert!(buf.capacity() <= READ_CHUNK);
        assert_eq!(cut.len(), READ_CHUNK - 150);
        assert_eq!(cut.first(), Some(&0));
    }

    #[test]
    fn making_room_behind_a_long_partial_frame_still_leaves_a_quarter_chunk() {
        let mut buf = BytesMut::new();
        buf.extend(std::iter::repeat_n(7u8, READ_CHUNK));
        make_room(&mut buf);
        assert_eq!(buf.len(), READ_CHUNK);
        assert!(buf.capacity() - buf.len() >= READ_CHUNK / 4);
    }
}
