//! One client connection: frames in, responses and pushes out.
//!
//! The reader loop cuts frames with [`split_frame`] (which checks the length against the limit
//! before buffering), decodes them and runs each request as a future. Requests run concurrently
//! (pipelining), up to `max_pipelined` at a time; each future is polled once as soon as it is
//! created, so requests that take effect on their first poll (embedded-store sends) do so in
//! arrival order. Responses and pushes go to a writer task that writes whatever has queued up in
//! one system call, so pipelined clients are not throttled by one write per frame.

use std::collections::VecDeque;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use ferry_protocol::requests::Connect;
use ferry_protocol::responses::Connected;
use ferry_protocol::{
    split_frame, ErrorCode, RawFrame, Request, Response, WireError, PROTOCOL_VERSION,
};
use ferry_store::SessionId;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tracing::{debug, info, warn};

use crate::dispatch::dispatch;
use crate::handlers::validate;
use crate::session::{Outbound, Session};
use crate::shared::Shared;
use crate::stats::{CloseKind, Stats};

/// How long a new connection may take to send its connect request.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Writer batches are cut at about this size.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// Frames below this size are copied into the writer's batch buffer; bigger ones are written
/// from where they are.
const COPY_BELOW: usize = 16 * 1024;
/// Most buffers handed to one vectored write.
const MAX_IOVECS: usize = 64;

/// A request being served. It borrows the connection's `Shared` and `Session` instead of
/// holding clones: an `Arc` clone per request would bounce the reference counts between the
/// runtime's threads on every request.
type RequestFuture<'a> = Pin<Box<dyn Future<Output = (u32, Option<Response>)> + Send + 'a>>;

/// Why a connection ended, for the logs.
#[derive(Debug)]
enum CloseReason {
    PeerClosed,
    Disconnected,
    Malformed(WireError),
    Io(std::io::Error),
    HandshakeTimeout,
    Refused(ErrorCode),
    Shutdown,
    /// The node was taken for dead by the others: its sessions no longer own their names.
    Fenced,
    /// An operator closed the session (management API).
    Operator,
}

impl CloseReason {
    /// The kind counted for operators.
    fn kind(&self) -> CloseKind {
        match self {
            CloseReason::PeerClosed | CloseReason::Disconnected => CloseKind::ClientClosed,
            CloseReason::Malformed(_) => CloseKind::ProtocolError,
            CloseReason::Io(_) => CloseKind::IoError,
            CloseReason::HandshakeTimeout => CloseKind::Idle,
            CloseReason::Refused(ErrorCode::Unauthorized) => CloseKind::AuthFailure,
            CloseReason::Refused(_) => CloseKind::ProtocolError,
            CloseReason::Shutdown | CloseReason::Fenced => CloseKind::Shutdown,
            CloseReason::Operator => CloseKind::Operator,
        }
    }
}

/// Writes everything queued on `rx` to the socket, batching frames that queued up meanwhile.
///
/// Small frames (replies) are copied into one buffer so that many go out in one system call;
/// big ones (push batches of many deliveries) are written as they are with vectored writes,
/// so their bytes are not copied again.
async fn write_loop(mut wr: OwnedWriteHalf, mut rx: UnboundedReceiver<Bytes>) {
    let mut small = BytesMut::with_capacity(64 * 1024);
    let mut chunks: VecDeque<Bytes> = VecDeque::with_capacity(MAX_IOVECS);
    while let Some(first) = rx.recv().await {
        let mut queued = first.len();
        gather(&mut small, &mut chunks, first);
        while queued < WRITE_BATCH_BYTES && chunks.len() + 2 < MAX_IOVECS {
            match rx.try_recv() {
                Ok(more) => {
                    queued += more.len();
                    gather(&mut small, &mut chunks, more);
                }
                Err(_) => break,
            }
        }
        if !small.is_empty() {
            chunks.push_back(small.split().freeze());
        }
        if let Err(e) = write_chunks(&mut wr, &mut chunks).await {
            debug!(error = %e, "write failed; dropping the connection's output");
            return;
        }
    }
    let _ = wr.shutdown().await;
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

/// Writes every chunk, in order, with as few system calls as the socket allows.
async fn write_chunks(
    wr: &mut OwnedWriteHalf,
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

/// Appends a reply; `None` means the handler sent its reply itself.
fn encode(buf: &mut BytesMut, request_id: u32, response: Option<&Response>) {
    if let Some(r) = response {
        r.encode(request_id, buf);
    }
}

/// Serves one accepted connection until it closes. `_permit` holds a connection slot.
pub async fn serve(
    shared: Arc<Shared>,
    stream: TcpStream,
    _permit: tokio::sync::OwnedSemaphorePermit,
) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "unknown".into());
    let _ = stream.set_nodelay(true);
    // Watched from before the handshake: a session started before a fence must end with it.
    let mut fence = shared.watch_fence();
    let (mut rd, wr) = stream.into_split();
    let (out, rx) = unbounded_channel::<Bytes>();
    let writer = tokio::spawn(write_loop(wr, rx));
    let mut rbuf = BytesMut::with_capacity(64 * 1024);
    let max_frame = shared.limits.max_frame_bytes;

    // Handshake: the first frame must be a connect.
    let session = match handshake(&shared, &mut rd, &mut rbuf, &out).await {
        Ok(s) => s,
        Err(reason) => {
            log_close(&shared, &peer, None, &reason);
            drop(out);
            let _ = writer.await;
            return;
        }
    };
    Stats::add(&shared.stats.sessions_opened, 1);
    let registered = shared.sessions.register(&session, &peer, shared.now_ms());
    let operator = registered.closed_by_operator().clone();
    if let Some(left_out) = shared.session_logs.admit() {
        info!(%peer, client = %session.client, session = session.id, left_out, "session opened");
    }

    let mut inflight: FuturesUnordered<RequestFuture<'_>> = FuturesUnordered::new();
    let mut replies = BytesMut::with_capacity(64 * 1024);
    let mut closing: Option<CloseReason> = None;
    let mut disconnect_id: Option<u32> = None;
    let max_pipelined = shared.max_pipelined;
    loop {
        if closing.is_some() && inflight.is_empty() {
            break;
        }
        tokio::select! {
            Some((rid, resp)) = inflight.next(), if !inflight.is_empty() => {
                encode(&mut replies, rid, resp.as_ref());
                while let Some(Some((rid, resp))) = inflight.next().now_or_never() {
                    encode(&mut replies, rid, resp.as_ref());
                }
            }
            read = rd.read_buf(&mut rbuf), if closing.is_none() && inflight.len() < max_pipelined => {
                match read {
                    Ok(0) => closing = Some(CloseReason::PeerClosed),
                    Err(e) => closing = Some(CloseReason::Io(e)),
                    Ok(_) => loop {
                        if inflight.len() >= max_pipelined {
                            break; // the rest stays buffered until requests finish
                        }
                        match split_frame(&mut rbuf, max_frame) {
                            Ok(Some(frame)) => {
                                if let Some(reason) = handle_frame(&shared, &session, frame, &mut inflight, &mut replies, &mut disconnect_id).await {
                                    closing = Some(reason);
                                    break;
                                }
                            }
                            Ok(None) => {
                                rbuf.reserve(16 * 1024);
                                break;
                            }
                            Err(e) => {
                                closing = Some(CloseReason::Malformed(e));
                                break;
                            }
                        }
                    },
                }
            }
            _ = shared.shutdown.cancelled(), if closing.is_none() => {
                closing = Some(CloseReason::Shutdown);
            }
            _ = fence.changed(), if closing.is_none() => {
                closing = Some(CloseReason::Fenced);
            }
            _ = operator.cancelled(), if closing.is_none() => {
                closing = Some(CloseReason::Operator);
            }
        }
        if !replies.is_empty() {
            Stats::add(&shared.stats.requests, 1);
            let _ = out.send(replies.split().freeze());
        }
    }
    // Empty by now (the loop ends only then); dropped here because its futures borrow
    // `session`, which the teardown below gives up.
    drop(inflight);
    // Session teardown: stop pushing, hand unsettled deliveries back, free the name. A
    // disconnect is answered after it, so that once the client has the answer nothing published
    // goes to this session any more and its name can connect again.
    session.cancel_all().await;
    match shared.store.release_session(session.id).await {
        Ok(queues) => shared.wakers.notify(&queues),
        Err(e) => {
            warn!(client = %session.client, error = %e, "could not release the session's deliveries; they return when their leases expire")
        }
    }
    for consumer in session.take_topic_consumers() {
        crate::handlers::subscribe::end_topic_consumer(&shared, consumer).await;
    }
    end_session(&shared, &session.client, session.id).await;
    if let Some(rid) = disconnect_id {
        encode(&mut replies, rid, Some(&Response::Ok));
        let _ = out.send(replies.split().freeze());
    }
    let reason = closing.unwrap_or(CloseReason::PeerClosed);
    log_close(&shared, &peer, Some(&session.client), &reason);
    drop(registered);
    drop(session);
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
}

/// Decodes and starts one request. Returns a reason when the connection must close.
async fn handle_frame<'a>(
    shared: &'a Arc<Shared>,
    session: &'a Arc<Session>,
    frame: RawFrame,
    inflight: &mut FuturesUnordered<RequestFuture<'a>>,
    replies: &mut BytesMut,
    disconnect_id: &mut Option<u32>,
) -> Option<CloseReason> {
    let rid = frame.request_id;
    let request = match Request::decode(&frame) {
        Ok(r) => r,
        Err(WireError::UnknownKind(kind)) => {
            encode(
                replies,
                rid,
                Some(&Response::error(
                    ErrorCode::UnknownRequest,
                    format!("unknown request type {kind:#06x}"),
                )),
            );
            return None;
        }
        Err(e) => return Some(CloseReason::Malformed(e)),
    };
    if let Request::Disconnect = request {
        *disconnect_id = Some(rid);
        return Some(CloseReason::Disconnected);
    }
    let mut fut: RequestFuture<'a> =
        Box::pin(async move { (rid, dispatch(shared, session, rid, request).await) });
    // Poll once now, so the request takes effect in arrival order; most finish right here or
    // wait only for the store's group commit.
    match futures::poll!(fut.as_mut()) {
        Poll::Ready((rid, resp)) => encode(replies, rid, resp.as_ref()),
        Poll::Pending => inflight.push(fut),
    }
    None
}

/// Reads frames until the connect request and answers it. Frames before connect get
/// `Unauthorized`; a refused connect keeps the connection open for another try, except
/// `UnsupportedVersion`, which closes it.
async fn handshake(
    shared: &Arc<Shared>,
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    rbuf: &mut BytesMut,
    out: &Outbound,
) -> Result<Arc<Session>, CloseReason> {
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        let frame = loop {
            match split_frame(rbuf, shared.limits.max_frame_bytes) {
                Ok(Some(f)) => break f,
                Ok(None) => {}
                Err(e) => return Err(CloseReason::Malformed(e)),
            }
            tokio::select! {
                r = rd.read_buf(rbuf) => match r {
                    Ok(0) => return Err(CloseReason::PeerClosed),
                    Ok(_) => {}
                    Err(e) => return Err(CloseReason::Io(e)),
                },
                _ = tokio::time::sleep_until(deadline) => return Err(CloseReason::HandshakeTimeout),
                _ = shared.shutdown.cancelled() => return Err(CloseReason::Shutdown),
            }
        };
        let rid = frame.request_id;
        let reply = |resp: Response| {
            let mut b = BytesMut::new();
            resp.encode(rid, &mut b);
            let _ = out.send(b.freeze());
        };
        match Request::decode(&frame) {
            Ok(Request::Connect(c)) => match connect(shared, c, out).await {
                Ok(session) => {
                    reply(Response::Connected(Connected {
                        version: PROTOCOL_VERSION,
                        client: session.client.clone(),
                        limits: shared.limits,
                    }));
                    return Ok(session);
                }
                Err(resp) => {
                    let fatal = matches!(&resp, Response::Error(e) if e.code == ErrorCode::UnsupportedVersion);
                    reply(resp);
                    if fatal {
                        return Err(CloseReason::Refused(ErrorCode::UnsupportedVersion));
                    }
                }
            },
            Ok(Request::Disconnect) => {
                reply(Response::Ok);
                return Err(CloseReason::Disconnected);
            }
            Ok(Request::Ping) => reply(Response::Pong),
            Ok(_) => reply(Response::error(
                ErrorCode::Unauthorized,
                "connect first: this connection has no session",
            )),
            Err(WireError::UnknownKind(kind)) => reply(Response::error(
                ErrorCode::UnknownRequest,
                format!("unknown request type {kind:#06x}"),
            )),
            Err(e) => return Err(CloseReason::Malformed(e)),
        }
    }
}

/// Checks a connect request and starts the session, or returns the error response.
async fn connect(
    shared: &Arc<Shared>,
    c: Connect,
    out: &Outbound,
) -> Result<Arc<Session>, Response> {
    if c.version != PROTOCOL_VERSION {
        return Err(Response::error(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this broker speaks version {PROTOCOL_VERSION}",
                c.version
            ),
        ));
    }
    validate::name("client", &c.client, &shared.limits).map_err(Response::Error)?;
    let Some(session_id) = shared.claim_client(&c.client) else {
        return Err(Response::error(
            ErrorCode::AlreadyOnline,
            format!("client '{}' is already online", c.client),
        ));
    };
    // The local map is the fast path; the store decides across every node sharing it (and
    // registers the name).
    let registration = ferry_store::Registration::Permanent;
    if let Err(e) = shared
        .store
        .claim_session(&c.client, session_id, registration)
        .await
    {
        shared.release_client(&c.client, session_id);
        return Err(crate::handlers::store_error(&e));
    }
    Ok(Arc::new(Session::new(session_id, c.client, out.clone())))
}

/// Frees the client name in the store, then locally. When the store cannot be reached, a task
/// keeps trying (with backoff, until shutdown) so that the name does not stay claimed.
async fn end_session(shared: &Arc<Shared>, client: &str, session: SessionId) {
    if let Err(e) = shared.store.end_session(client, session).await {
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
                if shared.store.end_session(&client, session).await.is_ok() {
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
    match (client, reason) {
        (_, CloseReason::Malformed(e)) => {
            Stats::add(&shared.stats.connections_closed_malformed, 1);
            let client = client.unwrap_or("-");
            warn!(%peer, %client, reason = %e, "closing connection: malformed frame");
        }
        (Some(client), CloseReason::Fenced) => warn!(
            %peer,
            %client,
            "closing connection: this node was taken for dead, so its session no longer holds the client name"
        ),
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
            info!(%peer, "closing connection: no connect request in time")
        }
        (None, CloseReason::Refused(code)) => {
            info!(%peer, %code, "closing connection: connect refused")
        }
        (None, _) => debug!(%peer, ?reason, "connection closed before connect"),
    }
}
