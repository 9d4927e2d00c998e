//! One STOMP connection: the CONNECT handshake, then frames in order until the connection
//! ends, each carried out on the connection's broker session (see [`crate::gateway`]).
//!
//! - **Order and pipelining.** SEND, ACK and NACK start as they are read (a producer that
//!   asks for no receipts is not held up by the disk), and their outcomes, receipts or an
//!   ERROR, are reported in frame order. Every other frame waits until the frames before it
//!   have finished. At most `max_pending` frames are in progress; past that the connection
//!   stops reading until one finishes.
//! - **Errors.** A malformed frame, a frame over a limit, or a refused operation is answered
//!   with an ERROR frame (`message` header, details in the body, `receipt-id` when the frame
//!   asked for a receipt), and the connection is closed, as the specification says.
//! - **Liveness.** With heart-beating negotiated, a connection silent for twice the client's
//!   interval is closed; a frame that has started arriving must end within the read timeout.
//! - **The end.** However the connection ends, its subscriptions stop and its broker session
//!   ends at once (client-ack deliveries not acknowledged go back to their queues).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use ferry_broker::local::{LocalSession, SessionRequest};
use ferry_protocol::requests::{Subscribe, SubscribeTopic};
use ferry_protocol::{
    AckMode, ErrorCode, Order, OutgoingMessage, QueueOptions, Request, Response, SubscriptionId,
};
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::{FutureExt, StreamExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info};

use super::acks::Acks;
pub(crate) use super::failure::Failure;
use super::mapping::{self, Destination};
use super::sender;
use super::subscription::{Mode, StompEncoder};
use super::wire::{ByteSource, FrameSink};
use super::{writer, Inner};
use crate::codec::{self, negotiate, Command, Frame, Item, Scanner, Version};
use crate::login;

mod handshake;
mod subscribing;

use handshake::{accept, malformed, read_connect, refuse, Accepted};
use subscribing::ensure;

/// How a frame's work ended: its receipt to send, or the ERROR that closes the connection.
type Outcome = Result<Option<String>, Failure>;

/// How a connection ended, for the logs.
enum Ending {
    /// The client sent DISCONNECT (with this receipt to send once the session has ended).
    Disconnected(Option<String>),
    /// The client closed its side, or the socket failed.
    Gone(String),
    /// Closed with an ERROR frame.
    Failed(Failure),
}

/// Serves one STOMP connection from `src` / `sink` until it ends.
pub(crate) async fn serve<S: ByteSource, W: FrameSink>(
    gw: Arc<Inner>,
    mut src: S,
    sink: W,
    peer: String,
    ip: Option<IpAddr>,
) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut scanner = Scanner::default();
    let handshake = tokio::time::timeout(
        gw.settings.connect_timeout,
        read_connect(&gw, &mut src, &mut buf, &mut scanner),
    )
    .await
    .unwrap_or_else(|_| {
        Err(Failure::new(
            "no CONNECT frame in time",
            format!(
                "a connection must send CONNECT or STOMP within {} ms",
                gw.settings.connect_timeout.as_millis()
            ),
        ))
    });
    let connect = match handshake {
        Ok(f) => f,
        Err(failure) => {
            refuse(sink, failure, &gw).await;
            return;
        }
    };
    let accepted = match accept(&gw, &connect, &peer, ip).await {
        Ok(a) => a,
        Err(failure) => {
            refuse(sink, failure, &gw).await;
            return;
        }
    };
    let Accepted {
        session,
        pushes,
        version,
        send_every,
        expect_every,
        connected,
        generated,
    } = accepted;
    let session = Arc::new(session);
    let client = session.client().to_owned();
    let last_write = writer::LastWrite::new();
    session.send_frames(mapping::encode(&connected, version));
    let writer = tokio::spawn(writer::run(
        sink,
        pushes,
        gw.settings.write_timeout,
        last_write.clone(),
    ));
    let beats = send_every
        .map(|every| tokio::spawn(writer::heartbeats(session.clone(), every, last_write)));
    debug!(%peer, %client, version = version.as_str(), generated, "STOMP session opened");
    let mut conn = Conn {
        gw: gw.clone(),
        session: session.clone(),
        version,
        subs: HashMap::new(),
        next_slot: 1,
        acks: Arc::new(Mutex::new(Acks::default())),
        txn: None,
        pending: FuturesOrdered::new(),
        out_buf: BytesMut::new(),
        known: HashSet::new(),
    };
    let ending = conn
        .run(&mut src, &mut buf, &mut scanner, expect_every)
        .await;
    conn.flush();
    // The session ends first (subscriptions stop, unacknowledged deliveries go back), then the
    // client hears how it ended.
    let last_frame = match &ending {
        Ending::Failed(f) => Some(mapping::error(
            &f.message,
            &f.details,
            f.receipt.as_deref(),
            version,
        )),
        Ending::Disconnected(Some(receipt)) => Some(receipt_frame(receipt)),
        _ => None,
    };
    conn.stop_subscriptions().await;
    drop(conn);
    if let Some(b) = beats {
        b.abort();
    }
    end_session(&session).await;
    let write_timeout = gw.settings.write_timeout;
    if let Ok(Ok(mut sink)) = tokio::time::timeout(write_timeout, writer).await {
        if let Some(frame) = last_frame {
            let _ = tokio::time::timeout(
                write_timeout,
                sink.write(&[mapping::encode(&frame, version)]),
            )
            .await;
        }
        let _ = tokio::time::timeout(write_timeout, sink.close()).await;
    }
    match ending {
        Ending::Disconnected(_) => debug!(%peer, %client, "STOMP session closed"),
        Ending::Gone(why) => debug!(%peer, %client, %why, "STOMP connection gone"),
        Ending::Failed(f) => {
            info!(%peer, %client, reason = %f.message, "STOMP connection closed with an ERROR frame")
        }
    }
}

/// Ends the broker session: at once, and before anything else is written to the client.
async fn end_session(session: &LocalSession) {
    session.end().await;
}

/// A running subscription.
struct Sub {
    /// How it runs: a broker subscription, or a task receiving by sender.
    runs: Runs,
    /// Its MESSAGE frames (and whether the broker ended it).
    encoder: Arc<StompEncoder>,
    /// The topic and name of a named topic subscription (UNSUBSCRIBE may remove it).
    named: Option<(String, String)>,
}

enum Runs {
    /// A push subscription of the session.
    Broker(SubscriptionId),
    /// `/sender/NAME`: a task receiving by sender (see [`sender`]).
    Task(JoinHandle<()>),
}

/// A connected session's state.
struct Conn {
    gw: Arc<Inner>,
    session: Arc<LocalSession>,
    version: Version,
    subs: HashMap<String, Sub>,
    /// Numbers the connection's subscriptions (for [`Acks`]).
    next_slot: u64,
    acks: Arc<Mutex<Acks>>,
    /// The open transaction's name.
    txn: Option<String>,
    /// Frames in progress, in frame order.
    pending: FuturesOrdered<BoxFuture<'static, Outcome>>,
    /// Receipts (and other small frames) of the frames finished since the last flush: they
    /// go to the writer together, once per read.
    out_buf: BytesMut,
    /// Destinations this connection has made sure exist (auto-create).
    known: HashSet<Destination>,
}

impl Conn {
    async fn run<S: ByteSource>(
        &mut self,
        src: &mut S,
        buf: &mut BytesMut,
        scanner: &mut Scanner,
        expect_every: Option<Duration>,
    ) -> Ending {
        let closing = self.session.closing();
        let operator = self.session.closed_by_operator();
        let read_timeout = self.gw.settings.read_timeout;
        let mut last_seen = Instant::now();
        let mut partial_since: Option<Instant> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            loop {
                if self.pending.len() >= self.gw.settings.max_pending {
                    if let Some(outcome) = self.pending.next().await {
                        if let Err(f) = self.report(outcome).await {
                            return Ending::Failed(f);
                        }
                    }
                    continue;
                }
                if !self.session.has_room() {
                    // The client reads less than it asks for: no more frames until it does.
                    tokio::select! {
                        _ = self.session.wait_for_room() => {}
                        _ = closing.cancelled() => return self.closed(),
                        _ = operator.cancelled() => return operator_closed(),
                    }
                    continue;
                }
                match codec::decode_with(scanner, buf, self.version, &self.gw.limits) {
                    Ok(Some(Item::Heartbeat)) => last_seen = Instant::now(),
                    Ok(Some(Item::Frame(f))) => {
                        last_seen = Instant::now();
                        match self.frame(f).await {
                            Ok(None) => {}
                            Ok(Some(receipt)) => return Ending::Disconnected(receipt),
                            Err(failure) => return Ending::Failed(failure),
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return Ending::Failed(malformed(&e)),
                }
            }
            self.flush();
            partial_since = match (buf.is_empty(), partial_since) {
                (true, _) => None,
                (false, None) => Some(Instant::now()),
                (false, since) => since,
            };
            tokio::select! {
                Some(outcome) = self.pending.next(), if !self.pending.is_empty() => {
                    if let Err(f) = self.report(outcome).await {
                        return Ending::Failed(f);
                    }
                    // Sends finish together (one group commit): their receipts go out in one
                    // write, not one write (and one wake-up of the writer) each.
                    while let Some(Some(outcome)) = self.pending.next().now_or_never() {
                        if let Err(f) = self.report(outcome).await {
                            return Ending::Failed(f);
                        }
                    }
                }
                read = src.read(buf) => match read {
                    Ok(0) => return Ending::Gone("the client closed the connection".into()),
                    Ok(_) => {}
                    Err(e) => return Ending::Gone(format!("read failed: {e}")),
                },
                _ = tick.tick() => {
                    let now = Instant::now();
                    if let Some(every) = expect_every {
                        if now.duration_since(last_seen) > every {
                            return Ending::Failed(Failure::new(
                                "no heart-beat from the client",
                                format!("nothing arrived for {} ms, twice the heart-beat interval agreed", every.as_millis()),
                            ));
                        }
                    }
                    if partial_since.is_some_and(|t| now.duration_since(t) > read_timeout) {
                        return Ending::Failed(Failure::new(
                            "frame not completed in time",
                            format!("a frame started arriving but did not end within {} ms", read_timeout.as_millis()),
                        ));
                    }
                    if let Some(f) = self.ended_subscription() {
                        return Ending::Failed(f);
                    }
                }
                _ = closing.cancelled() => return self.closed(),
                _ = operator.cancelled() => return operator_closed(),
            }
        }
    }

    /// How the connection ends when its session started ending without it: the broker shuts
    /// down, or the writer gave up on the client.
    fn closed(&self) -> Ending {
        if self.gw.sessions.shutdown_token().is_cancelled() {
            return Ending::Failed(Failure::new("the broker is shutting down", ""));
        }
        Ending::Gone("the client took nothing for the write timeout, or its socket failed".into())
    }

    /// The failure of a subscription the broker ended (its queue was deleted), if one did.
    fn ended_subscription(&self) -> Option<Failure> {
        self.subs.iter().find_map(|(id, sub)| {
            sub.encoder.ended().is_cancelled().then(|| {
                let why = sub
                    .encoder
                    .reason()
                    .map_or_else(|| "ended by the broker".to_owned(), |e| e.message);
                Failure::new(
                    format!("subscription '{id}' ended: {why}"),
                    "the broker ended the subscription (its queue or topic was deleted, or the store refused)",
                )
            })
        })
    }

    /// Sends the receipt of a finished frame, or returns its failure.
    async fn report(&mut self, outcome: Outcome) -> Result<(), Failure> {
        if let Some(receipt) = outcome? {
            mapping::put_receipt(&mut self.out_buf, &receipt, self.version);
        }
        Ok(())
    }

    async fn write(&mut self, frame: Frame) {
        self.flush();
        self.session
            .send_frames(mapping::encode(&frame, self.version));
    }

    /// Queues what [`Conn::report`] gathered.
    fn flush(&mut self) {
        if !self.out_buf.is_empty() {
            self.session.send_frames(self.out_buf.split().freeze());
        }
    }

    /// Waits for every frame in progress (their receipts go out).
    async fn barrier(&mut self) -> Result<(), Failure> {
        while let Some(outcome) = self.pending.next().await {
            self.report(outcome).await?;
        }
        Ok(())
    }

    /// Starts (or runs) one frame. `Ok(Some(receipt))` after DISCONNECT.
    async fn frame(&mut self, f: Frame) -> Result<Option<Option<String>>, Failure> {
        let receipt = f.header("receipt").map(str::to_owned);
        let result = match f.command {
            Command::Send => self.send(&f, receipt.clone()).await,
            Command::Ack | Command::Nack => self.settle(&f, receipt.clone()).await,
            Command::Subscribe => self.subscribe(&f, receipt.clone()).await,
            Command::Unsubscribe => self.unsubscribe(&f, receipt.clone()).await,
            Command::Begin | Command::Commit | Command::Abort => {
                self.transaction(&f, receipt.clone()).await
            }
            Command::Disconnect => {
                self.barrier().await?;
                return Ok(Some(receipt));
            }
            Command::Connect | Command::Stomp => Err(Failure::new(
                "already connected",
                "CONNECT and STOMP are only allowed as the first frame",
            )),
            other => Err(Failure::new(
                format!("{} is a server frame", other.as_str()),
                "clients send CONNECT, STOMP, SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT, ABORT and DISCONNECT",
            )),
        };
        result.map_err(|e| e.with_receipt(receipt))?;
        Ok(None)
    }

    /// Checks a frame's `transaction` header against the open transaction.
    fn check_txn(&self, f: &Frame) -> Result<(), Failure> {
        match (f.header("transaction"), &self.txn) {
            (None, None) => Ok(()),
            (Some(t), Some(open)) if t == open => Ok(()),
            (Some(t), _) => Err(Failure::new(
                format!("no open transaction '{t}'"),
                "BEGIN the transaction first; a connection has at most one open at a time",
            )),
            (None, Some(open)) => Err(Failure::new(
                format!("transaction '{open}' is open"),
                "while a transaction is open, every SEND, ACK and NACK of the connection belongs to it and must name it in its transaction header",
            )),
        }
    }

    async fn send(&mut self, f: &Frame, receipt: Option<String>) -> Result<(), Failure> {
        let dest_text = required(f, "destination")?;
        let dest = Destination::parse(dest_text).map_err(|e| Failure::new(e, ""))?;
        self.check_txn(f)?;
        let msg = mapping::outgoing(f, &dest, now_ms()).map_err(|e| Failure::new(e, ""))?;
        if self.gw.settings.auto_create && !self.known.contains(&dest) {
            self.barrier().await?;
            ensure(&self.session, &dest).await?;
            self.known.insert(dest.clone());
        }
        self.start(send_op(self.session.clone(), msg, receipt))
            .await
    }

    /// Starts a frame's work: polled once now, so it reaches the broker in frame order; its
    /// outcome is reported in frame order.
    async fn start(&mut self, mut op: BoxFuture<'static, Outcome>) -> Result<(), Failure> {
        match (&mut op).now_or_never() {
            Some(outcome) if self.pending.is_empty() => self.report(outcome).await,
            Some(outcome) => {
                self.pending
                    .push_back(futures::future::ready(outcome).boxed());
                Ok(())
            }
            None => {
                self.pending.push_back(op);
                Ok(())
            }
        }
    }

    async fn settle(&mut self, f: &Frame, receipt: Option<String>) -> Result<(), Failure> {
        let key_header = if self.version == Version::V1_2 {
            "id"
        } else {
            "message-id"
        };
        let key = required(f, key_header)?;
        self.check_txn(f)?;
        let ids = key
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|k| self.acks.lock().unwrap_or_else(|p| p.into_inner()).take(k))
            .ok_or_else(|| {
                Failure::new(
                    format!("no unacknowledged message with {key_header} '{key}'"),
                    "ACK and NACK name a message delivered to this connection in a client or client-individual subscription, and not yet acknowledged",
                )
            })?;
        let session = self.session.clone();
        let nack = f.command == Command::Nack;
        let op = async move {
            let request = if nack {
                Request::Nack { ids, requeue: true }
            } else {
                Request::Ack { ids }
            };
            match session.request(request).await {
                Response::Ok => Ok(receipt),
                other => Err(
                    Failure::unexpected(if nack { "NACK" } else { "ACK" }, &other)
                        .with_receipt(receipt),
                ),
            }
        };
        self.start(op.boxed()).await
    }

    async fn transaction(&mut self, f: &Frame, receipt: Option<String>) -> Result<(), Failure> {
        self.barrier().await?;
        let name = required(f, "transaction")?.to_owned();
        let session = self.session.clone();
        let run = |request: Request, what: &'static str| async move {
            match session.request(request).await {
                Response::Ok | Response::Committed { .. } => Ok(()),
                other => Err(Failure::unexpected(what, &other)),
            }
        };
        match f.command {
            Command::Begin => {
                if let Some(open) = &self.txn {
                    return Err(Failure::new(
                        format!("transaction '{open}' is open"),
                        "a connection has at most one open transaction at a time",
                    ));
                }
                run(Request::TxnBegin, "BEGIN").await?;
                self.txn = Some(name);
            }
            _ => {
                if self.txn.as_deref() != Some(name.as_str()) {
                    return Err(Failure::new(format!("no open transaction '{name}'"), ""));
                }
                self.txn = None;
                if f.command == Command::Commit {
                    run(Request::TxnCommit, "COMMIT").await?;
                } else {
                    run(Request::TxnRollback, "ABORT").await?;
                }
            }
        }
        if let Some(r) = receipt {
            self.write(receipt_frame(&r)).await;
        }
        Ok(())
    }

    /// Stops every subscription's task (the session's end stops its broker subscriptions).
    async fn stop_subscriptions(&mut self) {
        for (_, sub) in self.subs.drain() {
            if let Runs::Task(task) = sub.runs {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

/// A SEND's work: the message reaches the broker on the first poll.
fn send_op(
    session: Arc<LocalSession>,
    msg: OutgoingMessage,
    receipt: Option<String>,
) -> BoxFuture<'static, Outcome> {
    async move {
        match session.request(Request::Send(msg)).await {
            Response::Sent { .. } | Response::Ok => Ok(receipt),
            other => Err(Failure::unexpected("SEND", &other).with_receipt(receipt)),
        }
    }
    .boxed()
}

/// How a connection ends when an operator closed its session.
fn operator_closed() -> Ending {
    Ending::Failed(Failure::new(
        "closed by an operator",
        "an operator closed this session; messages not acknowledged go back to their queues",
    ))
}

fn required<'f>(f: &'f Frame, name: &str) -> Result<&'f str, Failure> {
    f.header(name).ok_or_else(|| {
        Failure::new(
            format!("missing header '{name}'"),
            format!("{} needs a {name} header", f.command.as_str()),
        )
    })
}

fn receipt_frame(receipt: &str) -> Frame {
    Frame::new(Command::Receipt).header_with("receipt-id", receipt)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
