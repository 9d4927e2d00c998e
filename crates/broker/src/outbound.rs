//! A connection's way out: everything that produces frames for a client (the connection's
//! reply batches, handlers that answer by themselves, push subscriptions, direct deliveries)
//! queues them on the connection's [`Outbound`]; one writer task writes them to the socket.
//!
//! - **Batching.** The writer takes whatever has queued up and writes it with as few system
//!   calls as the socket allows: small frames are copied into one buffer, big ones (push
//!   batches) are written where they are with vectored writes.
//! - **A budget.** The bytes queued and not yet written are counted. Producers look at the
//!   count before they produce more ([`Outbound::has_room`]): the connection stops reading
//!   requests, a push subscription stops taking, a direct delivery is refused (the message
//!   waits in its queue). A client that stops reading its replies thus costs at most about the
//!   budget, and when the socket accepts nothing for the write timeout the writer gives up
//!   and the connection closes with that reason.
//! - **Held auto-ack deliveries.** An auto-ack take is *held* by the store (see
//!   [`ferry_store::ReceiveSpec::hold`]) until the delivery reaches this writer. Right before it
//!   writes a batch, the writer settles the held deliveries in it with one store call (the
//!   removal an auto-ack take makes, durable before the bytes go out, so auto ack stays at most
//!   once across a crash), unless the connection is closing: then it leaves them held, and the
//!   connection's teardown hands them back to their queues as they were. A receive's reply
//!   that cannot be delivered so is answered "no message" instead; a push batch is dropped
//!   (its deliveries are back in the queue). So no message is taken for a connection that can
//!   no longer receive it, except the batch being written when the connection dies.

use rustix::event::{PollFd, PollFlags};
use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use ferry_protocol::{DeliveryId, Response};
use ferry_store::{SessionId, Store, StoreError};
use futures::FutureExt;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::wire::WireWrite;

/// Writer batches are cut at about this size.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// Most queued items taken into one batch.
const MAX_BATCH_ITEMS: usize = 1024;
/// Frames below this size are copied into the writer's batch buffer; bigger ones are written
/// from where they are.
const COPY_BELOW: usize = 16 * 1024;
/// Most buffers handed to one vectored write.
const MAX_IOVECS: usize = 64;

/// The connection is gone (or closing): nothing queued now would be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// Held deliveries a queued item carries.
enum Holds {
    None,
    /// A receive's reply with one held delivery; `request_id` gets "no message" instead when
    /// the delivery cannot be settled.
    Reply {
        delivery: DeliveryId,
        request_id: u32,
    },
    /// A push batch of held deliveries, dropped when they cannot be settled.
    Push(Vec<DeliveryId>),
}

/// One item for the writer.
struct Outgoing {
    frames: Frames,
    holds: Holds,
}

/// An item's frames: one buffer, or several written back to back (a push batch whose runs'
/// bodies are slices of their publishers' frames, not copies).
enum Frames {
    One(Bytes),
    Pieces(Vec<Bytes>),
}

impl Frames {
    fn len(&self) -> usize {
        match self {
            Frames::One(b) => b.len(),
            Frames::Pieces(pieces) => pieces.iter().map(Bytes::len).sum(),
        }
    }

    fn into_pieces(self) -> impl Iterator<Item = Bytes> {
        let (one, many) = match self {
            Frames::One(b) => (Some(b), Vec::new()),
            Frames::Pieces(pieces) => (None, pieces),
        };
        one.into_iter().chain(many)
    }
}

/// What the handles and the writer share.
struct Link {
    /// Bytes queued and not yet written.
    queued: AtomicUsize,
    /// Bytes of the connection's pending requests, as its connection last reported them.
    pending: AtomicUsize,
    /// Above this many queued bytes, producers wait.
    budget: usize,
    /// Notified when `queued` falls below `budget`.
    drained: Notify,
    /// Cancelled when the connection starts closing (its session ends, the broker shuts down,
    /// the writer gives up): waits end, and the writer settles no more held deliveries.
    closing: CancellationToken,
    /// Set with `closing` by [`Outbound::close`] and the writer: read on hot paths, where the
    /// token's lock is not wanted.
    closed: AtomicBool,
    /// Why the writer gave up on the socket, if it did.
    failure: Mutex<Option<Failure>>,
    /// The session id the store holds this connection's auto-ack takes under (0: none yet,
    /// before the handshake).
    hold_session: AtomicU64,
    /// Whether a take was ever held for this connection (its teardown releases them then).
    held_any: AtomicBool,
    /// Open while the writer may settle held deliveries; the teardown closes it, waiting for a
    /// settlement in progress, before it hands the held deliveries back.
    gate: tokio::sync::Mutex<bool>,
}

/// Why the writer gave up on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What happened, for the logs.
    pub reason: String,
    /// The client read none of its replies for the write timeout (rather than the socket or
    /// the store failing).
    pub slow_reader: bool,
}

/// A handle to queue frames for one connection's writer. Cheap to clone.
#[derive(Clone)]
pub struct Outbound {
    tx: UnboundedSender<Outgoing>,
    link: Arc<Link>,
}

/// The writer task's end, from [`channel`]; run it with [`Writer::run`].
pub struct Writer {
    rx: UnboundedReceiver<Outgoing>,
    link: Arc<Link>,
}

/// A new outbound queue whose producers wait above `budget` queued bytes; it starts closing
/// when `parent` is cancelled (the broker's shutdown), too.
pub fn channel(budget: usize, parent: &CancellationToken) -> (Outbound, Writer) {
    let (tx, rx) = unbounded_channel();
    let link = Arc::new(Link {
        queued: AtomicUsize::new(0),
        pending: AtomicUsize::new(0),
        budget: budget.max(1),
        drained: Notify::new(),
        closing: parent.child_token(),
        closed: AtomicBool::new(false),
        failure: Mutex::new(None),
        hold_session: AtomicU64::new(0),
        held_any: AtomicBool::new(false),
        gate: tokio::sync::Mutex::new(true),
    });
    (
        Outbound {
            tx,
            link: link.clone(),
        },
        Writer { rx, link },
    )
}

impl Outbound {
    fn queue(&self, item: Outgoing) -> Result<(), Closed> {
        if !matches!(item.holds, Holds::None) {
            self.note_held();
        }
        let n = item.frames.len();
        self.link.queued.fetch_add(n, Ordering::Relaxed);
        self.tx.send(item).map_err(|_| {
            self.link.queued.fetch_sub(n, Ordering::Relaxed);
            Closed
        })
    }

    /// Queues encoded frames.
    pub fn send(&self, frames: Bytes) -> Result<(), Closed> {
        self.queue(Outgoing {
            frames: Frames::One(frames),
            holds: Holds::None,
        })
    }

    /// Queues frames in pieces, written back to back in order. A piece may be a slice of a
    /// publisher's frame (a run's bodies): it keeps that frame's buffer alive until written,
    /// which is why only slices of at least
    /// [`ferry_protocol::batch_writer::SHARE_AT_LEAST`] bytes are queued so.
    pub fn send_pieces(&self, pieces: Vec<Bytes>) -> Result<(), Closed> {
        self.queue(Outgoing {
            frames: Frames::Pieces(pieces),
            holds: Holds::None,
        })
    }

    /// Queues a receive's reply carrying held delivery `delivery` (see the module docs).
    pub fn send_held_reply(
        &self,
        frames: Bytes,
        delivery: DeliveryId,
        request_id: u32,
    ) -> Result<(), Closed> {
        self.queue(Outgoing {
            frames: Frames::One(frames),
            holds: Holds::Reply {
                delivery,
                request_id,
            },
        })
    }

    /// Queues a push batch whose deliveries `held` are held (see the module docs).
    pub fn send_held_push(&self, frames: Bytes, held: Vec<DeliveryId>) -> Result<(), Closed> {
        self.queue(Outgoing {
            frames: Frames::One(frames),
            holds: Holds::Push(held),
        })
    }

    /// Whether the connection is closing or gone (cheap: no lock).
    pub fn is_closed(&self) -> bool {
        self.link.closed.load(Ordering::Relaxed) || self.tx.is_closed()
    }

    /// Cancelled when the connection starts closing.
    pub fn closing(&self) -> &CancellationToken {
        &self.link.closing
    }

    /// Starts closing: waits end, held deliveries are no longer settled. Idempotent.
    pub fn close(&self) {
        self.link.closed.store(true, Ordering::Relaxed);
        self.link.closing.cancel();
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.link.queued.load(Ordering::Relaxed)
    }

    /// How many more bytes fit in the budget (0 when it is used up).
    pub fn room(&self) -> usize {
        self.link.budget.saturating_sub(self.queued_bytes())
    }

    /// Whether the queued bytes are below the budget.
    pub fn has_room(&self) -> bool {
        self.room() > 0
    }

    /// Returns once the queued bytes are below the budget, or the connection is closing.
    pub async fn wait_for_room(&self) {
        loop {
            let drained = self.link.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.has_room() || self.link.closing.is_cancelled() {
                return;
            }
            tokio::select! {
                _ = drained => {}
                _ = self.link.closing.cancelled() => return,
            }
        }
    }

    /// Why the writer gave up on the socket, if it did (it also starts closing then).
    pub fn failure(&self) -> Option<Failure> {
        self.link
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lets the writer settle auto-ack takes held under `hold_session`, from now on.
    pub fn enable_holds(&self, hold_session: SessionId) {
        self.link
            .hold_session
            .store(hold_session, Ordering::Relaxed);
    }

    /// Whether auto-ack takes for this connection may be held (see the module docs).
    pub fn holds_enabled(&self) -> bool {
        self.link.hold_session.load(Ordering::Relaxed) != 0
    }

    /// Records that a take was held for this connection.
    pub fn note_held(&self) {
        self.link.held_any.store(true, Ordering::Relaxed);
    }

    /// Stops the writer from settling held deliveries, waiting for a settlement in progress.
    /// Returns whether any take was ever held (the caller then releases them in the store).
    pub async fn stop_settling(&self) -> bool {
        self.close();
        *self.link.gate.lock().await = false;
        self.link.held_any.load(Ordering::Relaxed)
    }
}

/// A read-only view of a connection's queued and pending bytes, for the broker-wide memory
/// budget; it does not keep the connection alive.
pub struct Probe(Weak<Link>);

impl Probe {
    /// Whether the connection still exists.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// Its queued outbound bytes plus its pending requests' bytes (0 once it is gone).
    pub fn bytes(&self) -> usize {
        self.0.upgrade().map_or(0, |l| {
            l.queued
                .load(Ordering::Relaxed)
                .saturating_add(l.pending.load(Ordering::Relaxed))
        })
    }
}

impl Outbound {
    /// A view of this connection's bytes for the memory budget.
    pub fn probe(&self) -> Probe {
        Probe(Arc::downgrade(&self.link))
    }

    /// Reports the bytes the connection's pending requests hold (for [`Probe::bytes`]).
    pub fn set_pending_bytes(&self, n: usize) {
        self.link.pending.store(n, Ordering::Relaxed);
    }
}

impl Link {
    /// The writer gives up: the connection closes with `reason`.
    fn fail(&self, reason: String, slow_reader: bool) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if failure.is_none() {
            *failure = Some(Failure {
                reason,
                slow_reader,
            });
        }
        drop(failure);
        self.closed.store(true, Ordering::Relaxed);
        self.closing.cancel();
    }

    /// Whether the writer gave up.
    fn has_failed(&self) -> bool {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// `n` queued bytes are gone (written or dropped).
    fn done(&self, n: usize) {
        let before = self.queued.fetch_sub(n, Ordering::Relaxed);
        if before >= self.budget && before - n < self.budget {
            self.drained.notify_waiters();
        }
    }
}

impl Writer {
    /// Writes everything queued until every [`Outbound`] is dropped, settling held deliveries
    /// in `store` on the way (see the module docs). A write that makes no progress for
    /// `write_timeout` gives up: the connection closes.
    pub async fn run(self, mut wr: WireWrite, store: Arc<dyn Store>, write_timeout: Duration) {
        let Writer { mut rx, link } = self;
        let mut items: Vec<Outgoing> = Vec::new();
        let mut held: Vec<DeliveryId> = Vec::new();
        let mut small = BytesMut::with_capacity(64 * 1024);
        let mut chunks: VecDeque<Bytes> = VecDeque::with_capacity(MAX_IOVECS);
        while let Some(first) = rx.recv().await {
            let mut bytes = first.frames.len();
            items.push(first);
            while bytes < WRITE_BATCH_BYTES && items.len() < MAX_BATCH_ITEMS {
                match rx.try_recv() {
                    Ok(more) => {
                        bytes += more.frames.len();
                        items.push(more);
                    }
                    Err(_) => break,
                }
            }
            held.clear();
            for item in &items {
                match &item.holds {
                    Holds::None => {}
                    Holds::Reply { delivery, .. } => held.push(*delivery),
                    Holds::Push(ids) => held.extend_from_slice(ids),
                }
            }
            let settled = held.is_empty() || settle(&link, &*store, &held, Some(&wr)).await;
            if link.has_failed() {
                // The socket ended (or the store failed): nothing more is written.
                return;
            }
            for item in items.drain(..) {
                match item.holds {
                    Holds::Reply { request_id, .. } if !settled => {
                        // The message stays in its queue: the receive found nothing.
                        Response::Received(None).encode(request_id, &mut small);
                    }
                    Holds::Push(_) if !settled => {}
                    _ => {
                        for piece in item.frames.into_pieces() {
                            gather(&mut small, &mut chunks, piece);
                        }
                    }
                }
            }
            if !small.is_empty() {
                chunks.push_back(small.split().freeze());
            }
            let written = write_chunks(&mut wr, &mut chunks, write_timeout).await;
            link.done(bytes);
            if let Err(e) = written {
                let slow_reader = e.kind() == std::io::ErrorKind::TimedOut;
                let reason = if slow_reader {
                    format!(
                        "the client read none of its replies for {} ms",
                        write_timeout.as_millis()
                    )
                } else {
                    format!("write failed: {e}")
                };
                debug!(%reason, "dropping the connection's output");
                link.fail(reason, slow_reader);
                return;
            }
        }
        wr.shutdown().await;
    }
}

impl Writer {
    /// For a gateway that writes a session's frames itself, in its own protocol (see
    /// [`crate::local`]): waits for what is queued, settles the held deliveries in it as
    /// [`Writer::run`] does (the gateway checks its own socket), and appends the frames that
    /// may be written to `frames`, in order. Returns the queued bytes taken, to give back with
    /// [`Writer::written`] once they are written (until then they count against the budget);
    /// `None` when every [`Outbound`] is gone or the session is closing.
    pub async fn next_batch(
        &mut self,
        store: &dyn Store,
        frames: &mut Vec<Bytes>,
    ) -> Option<usize> {
        let first = tokio::select! {
            first = self.rx.recv() => first?,
            _ = self.link.closing.cancelled() => return None,
        };
        let mut bytes = first.frames.len();
        let mut items = vec![first];
        while bytes < WRITE_BATCH_BYTES && items.len() < MAX_BATCH_ITEMS {
            match self.rx.try_recv() {
                Ok(more) => {
                    bytes += more.frames.len();
                    items.push(more);
                }
                Err(_) => break,
            }
        }
        let mut held: Vec<DeliveryId> = Vec::new();
        for item in &items {
            match &item.holds {
                Holds::None => {}
                Holds::Reply { delivery, .. } => held.push(*delivery),
                Holds::Push(ids) => held.extend_from_slice(ids),
            }
        }
        let settled = held.is_empty() || settle(&self.link, store, &held, None).await;
        for item in items {
            match item.holds {
                // Not settled: back in their queues when the session ends (a gateway's
                // sessions make no held replies).
                Holds::Reply { .. } | Holds::Push(_) if !settled => {}
                _ => frames.extend(item.frames.into_pieces()),
            }
        }
        Some(bytes)
    }

    /// `n` bytes from [`Writer::next_batch`] are written (or dropped): producers waiting for
    /// room go on.
    pub fn written(&self, n: usize) {
        self.link.done(n);
    }

    /// The gateway gives up on its client (`slow_reader`: it took nothing for the write
    /// timeout): the session starts closing with `reason`.
    pub fn fail(&self, reason: String, slow_reader: bool) {
        self.link.fail(reason, slow_reader);
    }
}

/// Settles held deliveries `ids` (removes them from their queues) unless the connection is
/// closing or its socket has ended; whether they may be written.
async fn settle(
    link: &Link,
    store: &dyn Store,
    ids: &[DeliveryId],
    wr: Option<&WireWrite>,
) -> bool {
    let gate = link.gate.lock().await;
    if !*gate || link.closed.load(Ordering::Relaxed) || link.closing.is_cancelled() {
        return false;
    }
    if let Some(why) = wr.and_then(socket_ended) {
        // The reader may not have seen it yet: what is held goes back rather than into a
        // socket that can no longer deliver it.
        drop(gate);
        link.fail(why, false);
        return false;
    }
    let session = link.hold_session.load(Ordering::Relaxed);
    match store.queues().ack(session, ids).await {
        // Unknown ones left with their queue (a forced delete): delivered all the same.
        Ok(()) | Err(StoreError::DeliveriesNotFound(_)) => true,
        Err(e) => {
            drop(gate);
            link.fail(format!("cannot settle auto-ack deliveries: {e}"), false);
            false
        }
    }
}

/// Why the socket can no longer deliver, if the kernel knows already: a reset or error
/// (`SO_ERROR`), or the client's end of stream (it closed its side and may be gone).
fn socket_ended(wr: &WireWrite) -> Option<String> {
    match wr.take_error() {
        Ok(Some(e)) => return Some(format!("socket error: {e}")),
        Err(e) => return Some(format!("socket error: {e}")),
        Ok(None) => {}
    }
    if let WireWrite::Tcp(w) = wr {
        let stream: &tokio::net::TcpStream = w.as_ref();
        let interest = tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE;
        match stream.ready(interest).now_or_never() {
            Some(Ok(r)) if r.is_read_closed() || r.is_write_closed() || r.is_error() => {
                return Some("the client closed the connection".into());
            }
            Some(Err(e)) => return Some(format!("socket error: {e}")),
            _ => {}
        }
    }
    // The runtime's readiness is only as fresh as its last look at the kernel, which on a busy
    // machine can be long after the client's end of stream arrived: ask the kernel itself.
    // `RDHUP` is reported even while requests the reader has not taken yet sit unread.
    let mut fds = [PollFd::from_borrowed_fd(wr.fd(), PollFlags::RDHUP)];
    let now = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut fds, Some(&now)) {
        Ok(_) => fds
            .first()
            .map(PollFd::revents)
            .filter(|r| r.intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR))
            .map(|_| "the client closed the connection".into()),
        Err(e) => Some(format!("socket error: {e}")),
    }
}

/// Queues `frame` for the next write: copied into `small` when it is small, as a chunk of its
/// own otherwise (after what `small` holds, to keep the order).
fn gather(small: &mut BytesMut, chunks: &mut VecDeque<Bytes>, frame: Bytes) {
    if frame.len() < COPY_BELOW {
        small.extend_from_slice(&frame);
        return;
    }
    if !small.is_empty() {
        chunks.push_back(small.split().freeze());
    }
    chunks.push_back(frame);
}

/// Writes every chunk, in order, with as few system calls as the socket allows. Fails with
/// `TimedOut` when the socket accepts nothing for `timeout`.
async fn write_chunks(
    wr: &mut WireWrite,
    chunks: &mut VecDeque<Bytes>,
    timeout: Duration,
) -> std::io::Result<()> {
    let wr = match wr {
        WireWrite::Tcp(w) => w,
        WireWrite::Tls { io, .. } => return write_chunks_tls(io, chunks, timeout).await,
    };
    while !chunks.is_empty() {
        let attempt = {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let mut n = 0;
            for (slot, chunk) in iov.iter_mut().zip(chunks.iter()) {
                *slot = IoSlice::new(chunk);
                n += 1;
            }
            wr.try_write_vectored(iov.get(..n).unwrap_or_default())
        };
        let written = match attempt {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // The socket's buffer is full: the client is not reading. A timer only now,
                // not on every write.
                match tokio::time::timeout(timeout, wr.writable()).await {
                    Ok(ready) => ready?,
                    Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        consume(chunks, written);
    }
    Ok(())
}

/// Drops the first `written` bytes of `chunks`.
fn consume(chunks: &mut VecDeque<Bytes>, written: usize) {
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

/// As [`write_chunks`], through TLS: each write encrypts what it takes into records, which
/// the flush pushes out. A write or flush that makes no progress for `timeout` fails.
async fn write_chunks_tls(
    io: &mut tokio::io::WriteHalf<ferry_tls::server::TlsStream<tokio::net::TcpStream>>,
    chunks: &mut VecDeque<Bytes>,
    timeout: Duration,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let timed_out = || std::io::Error::from(std::io::ErrorKind::TimedOut);
    while !chunks.is_empty() {
        let written = {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let mut n = 0;
            for (slot, chunk) in iov.iter_mut().zip(chunks.iter()) {
                *slot = IoSlice::new(chunk);
                n += 1;
            }
            let iov = iov.get(..n).unwrap_or_default();
            tokio::time::timeout(timeout, io.write_vectored(iov))
                .await
                .map_err(|_| timed_out())??
        };
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        consume(chunks, written);
    }
    tokio::time::timeout(timeout, io.flush())
        .await
        .map_err(|_| timed_out())?
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::BytesMut;
    use ferry_protocol::{split_frame, AckMode, Order, ReceiveMode, Response, Source};
    use ferry_store::{EmbeddedConfig, EmbeddedStore, NewMessage, ReceiveSpec, Store};
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const HOLDER: SessionId = 1 << 63 | 1;

    /// A store holding one message taken (held) by [`HOLDER`], and the held delivery.
    async fn store_with_a_held_take(dir: &std::path::Path) -> (Arc<dyn Store>, Delivery) {
        let store: Arc<dyn Store> = EmbeddedStore::open(EmbeddedConfig::new(dir))
            .await
            .expect("store");
        store.sessions().register_client("c").await.expect("client");
        store.queues().create_queue("q").await.expect("queue");
        store
            .queues()
            .send(NewMessage {
                queues: vec!["q".into()],
                topic: None,
                persistent: true,
                sender: Arc::from("c"),
                receiver: None,
                priority: 5,
                context: 0,
                properties: Default::default(),
                body: Bytes::from_static(b"held"),
                created_at: 1,
                deliver_at_ms: 0,
                expires_at_ms: 0,
            })
            .await
            .expect("sent");
        let spec = ReceiveSpec {
            source: Source::Queue("q".into()),
            order: Order::Time,
            mode: ReceiveMode::Take,
            ack: AckMode::Auto,
            hold: true,
            client: "c".into(),
            session: HOLDER,
            lease_until_ms: 0,
            selector: None,
            now_ms: 1,
            max_bytes: None,
        };
        let d = store
            .queues()
            .receive(&spec, 1)
            .await
            .expect("taken")
            .remove(0);
        (store, d)
    }

    type Delivery = ferry_protocol::Delivery;

    /// The writer of a fresh connection, and the client's end of it.
    async fn connection(
        store: Arc<dyn Store>,
    ) -> (Outbound, tokio::task::JoinHandle<()>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let (_rd, wr) = server.into_split();
        let wr = crate::wire::WireWrite::Tcp(wr);
        let (out, writer) = channel(1 << 20, &CancellationToken::new());
        out.enable_holds(HOLDER);
        let task = tokio::spawn(writer.run(wr, store, Duration::from_secs(5)));
        (out, task, client)
    }

    /// The one frame the client reads.
    async fn read_reply(client: &mut TcpStream) -> (u32, Response) {
        let mut buf = BytesMut::new();
        loop {
            if let Some(f) = split_frame(&mut buf, 1 << 20).expect("frame") {
                return (f.request_id, Response::decode(&f).expect("reply"));
            }
            assert!(client.read_buf(&mut buf).await.expect("read") > 0, "closed");
        }
    }

    fn reply(d: &Delivery) -> Bytes {
        let mut d = d.clone();
        d.delivery_id = 0;
        let mut b = BytesMut::new();
        Response::Received(Some(d)).encode(7, &mut b);
        b.freeze()
    }

    #[tokio::test]
    async fn a_held_reply_is_settled_right_before_it_is_written() {
        let dir = tempfile::tempdir().expect("dir");
        let (store, d) = store_with_a_held_take(dir.path()).await;
        let (out, task, mut client) = connection(store.clone()).await;
        out.send_held_reply(reply(&d), d.delivery_id, 7)
            .expect("queued");
        let (rid, resp) = read_reply(&mut client).await;
        assert_eq!(rid, 7);
        assert!(matches!(resp, Response::Received(Some(_))), "{resp:?}");
        let q = &store.queues().list_queues().await.expect("list")[0];
        assert_eq!((q.ready, q.in_flight), (0, 0), "the take is final");
        drop(out);
        task.await.expect("writer");
    }

    #[tokio::test]
    async fn a_held_reply_of_a_closing_connection_is_answered_nothing_and_stays_held() {
        let dir = tempfile::tempdir().expect("dir");
        let (store, d) = store_with_a_held_take(dir.path()).await;
        let (out, task, mut client) = connection(store.clone()).await;
        out.close();
        out.send_held_reply(reply(&d), d.delivery_id, 7)
            .expect("queued while the writer runs");
        let (rid, resp) = read_reply(&mut client).await;
        assert_eq!((rid, resp), (7, Response::Received(None)));
        assert!(out.stop_settling().await, "a take was held");
        let q = &store.queues().list_queues().await.expect("list")[0];
        assert_eq!(
            (q.ready, q.in_flight),
            (0, 1),
            "still held, for the teardown"
        );
        store
            .sessions()
            .release_session(HOLDER)
            .await
            .expect("released");
        let q = &store.queues().list_queues().await.expect("list")[0];
        assert_eq!((q.ready, q.in_flight), (1, 0));
        drop(out);
        task.await.expect("writer");
    }

    #[tokio::test]
    async fn a_held_push_to_a_reset_socket_is_not_settled() {
        let dir = tempfile::tempdir().expect("dir");
        let (store, d) = store_with_a_held_take(dir.path()).await;
        let (out, task, client) = connection(store.clone()).await;
        client.set_zero_linger().expect("linger");
        drop(client);
        // Let the reset arrive.
        tokio::time::sleep(Duration::from_millis(50)).await;
        out.send_held_push(reply(&d), vec![d.delivery_id])
            .expect("queued");
        task.await.expect("the writer gives up");
        assert!(out.failure().is_some());
        assert!(out.is_closed());
        let q = &store.queues().list_queues().await.expect("list")[0];
        assert_eq!((q.ready, q.in_flight), (0, 1), "not settled: still held");
    }

    /// On a busy machine the runtime may not have looked at the kernel since the client's end
    /// of stream arrived: the check asks the kernel, also with requests still unread before it.
    #[test]
    fn an_end_of_stream_the_runtime_has_not_seen_yet_is_noticed() {
        use std::io::Write;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let client = std::net::TcpStream::connect(listener.local_addr().expect("addr"))
                .expect("connect");
            let (server, _) = listener.accept().await.expect("accept");
            let (_rd, wr) = server.into_split();
            let wr = crate::wire::WireWrite::Tcp(wr);
            assert!(socket_ended(&wr).is_none(), "an open connection");
            // No await from here on: the runtime does not look at the kernel meanwhile.
            (&client).write_all(b"requests nobody read").expect("write");
            client
                .shutdown(std::net::Shutdown::Write)
                .expect("end of stream");
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                socket_ended(&wr).is_some(),
                "the end of stream behind unread requests is seen"
            );
        });
    }

    #[tokio::test]
    async fn queued_bytes_wait_for_the_writer_and_room_comes_back() {
        let dir = tempfile::tempdir().expect("dir");
        let (store, _) = store_with_a_held_take(dir.path()).await;
        let (out, task, mut client) = connection(store).await;
        assert!(out.has_room());
        let big = Bytes::from(vec![0u8; 2 << 20]);
        out.send(big).expect("queued");
        // Over the 1 MiB budget until the client reads.
        let reader = tokio::spawn(async move {
            let mut sink = vec![0u8; 1 << 16];
            let mut n = 0;
            while n < 2 << 20 {
                n += client.read(&mut sink).await.expect("read");
            }
        });
        tokio::time::timeout(Duration::from_secs(5), out.wait_for_room())
            .await
            .expect("room once read");
        assert!(out.has_room());
        reader.await.expect("reader");
        drop(out);
        task.await.expect("writer");
    }
}
