//! One TCP connection to a broker: a reader task, a writer task, and the table of calls waiting
//! for their replies.
//!
//! - Callers encode their request into a frame, register a oneshot under a fresh request id and
//!   hand the frame to the writer through an unbounded channel; any number of callers may do
//!   this at once (pipelining).
//! - The writer drains everything queued into one buffer and writes it with one `write_all`, so
//!   a burst of concurrent requests costs one syscall, not one per frame (TCP_NODELAY is on, so
//!   nothing else delays them). While several callers keep it busy, it lets the ready tasks run
//!   once before each drain, so that each write carries more.
//! - The reader cuts all complete frames of each read at once with `split_frames`, decodes
//!   them and completes the oneshot of the request id each reply carries; replies may come in
//!   any order. Pushes (request id 0) are decoded in place and go to the channel of their
//!   subscription, the deliveries of one read as one batch (see `pushes`).
//! - When the connection ends, for whatever reason, every waiting call and every subscription is
//!   failed with the reason, and every later call fails at once: nothing hangs.
//! - Keep-alive: a third task pings the broker whenever the writer has written nothing for half
//!   the interval the broker granted, so that an idle session (one waiting for pushes or for a
//!   long poll, say) is not taken for dead.
//!
//! Memory held by the unbounded channels is bounded elsewhere: outgoing frames by the callers
//! awaiting them, pushed deliveries by subscription credit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_protocol::{
    frames_in, requests::outgoing_encoded_len, split_frames, DeliveryId, ErrorReply, Limits,
    OutgoingMessage, RawFrame, Request, Response, SubscriptionId, WireError, HEADER_LEN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::checks::check_frame;
use crate::coalesce::{split_reply, QueuedSend, SendRun};
use crate::error::ClientError;
use crate::pushes::{decode_push, PushBatches};

/// What the reader hands a subscription.
pub(crate) enum SubEvent {
    /// Pushed deliveries, in the order the broker pushed them (never empty).
    Batch(Vec<ferry_protocol::Delivery>),
    /// The subscription ended: closed by the broker, or the connection is gone.
    Closed(ClientError),
}

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

/// Why the connection ended.
#[derive(Clone)]
enum CloseReason {
    /// Closed by either side, or an I/O error.
    Closed,
    /// The broker said why before closing (request id 0): `ServerFull`, for instance.
    Server(ErrorReply),
    /// The broker sent a frame this client cannot decode.
    Protocol(WireError),
}

impl CloseReason {
    fn to_error(&self) -> ClientError {
        match self {
            CloseReason::Closed => ClientError::Closed,
            CloseReason::Server(e) => ClientError::Server(e.clone()),
            CloseReason::Protocol(e) => ClientError::Protocol(e.clone()),
        }
    }
}

#[derive(Default)]
struct State {
    pending: HashMap<u32, Pending>,
    subscriptions: HashMap<SubscriptionId, mpsc::UnboundedSender<SubEvent>>,
    /// Pushes for a subscription id not known yet, received while a subscribe was waiting for
    /// its reply: kept for it in case the push overtook the reply. Bounded by the prefetch of
    /// the waiting subscribes.
    early: HashMap<SubscriptionId, Vec<SubEvent>>,
    closed: Option<CloseReason>,
    reader: Option<AbortHandle>,
    writer: Option<AbortHandle>,
    keepalive: Option<AbortHandle>,
}

/// What the writer task is handed.
enum Out {
    /// An encoded frame.
    Frame(Bytes),
    /// A send to coalesce with the sends queued next to it.
    Send(QueuedSend),
    /// Write what was queued before, then shut the socket down.
    Close,
}

/// Slack over the advertised frame limit for frames from the broker: a delivery repeats a
/// message whose send fitted the limit, plus a sender name and a few fixed fields.
const RECV_SLACK: u32 = 64 * 1024;

/// Stop draining the channel into one write past this many bytes.
const MAX_WRITE_BATCH: usize = 256 * 1024;

/// How long a closing connection may take to write what was queued before it closed.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The state shared by the client handles, the subscriptions and the two tasks.
pub(crate) struct Shared {
    // std mutex: held only to look up, insert or take entries, never across an await.
    state: Mutex<State>,
    /// Set (under the lock) when `State::closed` is: lets a send see that the connection has
    /// ended without taking the lock. A send that misses it is failed by the writer.
    ended: AtomicBool,
    out: mpsc::UnboundedSender<Out>,
    next_id: AtomicU32,
    /// Largest frame we send (the broker's advertised limit once connected).
    send_limit: AtomicU32,
    /// Largest frame we accept from the broker.
    recv_limit: AtomicU32,
    /// Most messages in one batch request (the broker's advertised `max_batch`).
    batch_limit: AtomicU32,
    /// Set by the writer on every write; the keep-alive task pings when it finds it unset.
    wrote: AtomicBool,
}

/// A request registered and handed to the writer; await [`InFlight::reply`].
pub(crate) struct InFlight {
    shared: Arc<Shared>,
    id: u32,
    rx: Option<oneshot::Receiver<Result<Response, ClientError>>>,
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

impl State {
    /// Whether a subscribe waits for its reply.
    fn subscribing(&self) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, Pending::Subscribe(..)))
    }
}

impl Shared {
    /// Starts the reader and writer tasks on `stream`.
    pub(crate) fn start(stream: TcpStream) -> Arc<Shared> {
        let (rd, wr) = stream.into_split();
        let (out, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            ended: AtomicBool::new(false),
            out,
            next_id: AtomicU32::new(1),
            send_limit: AtomicU32::new(Limits::DEFAULT.max_frame_bytes),
            recv_limit: AtomicU32::new(Limits::DEFAULT.max_frame_bytes.saturating_add(RECV_SLACK)),
            batch_limit: AtomicU32::new(Limits::DEFAULT.max_batch),
            wrote: AtomicBool::new(false),
        });
        let reader = tokio::spawn(read_loop(shared.clone(), rd));
        let writer = tokio::spawn(write_loop(shared.clone(), wr, rx));
        {
            let mut st = shared.lock();
            if st.closed.is_some() {
                // The connection already ended (the reader found it closed at once).
                reader.abort();
                writer.abort();
            } else {
                st.reader = Some(reader.abort_handle());
                st.writer = Some(writer.abort_handle());
            }
        }
        shared
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adopts the limits from the connect reply.
    pub(crate) fn set_limits(&self, limits: &Limits) {
        self.send_limit
            .store(limits.max_frame_bytes, Ordering::Relaxed);
        let recv = limits
            .max_frame_bytes
            .max(Limits::DEFAULT.max_frame_bytes)
            .saturating_add(RECV_SLACK);
        self.recv_limit.store(recv, Ordering::Relaxed);
        self.batch_limit
            .store(limits.max_batch.max(1), Ordering::Relaxed);
    }

    /// Starts pinging whenever nothing was written for half of `interval` (the keep-alive the
    /// broker granted; zero: never). Stops with the connection.
    pub(crate) fn keep_alive(self: &Arc<Self>, interval: Duration) {
        if interval.is_zero() {
            return;
        }
        let weak = Arc::downgrade(self);
        let period = interval / 2;
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                if !shared.wrote.swap(false, Ordering::Relaxed) {
                    shared.send_and_forget(&Request::Ping, "keep-alive ping");
                }
            }
        });
        let mut st = self.lock();
        if st.closed.is_some() {
            task.abort();
        } else {
            st.keepalive = Some(task.abort_handle());
        }
    }

    /// The error every call gets once the connection has ended.
    pub(crate) fn close_error(&self) -> ClientError {
        match &self.lock().closed {
            Some(reason) => reason.to_error(),
            None => ClientError::Closed,
        }
    }

    /// Whether the connection has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed.is_some()
    }

    fn next_id(&self) -> u32 {
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            // 0 is reserved for pushes; after 2^32 requests the counter wraps past it.
            if id != 0 {
                return id;
            }
        }
    }

    /// Encodes `req`, registers `pending` under a fresh request id and queues the frame.
    fn submit_with(&self, req: &Request, pending: Pending) -> Result<u32, ClientError> {
        self.submit_with_capacity(req, pending, 0)
    }

    /// [`Shared::submit_with`], encoding into a buffer of `capacity` bytes to begin with (the
    /// expected frame size, when the caller knows it).
    fn submit_with_capacity(
        &self,
        req: &Request,
        pending: Pending,
        capacity: usize,
    ) -> Result<u32, ClientError> {
        let mut id = self.next_id();
        let mut frame = BytesMut::with_capacity(capacity);
        req.encode(id, &mut frame);
        check_frame(frame.len(), self.send_limit.load(Ordering::Relaxed))?;
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
        if self.out.send(Out::Frame(frame.freeze())).is_err() {
            self.lock().pending.remove(&id);
            return Err(self.close_error());
        }
        Ok(id)
    }

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
    fn flush_sends(&self, run: &mut SendRun, buf: &mut BytesMut) {
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

    /// Stops routing deliveries to a subscription.
    pub(crate) fn forget_subscription(&self, id: SubscriptionId) {
        self.lock().subscriptions.remove(&id);
    }

    /// Ends the connection: fails every waiting call and subscription with `reason` and stops
    /// both tasks (dropping the socket). Later calls fail at once. Idempotent.
    ///
    /// `flush`: the writer first writes what was queued (a cancel or nack sent on the way out),
    /// within [`CLOSE_FLUSH_TIMEOUT`]; otherwise it stops at once.
    fn shutdown(&self, reason: CloseReason, flush: bool) {
        let (pending, subscriptions, reader, writer, keepalive) = {
            let mut st = self.lock();
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(reason.clone());
            self.ended.store(true, Ordering::Release);
            st.early.clear();
            (
                std::mem::take(&mut st.pending),
                std::mem::take(&mut st.subscriptions),
                st.reader.take(),
                st.writer.take(),
                st.keepalive.take(),
            )
        };
        if let Some(k) = keepalive {
            k.abort();
        }
        for (_, p) in pending {
            fail(p, || reason.to_error());
        }
        for (_, sub) in subscriptions {
            let _ = sub.send(SubEvent::Closed(reason.to_error()));
        }
        if let Some(r) = reader {
            r.abort();
        }
        if let Some(w) = writer {
            let runtime = tokio::runtime::Handle::try_current();
            match runtime {
                Ok(rt) if flush && self.out.send(Out::Close).is_ok() => {
                    // The writer ends by itself once it has flushed; this only bounds the wait
                    // for a peer that stopped reading.
                    rt.spawn(async move {
                        tokio::time::sleep(CLOSE_FLUSH_TIMEOUT).await;
                        w.abort();
                    });
                }
                _ => w.abort(),
            }
        }
    }

    /// Closes the connection from this side (the client was dropped or disconnected), after
    /// writing what was already queued.
    pub(crate) fn close(&self) {
        self.shutdown(CloseReason::Closed, true);
    }

    /// Hands deliveries nobody will consume back to the broker, so that they need not wait for
    /// their lease to expire.
    fn give_back(&self, ids: Vec<DeliveryId>) {
        if !ids.is_empty() {
            self.send_and_forget(
                &Request::Nack { ids, requeue: true },
                "returning deliveries",
            );
        }
    }

    /// Hands each subscription its batch of deliveries: one lock for all of them, one channel
    /// send per subscription. Deliveries for a subscription whose reply may still be coming are
    /// kept for it; client-ack ones for no subscription go back to the broker.
    fn route_pushes(&self, batches: &mut PushBatches) {
        let mut unwanted: Vec<DeliveryId> = Vec::new();
        {
            let mut st = self.lock();
            let st = &mut *st;
            for (subscription, batch) in batches.drain() {
                // Sending under the lock: an unbounded send never waits, and it spares a clone
                // of the sender.
                let rejected = match st.subscriptions.get(&subscription) {
                    Some(s) => match s.send(SubEvent::Batch(batch)) {
                        Ok(()) => continue,
                        Err(mpsc::error::SendError(event)) => event,
                    },
                    None if st.subscribing() => {
                        st.early
                            .entry(subscription)
                            .or_default()
                            .push(SubEvent::Batch(batch));
                        continue;
                    }
                    None => SubEvent::Batch(batch),
                };
                tracing::debug!("deliveries for unknown subscription {subscription}");
                if let SubEvent::Batch(ds) = rejected {
                    unwanted.extend(ds.iter().map(|d| d.delivery_id).filter(|&id| id != 0));
                }
            }
        }
        self.give_back(unwanted);
    }

    /// Routes one frame from the broker. An error ends the connection with that reason.
    fn dispatch(&self, frame: RawFrame) -> Result<(), CloseReason> {
        let resp = match Response::decode(&frame) {
            Ok(r) => r,
            Err(WireError::UnknownKind(kind)) => {
                // A newer broker's frame kind: fail the call it answers, skip it if a push.
                tracing::debug!(
                    "unknown frame kind {kind:#06x} (request id {})",
                    frame.request_id
                );
                if frame.request_id != 0 {
                    self.fail_call(frame.request_id, WireError::UnknownKind(kind));
                }
                return Ok(());
            }
            Err(e) => return Err(CloseReason::Protocol(e)),
        };
        if frame.request_id != 0 {
            self.complete_response(frame.request_id, resp);
            return Ok(());
        }
        // Deliveries never get here: the reader batches them (see `route_pushes`).
        match resp {
            Response::SubscriptionClosed {
                subscription,
                error,
            } => {
                let event = SubEvent::Closed(ClientError::Server(error));
                let sub = {
                    let mut st = self.lock();
                    match st.subscriptions.remove(&subscription) {
                        Some(s) => Some(s),
                        None if st.subscribing() => {
                            st.early.entry(subscription).or_default().push(event);
                            return Ok(());
                        }
                        None => return Ok(()),
                    }
                };
                if let Some(s) = sub {
                    let _ = s.send(event);
                }
            }
            // An error not tied to a request: the broker is closing the connection and says why.
            Response::Error(e) => return Err(CloseReason::Server(e)),
            other => tracing::debug!("ignoring unexpected push {:?}", other.kind()),
        }
        Ok(())
    }

    fn complete_response(&self, id: u32, resp: Response) {
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
    fn fail_call(&self, id: u32, e: WireError) {
        let pending = self.lock().pending.remove(&id);
        if let Some(p) = pending {
            fail(p, || ClientError::Protocol(e.clone()));
        }
        self.drop_stale_early();
    }

    /// Starts routing pushes to a new subscription, first those that overtook its reply.
    fn register_subscription(&self, id: SubscriptionId, events: mpsc::UnboundedSender<SubEvent>) {
        let early = {
            let mut st = self.lock();
            let early = st.early.remove(&id).unwrap_or_default();
            if !early.iter().any(|e| matches!(e, SubEvent::Closed(_))) {
                st.subscriptions.insert(id, events.clone());
            }
            early
        };
        for e in early {
            let _ = events.send(e);
        }
    }

    /// Once no subscribe waits for its reply, early pushes can belong to no subscription: hand
    /// their client-ack deliveries back.
    fn drop_stale_early(&self) {
        let stale = {
            let mut st = self.lock();
            if st.subscribing() || st.early.is_empty() {
                return;
            }
            std::mem::take(&mut st.early)
        };
        let ids: Vec<DeliveryId> = stale
            .into_values()
            .flatten()
            .flat_map(|e| match e {
                SubEvent::Batch(ds) => ds,
                SubEvent::Closed(_) => Vec::new(),
            })
            .map(|d| d.delivery_id)
            .filter(|&id| id != 0)
            .collect();
        self.give_back(ids);
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
fn fail(pending: Pending, error: impl Fn() -> ClientError) {
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

async fn read_loop(shared: Arc<Shared>, mut rd: OwnedReadHalf) {
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

async fn write_loop(
    shared: Arc<Shared>,
    mut wr: OwnedWriteHalf,
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
