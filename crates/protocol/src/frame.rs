//! The frame header and splitting a byte stream into frames.
//!
//! ```text
//! +----------------+-------------+-------------------+------------------+
//! | length u32 LE  | kind u16 LE | request id u32 LE | payload ...      |
//! +----------------+-------------+-------------------+------------------+
//!   length counts every byte after itself: 6 + payload length
//! ```

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::numbered::numbered_enum;
use crate::wire::WireError;

/// Bytes before the payload: length (4), kind (2), request id (4).
pub const HEADER_LEN: usize = 10;

numbered_enum! {
    /// Every frame kind. Requests have the high bit clear, responses and pushes have it set.
    pub enum FrameKind {
        /// Request: open a session.
        Connect = 0x0001,
        /// Request: end the session.
        Disconnect = 0x0002,
        /// Request: liveness check.
        Ping = 0x0003,
        /// Request: the client's answer to an authentication challenge.
        AuthResponse = 0x0004,
        /// Request: create a queue.
        CreateQueue = 0x0010,
        /// Request: delete a queue.
        DeleteQueue = 0x0011,
        /// Request: list queues.
        ListQueues = 0x0012,
        /// Request: send one message.
        Send = 0x0020,
        /// Request: send many messages, each on its own.
        SendBatch = 0x0021,
        /// Request: publish many bodies to one topic, the rest shared (version 6).
        PublishBatch = 0x0022,
        /// Request: receive one message.
        Receive = 0x0030,
        /// Request: settle client-ack deliveries.
        Ack = 0x0031,
        /// Request: return or drop client-ack deliveries.
        Nack = 0x0032,
        /// Request: which queues hold messages for me.
        WaitingQueues = 0x0033,
        /// Request: start a push subscription.
        Subscribe = 0x0040,
        /// Request: grant a subscription more credit.
        Credit = 0x0041,
        /// Request: end a subscription.
        Cancel = 0x0042,
        /// Request: create a topic.
        CreateTopic = 0x0050,
        /// Request: delete a topic.
        DeleteTopic = 0x0051,
        /// Request: list topics with their subscriptions.
        ListTopics = 0x0052,
        /// Request: subscribe to a topic (creating or attaching to a subscription) with push
        /// delivery.
        SubscribeTopic = 0x0053,
        /// Request: remove a durable subscription and its backlog.
        Unsubscribe = 0x0054,
        /// Request: begin a transaction.
        TxnBegin = 0x0060,
        /// Request: commit the transaction.
        TxnCommit = 0x0061,
        /// Request: roll the transaction back.
        TxnRollback = 0x0062,
        /// Reply to connect.
        Connected = 0x8001,
        /// Reply: success without data.
        Ok = 0x8002,
        /// Reply: failure.
        Error = 0x8003,
        /// Reply to ping.
        Pong = 0x8004,
        /// Reply to list queues.
        Queues = 0x8012,
        /// Reply to send.
        Sent = 0x8020,
        /// Reply to send batch.
        BatchSent = 0x8021,
        /// Reply to a publish batch whose every body was published, with consecutive ids
        /// (version 7).
        PublishedRun = 0x8022,
        /// Reply to receive.
        Received = 0x8030,
        /// Reply to waiting queues.
        WaitingQueuesList = 0x8033,
        /// Reply to subscribe.
        Subscribed = 0x8040,
        /// Push: a delivery on a subscription (request id 0).
        Deliver = 0x8041,
        /// Push: several deliveries on a subscription sharing queue, sender and properties
        /// (request id 0; version 5, see [`crate::deliver_batch`]).
        DeliverBatch = 0x8043,
        /// Push: deliveries on an auto-ack subscription alike but for their consecutive ids
        /// and bodies (request id 0; version 7, see [`crate::deliver_run`]).
        DeliverRun = 0x8044,
        /// Push: the broker ended a subscription (request id 0).
        SubscriptionClosed = 0x8042,
        /// Reply to list topics.
        Topics = 0x8052,
        /// Reply to subscribe topic.
        TopicSubscribed = 0x8053,
        /// Reply to commit.
        Committed = 0x8061,
        /// Reply to connect or to an authentication response: the server's next challenge.
        AuthChallenge = 0x8005,
    }
}

impl FrameKind {
    /// Whether a client sends this kind (high bit clear) rather than the broker (high bit set).
    pub fn is_request(self) -> bool {
        self.as_u16() & 0x8000 == 0
    }
}

/// One frame cut from the stream, payload not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// The kind number (may be unknown to this side).
    pub kind: u16,
    /// Chosen by the client per request and echoed in the reply; 0 on pushes.
    pub request_id: u32,
    /// The payload.
    pub payload: Bytes,
}

/// The whole length (header included) of the frame at the front of `bytes`, from its length
/// prefix, checked against `max_frame_bytes`; `None` while fewer than 4 bytes are there.
fn frame_total(bytes: &[u8], max_frame_bytes: u32) -> Result<Option<usize>, WireError> {
    let Some(prefix) = bytes.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*prefix);
    if (len as usize) < HEADER_LEN - 4 {
        return Err(WireError::FrameTooShort(len));
    }
    let total = u64::from(len) + 4;
    if total > u64::from(max_frame_bytes) {
        return Err(WireError::FrameTooLarge {
            len: total,
            max: max_frame_bytes,
        });
    }
    Ok(Some(total as usize))
}

/// Cuts the next complete frame off the front of `buf`.
///
/// Returns `Ok(None)` when `buf` does not hold a whole frame yet (nothing is consumed). The length
/// prefix is checked against `max_frame_bytes` before anything is allocated, so an oversized
/// announcement fails at once instead of making the reader wait for (and buffer) its bytes.
pub fn split_frame(
    buf: &mut BytesMut,
    max_frame_bytes: u32,
) -> Result<Option<RawFrame>, WireError> {
    let Some(total) = frame_total(buf, max_frame_bytes)? else {
        return Ok(None);
    };
    if buf.len() < total {
        // Reserve the rest of this frame so the next read can fill it in one go.
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let mut frame = buf.split_to(total);
    frame.advance(4);
    let kind = frame.get_u16_le();
    let request_id = frame.get_u32_le();
    Ok(Some(RawFrame {
        kind,
        request_id,
        payload: frame.freeze(),
    }))
}

/// Cuts every complete frame off the front of `buf` at once, as one run of bytes that
/// [`frames_in`] walks: one split for all the frames of a read instead of one per frame, which
/// a reader of hundreds of small pushes per read notices. The frames are checked as
/// [`split_frame`] checks them; the error of a bad length prefix comes back beside the
/// complete frames in front of it, which the caller handles first. The rest of an incomplete
/// frame gets room reserved, as [`split_frame`] does.
pub fn split_frames(buf: &mut BytesMut, max_frame_bytes: u32) -> (Bytes, Result<(), WireError>) {
    let mut at = 0;
    let mut missing = 0;
    let mut result = Ok(());
    while let Some(rest) = buf.get(at..) {
        match frame_total(rest, max_frame_bytes) {
            Ok(Some(total)) if total <= rest.len() => at += total,
            Ok(Some(total)) => {
                missing = total - rest.len();
                break;
            }
            Ok(None) => break,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let run = if at == 0 {
        Bytes::new()
    } else {
        buf.split_to(at).freeze()
    };
    if missing > 0 {
        buf.reserve(missing);
    }
    (run, result)
}

/// One frame of a run cut by [`split_frames`]: its header fields and where its payload lies
/// in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameAt {
    /// The kind number (may be unknown to this side).
    pub kind: u16,
    /// Chosen by the client per request and echoed in the reply; 0 on pushes.
    pub request_id: u32,
    /// The payload's bytes in the run.
    pub payload: std::ops::Range<usize>,
}

impl FrameAt {
    /// The frame as [`split_frame`] would have cut it (its payload a slice of `run`).
    pub fn to_raw(&self, run: &Bytes) -> RawFrame {
        RawFrame {
            kind: self.kind,
            request_id: self.request_id,
            payload: run.slice(self.payload.clone()),
        }
    }
}

/// The frames of `run` (cut by [`split_frames`]) in order.
pub fn frames_in(run: &Bytes) -> impl Iterator<Item = FrameAt> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let header = run.get(at..)?.first_chunk::<HEADER_LEN>()?;
        let [l0, l1, l2, l3, k0, k1, r0, r1, r2, r3] = *header;
        let total = u32::from_le_bytes([l0, l1, l2, l3]) as usize + 4;
        let payload = at + HEADER_LEN..at + total;
        // `split_frames` checked every length; a run from elsewhere ends at its first bad one.
        if total < HEADER_LEN || payload.end > run.len() {
            return None;
        }
        at += total;
        Some(FrameAt {
            kind: u16::from_le_bytes([k0, k1]),
            request_id: u32::from_le_bytes([r0, r1, r2, r3]),
            payload,
        })
    })
}

/// Writes a header with a placeholder length; returns where the frame starts for [`end_frame`].
pub fn begin_frame(out: &mut BytesMut, kind: FrameKind, request_id: u32) -> usize {
    let start = out.len();
    // One put for the whole header; the length (0 here) is patched by `end_frame`.
    let mut header = [0u8; HEADER_LEN];
    header[4..6].copy_from_slice(&(kind as u16).to_le_bytes());
    header[6..].copy_from_slice(&request_id.to_le_bytes());
    out.put_slice(&header);
    start
}

/// Patches the length of the frame begun at `start` now that its payload is written.
pub fn end_frame(out: &mut BytesMut, start: usize) {
    end_frame_before(out, start, 0);
}

/// Patches the length of the frame begun at `start` whose payload is written up to the
/// `tail` bytes that end it, which are written after `out`'s (see
/// [`crate::publish_batch::encode_publish_batch_head`]).
pub fn end_frame_before(out: &mut BytesMut, start: usize, tail: usize) {
    let len = (out.len() - start - 4 + tail) as u32;
    if let Some(slot) = out.get_mut(start..start + 4) {
        slot.copy_from_slice(&len.to_le_bytes());
    }
}
