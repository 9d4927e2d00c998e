//! Coalescing of concurrent single sends into batch requests.
//!
//! [`crate::Client::send`] does not encode its message itself: it queues it for the writer
//! task. When the writer wakes up, the sends queued back to back since its last write go out as
//! one `SendBatch` request (one frame for the broker to decode, one store call, one durability
//! wait, one reply) instead of one request each; a send queued alone still goes out as a plain
//! `Send`. Nothing ever waits to fill a batch: only what queued up while the writer was busy is
//! coalesced, so a lone send pays no extra latency, and a busy connection does much less work per
//! message on both ends.
//!
//! What the caller sees is unchanged: the items of a batch succeed or fail on their own, each
//! all or none over its queues, stored in the order they were queued; each caller gets its own
//! result, split from the batch reply by position.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use ferry_protocol::{requests::outgoing_encoded_len, OutgoingMessage, Request, HEADER_LEN};
use tokio::sync::oneshot;

use super::calls::{fail, InFlight, Pending, ReplySender};
use super::{Out, Shared};
use crate::checks::check_frame;
use crate::error::ClientError;

/// A send waiting for the writer.
pub(crate) struct QueuedSend {
    /// The message, already checked against the broker's limits.
    pub(crate) msg: OutgoingMessage,
    /// Its encoded length (`outgoing_encoded_len`).
    pub(crate) len: usize,
    /// Where its result goes.
    pub(crate) tx: ReplySender,
}

/// Sends gathered by the writer for one request.
#[derive(Default)]
pub(crate) struct SendRun {
    msgs: Vec<OutgoingMessage>,
    txs: Vec<ReplySender>,
    bytes: usize,
}

impl SendRun {
    /// Whether a message of `len` encoded bytes still fits a request holding at most
    /// `max_count` messages in `room` bytes. An empty run takes any message (its size was
    /// checked against the frame limit when it was queued).
    pub(crate) fn fits(&self, len: usize, max_count: usize, room: usize) -> bool {
        self.msgs.is_empty()
            || (self.msgs.len() < max_count && self.bytes.saturating_add(len) <= room)
    }

    /// Whether no send is gathered.
    pub(crate) fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Adds a send to the run.
    pub(crate) fn push(&mut self, s: QueuedSend) {
        self.bytes = self.bytes.saturating_add(s.len);
        self.msgs.push(s.msg);
        self.txs.push(s.tx);
    }

    /// Empties the run into one request and what waits for its reply: a plain `Send` for a
    /// single message, a `SendBatch` otherwise. `None` when the run is empty.
    pub(crate) fn take(&mut self) -> Option<(Request, Pending)> {
        self.bytes = 0;
        // The next run is likely as long as this one: room for it at once, not by doubling.
        let n = self.msgs.len();
        let mut msgs = std::mem::replace(&mut self.msgs, Vec::with_capacity(n));
        let mut txs = std::mem::replace(&mut self.txs, Vec::with_capacity(n));
        if msgs.len() > 1 {
            return Some((Request::SendBatch(msgs), Pending::Sends(txs)));
        }
        match (msgs.pop(), txs.pop()) {
            (Some(m), Some(tx)) => Some((Request::Send(m), Pending::Call(tx))),
            _ => None,
        }
    }
}

impl Shared {
    /// Queues one message for the writer, which coalesces it with the sends queued next to it
    /// (see `coalesce`). The message must have passed the limit checks. Await the returned
    /// [`InFlight`] for the reply (`Sent` or an error).
    pub(crate) fn submit_send(
        self: &Arc<Self>,
        msg: OutgoingMessage,
    ) -> Result<InFlight, ClientError> {
        let len = outgoing_encoded_len(&msg);
        check_frame(
            len.saturating_add(HEADER_LEN),
            self.send_limit.load(Ordering::Relaxed),
        )?;
        if self.ended.load(Ordering::Acquire) {
            return Err(self.close_error());
        }
        let (tx, rx) = oneshot::channel();
        if self
            .out
            .send(Out::Send(QueuedSend { msg, len, tx }))
            .is_err()
        {
            return Err(self.close_error());
        }
        // Id 0: the request id is chosen by the writer; a caller giving up just drops `rx`.
        Ok(InFlight {
            shared: self.clone(),
            id: 0,
            rx: Some(rx),
        })
    }

    /// Encodes the gathered sends as one request into `buf`, registered under a fresh id. When
    /// the connection has ended, their callers get the reason instead.
    pub(super) fn flush_sends(&self, run: &mut SendRun, buf: &mut BytesMut) {
        let Some((req, pending)) = run.take() else {
            return;
        };
        let id = {
            let mut st = self.lock();
            if let Some(reason) = &st.closed {
                fail(pending, || reason.to_error());
                return;
            }
            let mut id = self.next_id();
            while st.pending.contains_key(&id) {
                id = self.next_id();
            }
            st.pending.insert(id, pending);
            id
        };
        req.encode(id, buf);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use ferry_protocol::{ErrorCode, ErrorReply, Response};
    use tokio::sync::oneshot;

    use super::super::calls::split_reply;
    use super::*;

    fn queued(body: &'static str) -> (QueuedSend, oneshot::Receiver<ReplyResult>) {
        let (tx, rx) = oneshot::channel();
        let msg = OutgoingMessage::new("q", body);
        let len = ferry_protocol::requests::outgoing_encoded_len(&msg);
        (QueuedSend { msg, len, tx }, rx)
    }

    type ReplyResult = Result<Response, crate::ClientError>;

    #[test]
    fn a_lone_send_stays_a_plain_send() {
        let mut run = SendRun::default();
        let (s, _rx) = queued("a");
        run.push(s);
        let (req, pending) = run.take().unwrap();
        assert!(matches!(req, Request::Send(_)));
        assert!(matches!(pending, Pending::Call(_)));
        assert!(run.take().is_none(), "taking empties the run");
    }

    #[test]
    fn several_sends_become_one_batch_in_order() {
        let mut run = SendRun::default();
        let mut rxs = Vec::new();
        for b in ["a", "b", "c"] {
            let (s, rx) = queued(b);
            run.push(s);
            rxs.push(rx);
        }
        let (req, _) = run.take().unwrap();
        let Request::SendBatch(items) = req else {
            panic!("expected a batch")
        };
        let bodies: Vec<_> = items.iter().map(|m| m.body.clone()).collect();
        assert_eq!(bodies, vec!["a", "b", "c"]);
    }

    #[test]
    fn runs_respect_count_and_size_limits() {
        let mut run = SendRun::default();
        assert!(run.fits(1_000, 1, 10), "an empty run takes anything");
        let (s, _rx) = queued("a");
        let len = s.len;
        run.push(s);
        assert!(run.fits(len, 2, 2 * len));
        assert!(!run.fits(len, 1, 2 * len), "count limit");
        assert!(!run.fits(len + 1, 2, 2 * len), "size limit");
    }

    #[test]
    fn batch_results_are_split_by_position() {
        let (a, b) = (oneshot::channel(), oneshot::channel());
        let err = ErrorReply::new(ErrorCode::QueueNotFound, "queue 'x' does not exist");
        split_reply(
            vec![a.0, b.0],
            Response::BatchSent(vec![Ok(7), Err(err.clone())]),
        );
        assert_eq!(
            a.1.blocking_recv().unwrap().unwrap(),
            Response::Sent { id: 7 }
        );
        assert_eq!(b.1.blocking_recv().unwrap().unwrap(), Response::Error(err));
    }

    #[test]
    fn a_whole_request_error_reaches_every_caller() {
        let (a, b) = (oneshot::channel(), oneshot::channel());
        let err = Response::Error(ErrorReply::new(ErrorCode::StoreUnavailable, "down"));
        split_reply(vec![a.0, b.0], err.clone());
        assert_eq!(a.1.blocking_recv().unwrap().unwrap(), err);
        assert_eq!(b.1.blocking_recv().unwrap().unwrap(), err);
    }
}
