//! The gateway: a UDP socket, a bounded queue of parsed datagrams, and a publisher that turns
//! them into batched publishes on an in-process session of the broker.
//!
//! Two parts. The **reader**, a thread of its own blocked in `recv`, receives datagrams,
//! counts them, parses them and hands the good ones to the publisher through a queue: the
//! kernel wakes it as a datagram arrives, so it does not wait for a busy runtime's worker (a
//! datagram that finds the socket's buffer full is lost). The **publisher**, a task, takes the
//! datagrams waiting (up to
//! the broker's batch limit in records and [`MAX_BATCH_BYTES`]) and publishes their records in
//! one batch: one store write and, for persistent records, one fsync for all of them.
//!
//! Memory: every datagram the ingest holds, queued or in the batch being published, is charged
//! to one budget of [`UdpConfig::queue_bytes`] until its publish has returned; a datagram that
//! does not fit is dropped and counted, so a flood costs at most the budget (plus the socket's
//! receive buffer, which the kernel bounds, and the broker's copy of one batch) and the reader
//! never waits for the broker. Charging only the queue would not do: the publisher would empty
//! it into a batch of up to the broker's 10 000 records (a whole queue of large datagrams) and
//! the reader would fill it again while the batch is stored, holding twice the queue, and the
//! store's copy of such a batch as much again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_broker::local::LocalSession;
use ferry_broker::stats::{Stats, UdpStats};
use ferry_broker::RunningBroker;
use ferry_protocol::{ErrorCode, Name, OutgoingMessage, Request, Response};
use thiserror::Error;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::datagram::{self, Datagram, MAX_DATAGRAM};

/// The client name of the ingest's session (the sender of every record it publishes).
pub const CLIENT_NAME: &str = "ferry-udp-ingest";
/// Default [`UdpConfig::queue_bytes`]: 32 MiB (512 of the largest datagrams).
pub const DEFAULT_QUEUE_BYTES: usize = 32 << 20;
/// Most datagram bytes in one publish, which bounds the broker's copy of a batch: 4 MiB.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// What a queued datagram costs beyond its bytes (its entry, its topic's name), and each of its
/// records: so that a flood of tiny datagrams is bounded by the budget too.
const DATAGRAM_OVERHEAD: usize = 128;
const RECORD_OVERHEAD: usize = std::mem::size_of::<Bytes>();
/// Default [`UdpConfig::receive_buffer`]: the broker's `udp_receive_buffer` default.
pub const DEFAULT_RECEIVE_BUFFER: usize = ferry_broker::config::DEFAULT_UDP_RECEIVE_BUFFER as usize;
/// How often the reader looks whether it should stop while no datagram arrives.
const STOP_POLL: Duration = Duration::from_millis(100);
/// How often, at most, the gateway logs that it dropped datagrams.
const DROP_LOG_EVERY: Duration = Duration::from_secs(10);

/// The ingest's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Address to receive datagrams on (`HOST:PORT`; port 0 picks one).
    pub listen: String,
    /// The topic for datagrams that name none; created when missing. `None`: datagrams
    /// without a topic are dropped.
    pub topic: Option<String>,
    /// Publish records persistent (stored, fsynced as the broker's policy says) or not.
    pub persistent: bool,
    /// Bytes of datagrams the ingest holds at most, waiting for the publisher or being
    /// published; a datagram beyond it is dropped (each is charged its bytes, plus a little
    /// per datagram and per record).
    pub queue_bytes: usize,
    /// The socket's receive buffer asked of the kernel, which absorbs bursts while the reader
    /// is not scheduled. Beyond `net.core.rmem_max` it is forced when the broker may
    /// (`CAP_NET_ADMIN`), and otherwise capped there (with a warning).
    pub receive_buffer: usize,
    /// Publish as this user, with its grants: a datagram naming a topic the user may not
    /// send to is refused and dropped. `None`: the broker's operator, with every permission.
    pub user: Option<String>,
}

impl UdpConfig {
    /// The settings for `listen` and `topic`, non-persistent, with the default queue sizes.
    pub fn new(listen: impl Into<String>, topic: Option<String>) -> UdpConfig {
        UdpConfig {
            listen: listen.into(),
            topic,
            persistent: false,
            queue_bytes: DEFAULT_QUEUE_BYTES,
            receive_buffer: DEFAULT_RECEIVE_BUFFER,
            user: None,
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, Error)]
pub enum UdpError {
    /// The address could not be bound.
    #[error("cannot receive datagrams on {addr}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The broker refused the ingest's session or its topic.
    #[error("datagram ingest: {0}")]
    Broker(String),
}

/// A running datagram ingest. Stop it with [`UdpGateway::stop`] before the broker.
pub struct UdpGateway {
    addr: SocketAddr,
    cancel: CancellationToken,
    reader: std::thread::JoinHandle<()>,
    publisher: JoinHandle<()>,
    stats: Arc<Stats>,
}

/// A datagram on its way to the publisher.
struct Parsed {
    topic: Name,
    records: Vec<Bytes>,
    /// Its charge to the memory budget, given back once its publish has returned.
    charge: OwnedSemaphorePermit,
}

/// The ingest's socket, bound but not yet read: `ferry serve` binds it before the broker
/// starts, so that an address it cannot have stops the broker before any listener answers.
pub struct BoundUdp {
    socket: std::net::UdpSocket,
    addr: SocketAddr,
    config: UdpConfig,
}

impl BoundUdp {
    /// Binds `config.listen`.
    pub fn bind(config: UdpConfig) -> Result<BoundUdp, UdpError> {
        let failed = |source| UdpError::Bind {
            addr: config.listen.clone(),
            source,
        };
        let socket = bind(&config.listen, config.receive_buffer).map_err(failed)?;
        let addr = socket.local_addr().map_err(failed)?;
        Ok(BoundUdp {
            socket,
            addr,
            config,
        })
    }

    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl UdpGateway {
    /// Binds the socket, opens the ingest's session (creating the configured topic when
    /// missing) and starts receiving.
    pub async fn start(broker: &RunningBroker, config: UdpConfig) -> Result<UdpGateway, UdpError> {
        UdpGateway::start_bound(broker, BoundUdp::bind(config)?).await
    }

    /// Opens the ingest's session on `bound` (creating the configured topic when missing) and
    /// starts receiving.
    pub async fn start_bound(
        broker: &RunningBroker,
        bound: BoundUdp,
    ) -> Result<UdpGateway, UdpError> {
        let BoundUdp {
            socket,
            addr,
            config,
        } = bound;
        let session = match &config.user {
            Some(user) => broker.local_session_as(CLIENT_NAME, user).await,
            None => broker.local_session(CLIENT_NAME).await,
        }
        .map_err(|e| UdpError::Broker(e.message))?;
        if let Some(topic) = &config.topic {
            match session
                .request(Request::CreateTopic {
                    name: topic.clone(),
                })
                .await
            {
                Response::Ok => {}
                Response::Error(e) if e.code == ErrorCode::TopicExists => {}
                Response::Error(e) => {
                    session.close().await;
                    return Err(UdpError::Broker(e.message));
                }
                other => {
                    session.close().await;
                    return Err(UdpError::Broker(format!(
                        "unexpected reply to creating topic '{topic}': {:?}",
                        other.kind()
                    )));
                }
            }
        }
        let stats = broker.stats();
        let cancel = CancellationToken::new();
        // The budget bounds the queue: it needs no bound of its own.
        let (tx, rx) = mpsc::unbounded_channel();
        let budget = Arc::new(Semaphore::new(
            config.queue_bytes.clamp(1, Semaphore::MAX_PERMITS),
        ));
        let reader = {
            let (topic, stats, cancel) = (
                config.topic.clone().map(Name::from),
                stats.clone(),
                cancel.clone(),
            );
            std::thread::Builder::new()
                .name("ferry-udp-reader".into())
                .spawn(move || read_loop(socket, topic, tx, budget, stats, cancel))
                .map_err(|e| UdpError::Broker(format!("cannot start the reader thread: {e}")))?
        };
        let publisher = tokio::spawn(publish_loop(
            session,
            rx,
            config.persistent,
            broker_max_batch(broker),
            stats.clone(),
        ));
        info!(%addr, topic = ?config.topic, persistent = config.persistent, "datagram ingest listening");
        Ok(UdpGateway {
            addr,
            cancel,
            reader,
            publisher,
            stats,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops receiving, publishes what is queued, ends the session and logs the counters.
    pub async fn stop(self) {
        self.cancel.cancel();
        let reader = self.reader;
        let _ = tokio::task::spawn_blocking(move || reader.join()).await;
        // The reader held the queue's only sender: the publisher ends once it is drained.
        let _ = self.publisher.await;
        let u = &self.stats.udp;
        info!(
            received = Stats::get(&u.datagrams_received),
            malformed = Stats::get(&u.datagrams_malformed),
            dropped = Stats::get(&u.datagrams_dropped),
            records_published = Stats::get(&u.records_published),
            "datagram ingest stopped"
        );
    }
}

/// Most records per publish: the broker's batch limit.
fn broker_max_batch(broker: &RunningBroker) -> usize {
    broker.limits().max_batch as usize
}

/// A blocking UDP socket on `addr` with a receive buffer of `receive_buffer` bytes (forced past
/// the system's limit when the process may, else as granted), whose receives time out every
/// [`STOP_POLL`] so that the reader sees a stop.
fn bind(addr: &str, receive_buffer: usize) -> std::io::Result<std::net::UdpSocket> {
    use std::net::ToSocketAddrs;
    let addr = addr.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to bind")
    })?;
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    set_receive_buffer(&socket, receive_buffer);
    socket.set_read_timeout(Some(STOP_POLL))?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Asks for a receive buffer of `bytes`; past `net.core.rmem_max` the kernel grants the
/// limit, so it is forced (`SO_RCVBUFFORCE`, allowed with `CAP_NET_ADMIN`). A smaller buffer
/// than asked still works: it only absorbs less of a burst, which the warning says.
fn set_receive_buffer(socket: &socket2::Socket, bytes: usize) {
    let _ = socket.set_recv_buffer_size(bytes);
    // Linux reports twice the size set (the other half is its bookkeeping).
    let granted = |s: &socket2::Socket| s.recv_buffer_size().map_or(0, |b| b / 2);
    if granted(socket) < bytes {
        force_receive_buffer(socket, bytes);
    }
    let got = granted(socket);
    if got < bytes {
        warn!(
            asked = bytes,
            granted = got,
            "datagram ingest: the kernel granted a smaller receive buffer than asked (raise \
             net.core.rmem_max, or give the broker CAP_NET_ADMIN): bursts beyond it are lost"
        );
    } else {
        info!(bytes = got, "datagram ingest: receive buffer");
    }
}

#[cfg(target_os = "linux")]
fn force_receive_buffer(socket: &socket2::Socket, bytes: usize) {
    // Without the privilege it fails and leaves the buffer as it was.
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(socket, bytes);
}

#[cfg(not(target_os = "linux"))]
fn force_receive_buffer(_socket: &socket2::Socket, _bytes: usize) {}

/// Receives, counts and parses datagrams until cancelled; queues the good ones. Runs on a
/// thread of its own, blocked in `recv` (at most [`STOP_POLL`] at a time).
fn read_loop(
    socket: std::net::UdpSocket,
    topic: Option<Name>,
    queue: mpsc::UnboundedSender<Parsed>,
    budget: Arc<Semaphore>,
    stats: Arc<Stats>,
    cancel: CancellationToken,
) {
    let u = &stats.udp;
    // One buffer for every receive; each datagram is copied out at its own size, so a queued
    // datagram holds exactly its bytes (slices of a shared buffer would each keep the whole
    // buffer alive).
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let mut log = DropLog::default();
    loop {
        if cancel.is_cancelled() {
            return;
        }
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                // ICMP errors of earlier sends and the like: nothing to do but go on.
                warn!(error = %e, "datagram ingest: receive failed");
                continue;
            }
        };
        Stats::add(&u.datagrams_received, 1);
        // A datagram longer than the buffer would be cut short; the buffer takes the largest
        // one UDP carries plus a byte, so one that fills it was too long for IPv4 anyway.
        if n > MAX_DATAGRAM {
            Stats::add(&u.datagrams_malformed, 1);
            log.note(&stats, || {
                format!("{n} bytes from {from}: longer than {MAX_DATAGRAM}")
            });
            continue;
        }
        let data = Bytes::copy_from_slice(buf.get(..n).unwrap_or_default());
        let (topic, records) = match datagram::parse(&data) {
            Ok(Datagram {
                topic: named,
                records,
            }) => match named.map(Name::from).or_else(|| topic.clone()) {
                Some(topic) => (topic, records),
                None => {
                    Stats::add(&u.datagrams_malformed, 1);
                    log.note(&stats, || {
                        format!("from {from}: names no topic, and the ingest has no --udp-topic")
                    });
                    continue;
                }
            },
            Err(e) => {
                Stats::add(&u.datagrams_malformed, 1);
                log.note(&stats, || format!("from {from}: {e}"));
                continue;
            }
        };
        let cost = u32::try_from(charge(data.len(), records.len())).unwrap_or(u32::MAX);
        let Ok(charge) = budget.clone().try_acquire_many_owned(cost) else {
            Stats::add(&u.datagrams_dropped, 1);
            log.note(&stats, || {
                "the broker is behind: the ingest's memory budget is spent".to_owned()
            });
            continue;
        };
        let parsed = Parsed {
            topic,
            records,
            charge,
        };
        if queue.send(parsed).is_err() {
            return;
        }
    }
}

/// Publishes queued datagrams in batches until the queue closes, then ends the session.
async fn publish_loop(
    session: LocalSession,
    mut queue: mpsc::UnboundedReceiver<Parsed>,
    persistent: bool,
    max_batch: usize,
    stats: Arc<Stats>,
) {
    let mut log = DropLog::default();
    let mut pending: Option<Parsed> = None;
    loop {
        let first = match pending.take() {
            Some(p) => p,
            None => match queue.recv().await {
                Some(p) => p,
                None => break,
            },
        };
        // Datagrams of this batch, with how many records each has; their charges are given
        // back when `charges` is dropped, after the publish.
        let mut sizes = vec![first.records.len()];
        let mut bytes = batch_bytes(&first);
        let mut messages = Vec::with_capacity(first.records.len());
        let mut charges = Vec::new();
        append(&mut messages, &mut charges, first, persistent);
        while messages.len() < max_batch && bytes < MAX_BATCH_BYTES {
            match queue.try_recv() {
                Ok(next)
                    if messages.len() + next.records.len() <= max_batch
                        && bytes + batch_bytes(&next) <= MAX_BATCH_BYTES =>
                {
                    sizes.push(next.records.len());
                    bytes += batch_bytes(&next);
                    append(&mut messages, &mut charges, next, persistent);
                }
                Ok(next) => {
                    pending = Some(next);
                    break;
                }
                Err(_) => break,
            }
        }
        // A datagram with more records than a batch may hold goes in batches of its own.
        let outcome = if messages.len() > max_batch {
            let mut all = Vec::with_capacity(messages.len());
            let mut rest = messages;
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(max_batch));
                all.extend(publish(&session, rest).await);
                rest = tail;
            }
            all
        } else {
            publish(&session, messages).await
        };
        drop(charges);
        let mut results = outcome.into_iter();
        for size in sizes {
            let mut failed = None;
            for r in results.by_ref().take(size) {
                match r {
                    Ok(()) => Stats::add(&stats.udp.records_published, 1),
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = failed {
                Stats::add(&stats.udp.datagrams_dropped, 1);
                log.note(&stats, || format!("the broker refused a publish: {e}"));
            }
        }
    }
    session.close().await;
}

/// What a datagram of `bytes` bytes and `records` records costs the memory budget.
fn charge(bytes: usize, records: usize) -> usize {
    bytes + DATAGRAM_OVERHEAD + records * RECORD_OVERHEAD
}

/// The bytes `parsed`'s records add to a batch.
fn batch_bytes(parsed: &Parsed) -> usize {
    parsed.records.iter().map(Bytes::len).sum()
}

/// The messages for `parsed`'s records; its charge goes to `charges`.
fn append(
    messages: &mut Vec<OutgoingMessage>,
    charges: &mut Vec<OwnedSemaphorePermit>,
    parsed: Parsed,
    persistent: bool,
) {
    charges.push(parsed.charge);
    for body in parsed.records {
        let mut m = OutgoingMessage::to_topic(parsed.topic.clone(), body);
        m.persistent = persistent;
        messages.push(m);
    }
}

/// Publishes `messages` in one batch; one result per message.
async fn publish(
    session: &LocalSession,
    messages: Vec<OutgoingMessage>,
) -> Vec<Result<(), String>> {
    let n = messages.len();
    match session.request(Request::SendBatch(messages)).await {
        Response::BatchSent(results) => results
            .into_iter()
            .map(|r| r.map(drop).map_err(|e| e.message))
            .collect(),
        Response::Error(e) => vec![Err(e.message); n],
        other => vec![Err(format!("unexpected reply {:?}", other.kind())); n],
    }
}

/// Logs dropped and malformed datagrams at most every [`DROP_LOG_EVERY`], with the counts.
#[derive(Default)]
struct DropLog {
    last: Option<Instant>,
}

impl DropLog {
    fn note(&mut self, stats: &Stats, what: impl FnOnce() -> String) {
        if self.last.is_some_and(|t| t.elapsed() < DROP_LOG_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let u: &UdpStats = &stats.udp;
        warn!(
            received = Stats::get(&u.datagrams_received),
            malformed = Stats::get(&u.datagrams_malformed),
            dropped = Stats::get(&u.datagrams_dropped),
            "datagram ingest dropped a datagram: {}",
            what()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receive_buffer_is_what_was_asked_up_to_the_system_limit_or_forced() {
        let asked = 6 << 20;
        let socket = bind("127.0.0.1:0", asked).unwrap();
        let granted = socket2::SockRef::from(&socket).recv_buffer_size().unwrap() / 2;
        let limit = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok());
        match limit {
            // Forced past the limit when privileged, else capped at it.
            Some(limit) => assert!(granted >= asked.min(limit), "{granted} of {asked}"),
            None => assert!(granted > 0),
        }
        assert_eq!(socket.read_timeout().unwrap(), Some(STOP_POLL));
    }
}
