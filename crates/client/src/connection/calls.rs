//! The table of calls waiting for their replies: registering a request under a fresh id,
//! handing its frame to the writer, and completing (or failing) its caller when the reply comes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferry_protocol::publish_batch::encode_publish_batch_head;
use ferry_protocol::{PublishBatch, Request, Response, SubscriptionId, WireError, HEADER_LEN};
use tokio::sync::{mpsc, oneshot};

use super::routing::SubEvent;
use super::{Out, Shared};
use crate::checks::check_frame;
use crate::error::ClientError;

/// The reply (or the failure) a caller waits for.
pub(crate) type ReplySender = oneshot::Sender<Result<Response, ClientError>>;

/// A registered request id.
pub(crate) enum Pending {
    /// A caller awaits the reply.
    Call(ReplySender),
    /// Coalesced sends (see `coalesce`): one caller per item of the batch, in order.
    Sends(Vec<ReplySender>),
    /// A subscribe (to a queue or a topic): on `Subscribed` or `TopicSubscribed` the reader
    /// registers the channel before it reads the next frame, so a delivery pushed right behind
    /// the reply is never missed.
    Subscribe(ReplySender, mpsc::UnboundedSender<SubEvent>),
    /// Nobody waits (credit, a cancel on drop, returning unwanted deliveries); an error reply is
    /// logged.
    Ignore(&'static str),
}

/// A request registered and handed to the writer; await [`InFlight::reply`].
pub(crate) struct InFlight {
    pub(super) shared: Arc<Shared>,
    pub(super) id: u32,
    pub(super) rx: Option<oneshot::Receiver<Result<Response, ClientError>>>,
}

impl InFlight {
    /// The reply: an error reply becomes [`ClientError::Server`].
    pub(crate) async fn reply(mut self) -> Result<Response, ClientError> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(ClientError::Closed);
        };
        let res = rx.await;
        // Answered: nothing left for `drop` to forget. (If this future is dropped before, the
        // receiver is still here and `drop` forgets the id.)
        self.rx = None;
        match res {
            Ok(Ok(Response::Error(e))) => Err(ClientError::Server(e)),
            Ok(res) => res,
            // The sender was dropped without an answer: only when the connection ended.
            Err(_) => Err(self.shared.close_error()),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The caller gave up (its future was dropped): forget the id. A late reply is then
        // handled as one for an unknown id.
        if self.rx.is_some() && self.id != 0 {
            self.shared.lock().pending.remove(&self.id);
            self.shared.drop_stale_early();
        }
    }
}

impl Shared {
    pub(super) fn next_id(&self) -> u32 {
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            // 0 is reserved for pushes; after 2^32 requests the counter wraps past it.
            if id != 0 {
                return id;
            }
        }
    }

    /// Encodes `req`, registers `pending` under a fresh request id and queues the frame.
    pub(super) fn submit_with(&self, req: &Request, pending: Pending) -> Result<u32, ClientError> {
        self.submit_with_capacity(req, pending, 0)
    }

    /// [`Shared::submit_with`], encoding into a buffer of `capacity` bytes to begin with (the
    /// expected frame size, when the caller knows it).
    pub(super) fn submit_with_capacity(
        &self,
        req: &Request,
        pending: Pending,
        capacity: usize,
    ) -> Result<u32, ClientError> {
        self.submit_encoded(pending, capacity, |id, frame| {
            req.encode(id, frame);
            None
        })
    }

    /// Registers `pending` under a fresh id and queues the frame `encode` writes for that id
    /// into a buffer of `capacity` bytes, followed by the tail it returns, if any (bytes the
    /// frame ends with, written without a copy).
    fn submit_encoded(
        &self,
        pending: Pending,
        capacity: usize,
        encode: impl FnOnce(u32, &mut BytesMut) -> Option<Bytes>,
    ) -> Result<u32, ClientError> {
        let mut id = self.next_id();
        let mut frame = BytesMut::with_capacity(capacity);
        let tail = encode(id, &mut frame);
        let len = frame.len() + tail.as_ref().map_or(0, Bytes::len);
        check_frame(len, self.send_limit.load(Ordering::Relaxed))?;
        {
            let mut st = self.lock();
            if let Some(reason) = &st.closed {
                return Err(reason.to_error());
            }
            // Only after 2^32 requests could an id still be waiting; then take the next one.
            while st.pending.contains_key(&id) {
                id = self.next_id();
                if let Some(slot) = frame.get_mut(6..10) {
                    slot.copy_from_slice(&id.to_le_bytes());
                }
            }
            st.pending.insert(id, pending);
        }
        let out = match tail {
            None => Out::Frame(frame.freeze()),
            Some(tail) => Out::Split(frame.freeze(), tail),
        };
        if self.out.send(out).is_err() {
            self.lock().pending.remove(&id);
            return Err(self.close_error());
        }
        Ok(id)
    }

    /// Sends `req`; await the returned [`InFlight`] for the reply. Submitting several before
    /// awaiting any pipelines them.
    pub(crate) fn submit(self: &Arc<Self>, req: &Request) -> Result<InFlight, ClientError> {
        let (tx, rx) = oneshot::channel();
        let id = self.submit_with(req, Pending::Call(tx))?;
        Ok(InFlight {
            shared: self.clone(),
            id,
            rx: Some(rx),
        })
    }

    /// [`Shared::submit`] for a request whose frame takes about `capacity` bytes: the encoding
    /// buffer is allocated at that size at once.
    pub(crate) fn submit_sized(
        self: &Arc<Self>,
        req: &Request,
        capacity: usize,
    ) -> Result<InFlight, ClientError> {
        let (tx, rx) = oneshot::channel();
        let id = self.submit_with_capacity(req, Pending::Call(tx), capacity)?;
        Ok(InFlight {
            shared: self.clone(),
            id,
            rx: Some(rx),
        })
    }

    /// Sends `batch` as a `PublishBatch`; await the returned [`InFlight`] for the reply. Its
    /// packed bodies are written from the batch's own buffer, not copied into the frame.
    pub(crate) fn submit_publish_batch(
        self: &Arc<Self>,
        batch: &PublishBatch,
    ) -> Result<InFlight, ClientError> {
        let (tx, rx) = oneshot::channel();
        let head = HEADER_LEN + batch.encoded_len() - batch.bodies.packed().len();
        let id = self.submit_encoded(Pending::Call(tx), head, |id, frame| {
            Some(encode_publish_batch_head(id, batch, frame))
        })?;
        Ok(InFlight {
            shared: self.clone(),
            id,
            rx: Some(rx),
        })
    }

    /// Sends `req` and waits for its reply.
    pub(crate) async fn call(self: &Arc<Self>, req: &Request) -> Result<Response, ClientError> {
        self.submit(req)?.reply().await
    }

    /// Sends a subscribe whose deliveries go to `events` once the broker accepts it.
    pub(crate) fn submit_subscribe(
        self: &Arc<Self>,
        req: &Request,
        events: mpsc::UnboundedSender<SubEvent>,
    ) -> Result<InFlight, ClientError> {
        let (tx, rx) = oneshot::channel();
        let id = self.submit_with(req, Pending::Subscribe(tx, events))?;
        Ok(InFlight {
            shared: self.clone(),
            id,
            rx: Some(rx),
        })
    }

    /// Sends `req` without waiting for its reply; an error reply is logged as `what`.
    pub(crate) fn send_and_forget(&self, req: &Request, what: &'static str) {
        if let Err(e) = self.submit_with(req, Pending::Ignore(what)) {
            tracing::debug!("{what} not sent: {e}");
        }
    }

    pub(super) fn complete_response(&self, id: u32, resp: Response) {
        let pending = self.lock().pending.remove(&id);
        match pending {
            Some(Pending::Call(tx)) => {
                let _ = tx.send(Ok(resp));
            }
            Some(Pending::Sends(txs)) => split_reply(txs, resp),
            Some(Pending::Subscribe(tx, events)) => {
                if let Some(subscription) = subscribed(&resp) {
                    self.register_subscription(subscription, events);
                }
                self.drop_stale_early();
                if let Err(Ok(resp)) = tx.send(Ok(resp)) {
                    if let Some(subscription) = subscribed(&resp) {
                        // The caller gave up meanwhile: end the subscription it will never read.
                        self.forget_subscription(subscription);
                        self.send_and_forget(&Request::Cancel { subscription }, "cancel");
                    }
                }
            }
            Some(Pending::Ignore(what)) => {
                if let Response::Error(e) = resp {
                    tracing::debug!("{what} failed: {e}");
                }
            }
            None => {
                // The caller gave up. A client-ack delivery it will never see goes back now.
                tracing::debug!("reply for unknown request id {id}");
                if let Response::Received(Some(d)) = &resp {
                    if d.delivery_id != 0 {
                        self.give_back(vec![d.delivery_id]);
                    }
                }
                if let Some(subscription) = subscribed(&resp) {
                    self.send_and_forget(&Request::Cancel { subscription }, "cancel");
                }
            }
        }
    }

    /// Fails the call(s) waiting on request `id` with a reply this client cannot decode.
    pub(super) fn fail_call(&self, id: u32, e: WireError) {
        let pending = self.lock().pending.remove(&id);
        if let Some(p) = pending {
            fail(p, || ClientError::Protocol(e.clone()));
        }
        self.drop_stale_early();
    }
}

/// The subscription a reply started, if it started one: `Subscribed`, or `TopicSubscribed`
/// with a subscription id (one with id 0 only created or checked the subscription).
fn subscribed(resp: &Response) -> Option<SubscriptionId> {
    match resp {
        Response::Subscribed { subscription } => Some(*subscription),
        Response::TopicSubscribed { subscription, .. } if *subscription != 0 => Some(*subscription),
        _ => None,
    }
}

/// Fails every caller waiting on `pending` with `error`.
pub(super) fn fail(pending: Pending, error: impl Fn() -> ClientError) {
    match pending {
        Pending::Call(tx) | Pending::Subscribe(tx, _) => {
            let _ = tx.send(Err(error()));
        }
        Pending::Sends(txs) => {
            for tx in txs {
                let _ = tx.send(Err(error()));
            }
        }
        Pending::Ignore(_) => {}
    }
}

/// Hands each caller of a coalesced batch its own reply: `Sent` or the item's error. A reply
/// that is not a per-item result (an error for the whole request, say) goes to every caller.
pub(super) fn split_reply(txs: Vec<ReplySender>, resp: Response) {
    match resp {
        Response::BatchSent(results) if results.len() == txs.len() => {
            for (tx, r) in txs.into_iter().zip(results) {
                let reply = match r {
                    Ok(id) => Response::Sent { id },
                    Err(e) => Response::Error(e),
                };
                let _ = tx.send(Ok(reply));
            }
        }
        other => {
            for tx in txs {
                let _ = tx.send(Ok(other.clone()));
            }
        }
    }
}
