//! One client connection: frames in, responses and pushes out, and the session's life.
//!
//! The reader loop cuts frames with [`split_frame`] (which checks the length against the limit
//! before buffering), decodes them and runs each request as a future. Requests run concurrently
//! (pipelining); each future is polled once as soon as it is created, so requests that take
//! effect on their first poll (embedded-store sends) do so in arrival order. Replies go to the
//! connection's writer ([`crate::outbound`]) in batches.
//!
//! **Budgets.** The loop reads and starts requests only while the connection is within its
//! budgets ([`crate::shared::ConnectionPolicy`]): requests in progress, bytes they hold, and
//! bytes queued for the client. Past one it stops reading until replies drain or requests
//! finish; the client's writes then block, as TCP intends. Under memory pressure
//! ([`crate::memory`]) a send is held back, with everything behind it, and refused with
//! `ResourceExhausted` if memory stays at the budget.
//!
//! **Liveness.** A session from which no complete frame arrives for 1.5 keep-alive intervals
//! is closed, and so is a connection whose frame has started but not ended within the read
//! timeout. Time during which the loop does not read (budgets) does not count.
//!
//! **The end.** Whatever ends the connection (end of stream, reset, read error, `Disconnect`,
//! a timeout, a malformed frame, shutdown), the session ends at once: its waits are cancelled
//! before they can take anything, its subscriptions stop, the requests still running finish
//! (promptly: none waits any more), its unsettled deliveries go back to their queues, auto-ack
//! deliveries the writer has not settled go back as they were, and its name is free. A
//! `Disconnect` is answered after that.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::{
    split_frame, ErrorCode, FrameKind, RawFrame, Request, Response, WireError, HEADER_LEN,
};
use ferry_store::SessionId;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::admission::AddressSlot;
use crate::close_reason::CloseReason;
use crate::dispatch::dispatch;
use crate::handshake;
use crate::liveness::{Liveness, Mode};
use crate::memory::{Pressure, SLOWDOWN, TICK};
use crate::outbound;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;
use crate::wire::{Wire, WireRead};

/// The bytes a pending request is charged for each byte of its selector: the selector's text
/// and its parsed form live as long as the request.
const SELECTOR_COST: usize = 4;
/// How far ahead a connection held up by its budgets is still read: enough to notice that
/// the client closed or reset the connection, or sent `Disconnect`, while its requests wait.
const READ_AHEAD: usize = 64 * 1024;

/// A request being served, with the bytes it is charged while pending. It borrows the
/// connection's `Shared` and `Session` instead of holding clones: an `Arc` clone per request
/// would bounce the reference counts between the runtime's threads on every request.
type RequestFuture<'a> = Pin<Box<dyn Future<Output = (u32, Option<Response>, usize)> + Send + 'a>>;

/// A send held back by memory pressure, and until when at most.
struct Parked {
    frame: RawFrame,
    until: Instant,
}

/// Serves one accepted connection (plain or TLS, see [`Wire`]) until it closes. `_permit`
/// holds a connection slot, `_address` the slot of its address.
pub async fn serve(
    shared: Arc<Shared>,
    wire: Wire,
    _permit: tokio::sync::OwnedSemaphorePermit,
    _address: Option<AddressSlot>,
) {
    let peer_addr = wire.peer;
    let peer = peer_addr.map_or_else(|| "unknown".into(), |a| a.to_string());
    let ip: Option<IpAddr> = peer_addr.map(|a| a.ip());
    // Watched from before the handshake: a session started before a fence must end with it.
    let mut fence = shared.watch_fence();
    let Wire {
        mut rd,
        wr,
        tls_user,
        ..
    } = wire;
    let (out, writer) = outbound::channel(shared.policy.max_outbound_bytes, &shared.shutdown);
    shared.memory.register(out.probe());
    let writer = tokio::spawn(writer.run(wr, shared.store.clone(), shared.policy.write_timeout));
    let mut rbuf = BytesMut::with_capacity(16 * 1024);

    let started =
        match handshake::run(&shared, &mut rd, &mut rbuf, &out, ip, tls_user.as_deref()).await {
            Ok(s) => s,
            Err(reason) => {
                log_close(&shared, &peer, None, &reason);
                out.close();
                drop(out);
                let _ = writer.await;
                return;
            }
        };
    let session = started.session;
    out.enable_holds(session.hold_id());
    Stats::add(&shared.stats.sessions_opened, 1);
    let registered = shared.sessions.register(&session, &peer, shared.now_ms());
    let operator = registered.closed_by_operator().clone();
    if let Some(left_out) = shared.session_logs.admit() {
        info!(%peer, client = %session.client, session = session.id, ephemeral = session.ephemeral, left_out, "session opened");
    }

    let ends = Ends {
        fence: &mut fence,
        operator: &operator,
    };
    let (reason, disconnect_id) = run_session(
        &shared,
        &session,
        &mut rd,
        &mut rbuf,
        ends,
        started.keepalive,
    )
    .await;
    end_session(&shared, &session).await;
    if let Some(rid) = disconnect_id {
        let mut reply = BytesMut::new();
        Response::Ok.encode(rid, &mut reply);
        let _ = out.send(reply.freeze());
    }
    log_close(&shared, &peer, Some(&session.client), &reason);
    drop(registered);
    drop(session);
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
}

/// What ends a session from outside its connection.
struct Ends<'a> {
    /// Changes when this node is fenced.
    fence: &'a mut watch::Receiver<u64>,
    /// Cancelled when an operator closes the session.
    operator: &'a tokio_util::sync::CancellationToken,
}

/// Reads and serves the session's requests until the connection ends; returns why, and the
/// request id of a `Disconnect` to answer. Every request has finished when it returns.
async fn run_session(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    rd: &mut WireRead,
    rbuf: &mut BytesMut,
    ends: Ends<'_>,
    keepalive: Duration,
) -> (CloseReason, Option<u32>) {
    let Ends { fence, operator } = ends;
    let out = &session.out;
    let policy = &shared.policy;
    let mut c = Conn {
        shared,
        session,
        inflight: FuturesUnordered::new(),
        pending_bytes: 0,
        replies: BytesMut::with_capacity(16 * 1024),
        disconnect_id: None,
        parked: None,
        frames_seen: false,
        scanned: 0,
    };
    let mut closing: Option<CloseReason> = None;
    let mut partial = false;
    let mut liveness = Liveness::new(keepalive.mul_f64(1.5), policy.read_timeout);
    let period = liveness.tick_period();
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if closing.is_none() {
            match c.process(rbuf).await {
                Ok(p) => partial = p,
                Err(reason) => closing = Some(reason),
            }
        }
        if !c.replies.is_empty() {
            Stats::add(&shared.stats.requests, 1);
            let _ = out.send(c.replies.split().freeze());
        }
        out.set_pending_bytes(c.pending_bytes + rbuf.len());
        if closing.is_some() {
            // Ends every wait now, before it can take anything; stops the subscriptions.
            out.close();
            if c.inflight.is_empty() {
                break;
            }
        }
        let room = out.queued_bytes() + c.replies.len() < policy.max_outbound_bytes;
        let active = closing.is_none() && c.parked.is_none() && c.within_budgets(room);
        let reading = active || (closing.is_none() && rbuf.len() < READ_AHEAD);
        let mode = if active {
            Mode::Active
        } else if room && c.parked.is_none() {
            Mode::Held
        } else {
            Mode::Paused
        };
        let waiting = if active { partial } else { !rbuf.is_empty() };
        tokio::select! {
            // Finished requests are encoded only while there is room for their replies: a
            // reply can be large (a peek of a big message) and many finish at once, so
            // draining them all would grow the replies by up to `max_pipelined` bodies. A
            // finished request left waiting holds its response as it is (bodies are shared,
            // not copied) until the writer makes room.
            Some((rid, resp, cost)) = c.inflight.next(),
                if !c.inflight.is_empty() && (room || closing.is_some()) =>
            {
                c.finished(rid, resp.as_ref(), cost);
                while closing.is_some() || c.room() {
                    let Some(Some((rid, resp, cost))) = c.inflight.next().now_or_never() else {
                        break;
                    };
                    c.finished(rid, resp.as_ref(), cost);
                }
            }
            read = rd.read_buf(rbuf), if reading => match read {
                Ok(0) => closing = Some(CloseReason::PeerClosed),
                Ok(_) => {}
                Err(e) => closing = Some(CloseReason::Io(e)),
            },
            _ = out.wait_for_room(), if closing.is_none() && !room => {}
            _ = tokio::time::sleep(TICK), if closing.is_none() && c.parked.is_some() => {
                if let Err(reason) = c.unpark().await {
                    closing = Some(reason);
                }
            }
            _ = tick.tick(), if closing.is_none() => {
                let seen = std::mem::take(&mut c.frames_seen);
                if let Some(reason) = liveness.check(Instant::now(), mode, seen, waiting) {
                    closing = Some(reason);
                }
            }
            _ = out.closing().cancelled(), if closing.is_none() => {
                closing = Some(match out.failure() {
                    Some(failure) => CloseReason::Write(failure),
                    None => CloseReason::Shutdown,
                });
            }
            _ = fence.changed(), if closing.is_none() => {
                closing = Some(CloseReason::Fenced);
            }
            _ = operator.cancelled(), if closing.is_none() => {
                closing = Some(CloseReason::Operator);
            }
        }
    }
    out.set_pending_bytes(0);
    let reason = closing.unwrap_or(CloseReason::PeerClosed);
    (reason, c.disconnect_id)
}

/// A session's requests in progress and what they hold.
struct Conn<'a> {
    shared: &'a Arc<Shared>,
    session: &'a Arc<Session>,
    inflight: FuturesUnordered<RequestFuture<'a>>,
    /// Bytes the pending requests are charged.
    pending_bytes: usize,
    /// Replies not yet handed to the writer.
    replies: BytesMut,
    disconnect_id: Option<u32>,
    parked: Option<Parked>,
    /// A complete frame arrived since the last liveness check.
    frames_seen: bool,
    /// How much of the read buffer was last looked through for a `Disconnect`.
    scanned: usize,
}

impl<'a> Conn<'a> {
    /// Whether another request may be read and started.
    fn within_budgets(&self, room: bool) -> bool {
        let policy = &self.shared.policy;
        room && self.inflight.len() < policy.max_pipelined
            && self.pending_bytes < policy.max_pending_bytes
    }

    fn room(&self) -> bool {
        self.session.out.queued_bytes() + self.replies.len() < self.shared.policy.max_outbound_bytes
    }

    /// A request finished: its reply (if the handler did not send it) goes out, its bytes are
    /// freed.
    fn finished(&mut self, rid: u32, resp: Option<&Response>, cost: usize) {
        encode(&mut self.replies, rid, resp);
        self.pending_bytes = self.pending_bytes.saturating_sub(cost);
    }

    /// Cuts and starts the buffered requests while the connection is within its budgets.
    /// Returns whether an incomplete frame is left in `rbuf` (with nothing holding it up), or
    /// why the connection must close.
    async fn process(&mut self, rbuf: &mut BytesMut) -> Result<bool, CloseReason> {
        let max_frame = self.shared.limits.max_frame_bytes;
        loop {
            if self.parked.is_some() || !self.within_budgets(self.room()) {
                // Held up: a disconnect read ahead ends the session now, without the requests
                // queued before it. (Looked for again only once more was read.)
                if self.scanned != rbuf.len() {
                    self.scanned = rbuf.len();
                    if let Some(rid) = find_disconnect(rbuf) {
                        self.disconnect_id = Some(rid);
                        return Err(CloseReason::Disconnected);
                    }
                }
                return Ok(false);
            }
            match split_frame(rbuf, max_frame) {
                Ok(Some(frame)) => {
                    self.frames_seen = true;
                    if is_publishing(frame.kind)
                        && self.shared.memory.pressure() != Pressure::Normal
                    {
                        Stats::add(&self.shared.stats.sends_slowed_memory, 1);
                        self.parked = Some(Parked {
                            frame,
                            until: Instant::now() + SLOWDOWN,
                        });
                        return Ok(false);
                    }
                    self.start(frame).await?;
                }
                Ok(None) => {
                    if !rbuf.is_empty() {
                        rbuf.reserve(16 * 1024);
                    }
                    return Ok(!rbuf.is_empty());
                }
                Err(e) => return Err(CloseReason::Malformed(e)),
            }
        }
    }

    /// Lets a held-back send go on once memory is below the high watermark, or once it has
    /// waited [`SLOWDOWN`]: then it is refused if memory is still at the budget.
    async fn unpark(&mut self) -> Result<(), CloseReason> {
        let pressure = self.shared.memory.pressure();
        let Some(parked) = self
            .parked
            .take_if(|p| pressure == Pressure::Normal || Instant::now() >= p.until)
        else {
            return Ok(());
        };
        if pressure == Pressure::Full {
            Stats::add(&self.shared.stats.sends_refused_memory, 1);
            encode(
                &mut self.replies,
                parked.frame.request_id,
                Some(&Response::error(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "the broker is at its memory budget ({} bytes): try again later",
                        self.shared.memory.max()
                    ),
                )),
            );
            return Ok(());
        }
        self.start(parked.frame).await
    }

    /// Decodes and starts one request. A reason when the connection must close.
    async fn start(&mut self, frame: RawFrame) -> Result<(), CloseReason> {
        let rid = frame.request_id;
        let frame_bytes = frame.payload.len() + HEADER_LEN;
        let request = match Request::decode(&frame) {
            Ok(r) => r,
            Err(WireError::UnknownKind(kind)) => {
                encode(
                    &mut self.replies,
                    rid,
                    Some(&Response::error(
                        ErrorCode::UnknownRequest,
                        format!("unknown request type {kind:#06x}"),
                    )),
                );
                return Ok(());
            }
            Err(e) => return Err(CloseReason::Malformed(e)),
        };
        if let Request::Disconnect = request {
            self.disconnect_id = Some(rid);
            return Err(CloseReason::Disconnected);
        }
        let cost = frame_bytes + SELECTOR_COST * selector_len(&request);
        let (shared, session) = (self.shared, self.session);
        let mut fut: RequestFuture<'a> =
            Box::pin(async move { (rid, dispatch(shared, session, rid, request).await, cost) });
        // Poll once now, so the request takes effect in arrival order; most finish right here or
        // wait only for the store's group commit.
        match futures::poll!(fut.as_mut()) {
            Poll::Ready((rid, resp, _)) => encode(&mut self.replies, rid, resp.as_ref()),
            Poll::Pending => {
                self.pending_bytes += cost;
                self.inflight.push(fut);
            }
        }
        Ok(())
    }
}

/// The request id of the first `Disconnect` among the complete frames buffered in `rbuf`.
fn find_disconnect(rbuf: &[u8]) -> Option<u32> {
    let mut at = 0usize;
    while let Some(header) = rbuf.get(at..at + HEADER_LEN) {
        let word = |i: usize| header.get(i..i + 4).and_then(|b| b.try_into().ok());
        let length = u32::from_le_bytes(word(0)?) as usize;
        let kind = u16::from_le_bytes(header.get(4..6)?.try_into().ok()?);
        if length < HEADER_LEN - 4 || rbuf.len() < at + 4 + length {
            return None;
        }
        if kind == FrameKind::Disconnect as u16 {
            return Some(u32::from_le_bytes(word(6)?));
        }
        at += 4 + length;
    }
    None
}

/// Whether frames of `kind` add messages (and so are held back under memory pressure).
fn is_publishing(kind: u16) -> bool {
    kind == FrameKind::Send as u16
        || kind == FrameKind::SendBatch as u16
        || kind == FrameKind::PublishBatch as u16
}

/// The length of a request's selector (what a pending request holds besides its frame).
fn selector_len(request: &Request) -> usize {
    match request {
        Request::Receive(r) => r.selector.len(),
        Request::Subscribe(s) => s.selector.len(),
        Request::SubscribeTopic(s) => s.options.selector.len(),
        _ => 0,
    }
}

/// Appends a reply; `None` means the handler sent its reply itself.
fn encode(buf: &mut BytesMut, request_id: u32, response: Option<&Response>) {
    if let Some(r) = response {
        r.encode(request_id, buf);
    }
}

/// Ends a session whose requests have all finished: stops its subscriptions, hands back what
/// it holds (auto-ack takes the writer did not settle, unsettled client-ack deliveries) and
/// frees its name. Once this returns nothing published goes to it any more, and its name can
/// connect again.
pub(crate) async fn end_session(shared: &Arc<Shared>, session: &Session) {
    let out = &session.out;
    out.close();
    session.cancel_all().await;
    let mut holders = vec![session.id];
    if out.stop_settling().await {
        holders.push(session.hold_id());
    }
    for holder in holders {
        match shared.store.sessions().release_session(holder).await {
            Ok(queues) => shared.wakers.notify(&queues),
            Err(e) => {
                warn!(client = %session.client, error = %e, "could not release the session's deliveries; client-ack ones return when their leases expire, auto-ack ones when the broker restarts")
            }
        }
    }
    for consumer in session.take_topic_consumers() {
        crate::handlers::subscribe::end_topic_consumer(shared, consumer).await;
    }
    free_name(shared, &session.client, session.id).await;
}

/// Frees the client name in the store, then locally. When the store cannot be reached, a task
/// keeps trying (with backoff, until shutdown) so that the name does not stay claimed.
async fn free_name(shared: &Arc<Shared>, client: &str, session: SessionId) {
    if let Err(e) = shared.store.sessions().end_session(client, session).await {
        warn!(%client, error = %e, "could not end the session in the store; retrying in the background");
        let shared = shared.clone();
        let client = client.to_owned();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shared.shutdown.cancelled() => return,
                }
                if shared
                    .store
                    .sessions()
                    .end_session(&client, session)
                    .await
                    .is_ok()
                {
                    shared.release_client(&client, session);
                    return;
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
        return;
    }
    shared.release_client(client, session);
}

fn log_close(shared: &Shared, peer: &str, client: Option<&str>, reason: &CloseReason) {
    let kind = reason.kind();
    shared.stats.count_close(kind);
    let label = kind.label();
    let stats = &shared.stats;
    match (client, reason) {
        (_, CloseReason::Malformed(e)) => {
            Stats::add(&stats.connections_closed_malformed, 1);
            let client = client.unwrap_or("-");
            warn!(%peer, %client, reason = %e, "closing connection: malformed frame");
        }
        (Some(client), CloseReason::Fenced) => warn!(
            %peer,
            %client,
            "closing connection: this node was taken for dead, so its session no longer holds the client name"
        ),
        // Closed by a limit: said at warn (idle sessions at info), as they happen.
        (Some(client), CloseReason::Idle(after)) => {
            Stats::add(&stats.connections_closed_idle, 1);
            info!(%peer, %client, silent_ms = after.as_millis() as u64, "closing connection: no request for 1.5 keep-alive intervals");
        }
        (Some(client), CloseReason::ReadTimeout(after)) => {
            Stats::add(&stats.connections_closed_read_timeout, 1);
            warn!(%peer, %client, timeout_ms = after.as_millis() as u64, "closing connection: a request took longer than the read timeout to arrive, or waited that long behind the connection's request budgets");
        }
        (Some(client), CloseReason::Write(failure)) => {
            Stats::add(&stats.connections_closed_write, 1);
            warn!(%peer, %client, reason = %failure.reason, "closing connection");
        }
        // One line per session at info, rate-limited under storms of sessions.
        (Some(client), _) => {
            if let Some(left_out) = shared.session_logs.admit() {
                match reason {
                    CloseReason::Io(e) => {
                        info!(%peer, %client, reason = label, error = %e, left_out, "session closed")
                    }
                    _ => info!(%peer, %client, reason = label, left_out, "session closed"),
                }
            }
        }
        (None, CloseReason::Io(e)) => {
            debug!(%peer, error = %e, "connection closed by I/O error before connect")
        }
        (None, CloseReason::HandshakeTimeout) => {
            Stats::add(&stats.connections_closed_read_timeout, 1);
            info!(%peer, "closing connection: no connect request in time")
        }
        (None, CloseReason::Refused(code)) => {
            info!(%peer, %code, "closing connection: connect refused")
        }
        (None, CloseReason::Write(failure)) => {
            Stats::add(&stats.connections_closed_write, 1);
            info!(%peer, reason = %failure.reason, "closing connection before connect");
        }
        (None, _) => debug!(%peer, ?reason, "connection closed before connect"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disconnect_is_found_behind_other_frames_and_not_in_a_partial_one() {
        let mut buf = BytesMut::new();
        Request::Ping.encode(1, &mut buf);
        Request::ListQueues.encode(2, &mut buf);
        assert_eq!(find_disconnect(&buf), None);
        Request::Disconnect.encode(3, &mut buf);
        Request::Ping.encode(4, &mut buf);
        assert_eq!(find_disconnect(&buf), Some(3));
        let whole = buf.len();
        let mut partial = BytesMut::new();
        Request::Ping.encode(1, &mut partial);
        let cut = partial.len();
        Request::Disconnect.encode(9, &mut partial);
        assert_eq!(find_disconnect(&partial[..cut + 5]), None);
        assert_eq!(find_disconnect(&buf[..whole - 1]), Some(3));
        // A bad length stops the walk (the frame is malformed; reading it says so).
        assert_eq!(find_disconnect(&[1, 0, 0, 0, 2, 0, 3, 0, 0, 0]), None);
    }
}
