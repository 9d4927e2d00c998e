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
//!
//! The parts: [`calls`] the table of calls waiting for replies, [`coalesce`] concurrent sends
//! gathered into batches, [`routing`] frames from the broker to their calls and pushed
//! deliveries to their subscriptions, [`early`] pushes that overtook their subscribe's reply,
//! [`reader`] and [`writer`] the two tasks; this file holds the shared state, the keep-alive
//! and the shutdown.

mod calls;
mod coalesce;
mod early;
mod reader;
mod routing;
mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use ferry_protocol::{ErrorReply, Limits, Request, SubscriptionId, WireError};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::error::ClientError;
use calls::fail;
use coalesce::QueuedSend;
use reader::read_loop;
use writer::write_loop;

pub(crate) use calls::InFlight;
use calls::Pending;
pub(crate) use routing::SubEvent;

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
    /// An encoded frame in two parts written back to back: a publish batch's head and its
    /// packed bodies, which are the caller's own buffer (written without a copy).
    Split(Bytes, Bytes),
    /// A send to coalesce with the sends queued next to it.
    Send(QueuedSend),
    /// Write what was queued before, then shut the socket down.
    Close,
}

/// Slack over the advertised frame limit for frames from the broker: a delivery repeats a
/// message whose send fitted the limit, plus a sender name and a few fixed fields.
const RECV_SLACK: u32 = 64 * 1024;

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

/// The reading half of a connection.
pub(crate) type ReadSide = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
/// The writing half of a connection.
pub(crate) type WriteSide = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

impl Shared {
    /// Starts the reader and writer tasks on a connection's halves (plain TCP or TLS).
    pub(crate) fn start(rd: ReadSide, wr: WriteSide) -> Arc<Shared> {
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
}
