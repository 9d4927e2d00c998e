//! [`Client`]: the connection handle and one method per broker operation.

use std::sync::Arc;

use ferry_protocol::requests::{outgoing_encoded_len, Receive};
use ferry_protocol::{
    Delivery, DeliveryId, ErrorCode, Limits, MessageId, OutgoingMessage, QueueInfo, QueueOptions,
    Request, Response, WireError, HEADER_LEN, PROTOCOL_VERSION,
};
use tokio::net::TcpStream;

use crate::checks::{check_batch_len, check_message, check_str};
use crate::connection::{InFlight, Shared};
use crate::error::ClientError;
use crate::options::ConnectOptions;

/// A session with a broker over one TCP connection.
///
/// Cheap to clone (an `Arc` inside); every clone uses the same connection and session. All
/// methods take `&self` and may run concurrently from any number of tasks: their requests are
/// pipelined on the connection and each reply is matched to its caller by request id.
///
/// The connection closes when the last clone (and the last [`Subscription`](crate::Subscription)) is dropped, or on
/// [`Client::disconnect`]. Once it is closed, every call fails with [`ClientError::Closed`] (or
/// with the error the broker gave for closing it).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Conn,
    name: String,
    limits: Limits,
    /// The keep-alive interval granted.
    keepalive: std::time::Duration,
    /// The node's address.
    addr: String,
}

/// Owns the connection: closes it when dropped, even half-way through the handshake.
struct Conn(Arc<Shared>);

impl Drop for Conn {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.inner.name)
            .field("closed", &self.shared().is_closed())
            .finish()
    }
}

/// Whether a failed connect to one node is worth trying on the next: it could not be reached
/// or answered that it cannot serve now, rather than refusing the session itself.
fn try_next_node(e: &ClientError) -> bool {
    match e {
        ClientError::Io(_) | ClientError::Closed | ClientError::Timeout => true,
        ClientError::Protocol(_) => true,
        ClientError::Server(r) => matches!(
            r.code,
            ErrorCode::ServerFull | ErrorCode::StoreUnavailable | ErrorCode::Internal
        ),
        ClientError::TooLarge(_) | ClientError::Authentication(_) => false,
    }
}

pub(crate) use crate::error::expect_reply;

impl Client {
    /// Connects to `addr` (`host:port`) as client `name`, without credentials.
    pub async fn connect(addr: &str, name: &str) -> Result<Client, ClientError> {
        Client::connect_with(ConnectOptions::new(addr, name)).await
    }

    /// Connects with explicit options: TCP connect (TCP_NODELAY on), the TLS handshake when
    /// [`ConnectOptions::tls`] is set, then the `Connect` handshake with
    /// [`PROTOCOL_VERSION`], all within `connect_timeout`.
    ///
    /// With several addresses (nodes of one cluster, see [`ConnectOptions::addr`]) they are
    /// tried in order: a node that cannot be reached, times out, is full or has lost its store
    /// is skipped; any other refusal (e.g. `AlreadyOnline`) ends the attempt, since every node
    /// would answer the same. The error is the last node's. A client does not move by itself
    /// when its node goes away: in-flight and later calls fail with [`ClientError::Closed`] (or
    /// an I/O error), and the application connects again with the same options, which fails
    /// over to the next node that answers.
    ///
    /// A TLS handshake that fails (a certificate from a CA not trusted, or not for the name
    /// connected to) is an [`ClientError::Io`] error naming the reason; so are unreadable TLS
    /// files.
    ///
    /// Fails with [`ClientError::Server`] when the broker refuses the session (`AlreadyOnline`,
    /// `ServerFull`, `Unauthorized`, `UnsupportedVersion`, `InvalidArgument` for a bad name),
    /// [`ClientError::Timeout`] when it takes too long.
    pub async fn connect_with(opts: ConnectOptions) -> Result<Client, ClientError> {
        check_str("client name", &opts.name)?;
        if let Some(user) = &opts.user {
            check_str("user name", user)?;
        }
        let mut last = ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no broker address given",
        ));
        let tls = match &opts.tls {
            Some(t) => Some(t.connector().map_err(|e| {
                ClientError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
            })?),
            None => None,
        };
        for addr in opts.addrs() {
            match Client::connect_one(addr, &opts, tls.as_ref()).await {
                Ok(c) => return Ok(c),
                Err(e) if try_next_node(&e) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// One connect attempt to one address.
    async fn connect_one(
        addr: &str,
        opts: &ConnectOptions,
        tls: Option<&ferry_tls::Connector>,
    ) -> Result<Client, ClientError> {
        let handshake = async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let conn = match tls {
                None => {
                    let (rd, wr) = stream.into_split();
                    Conn(Shared::start(Box::new(rd), Box::new(wr)))
                }
                Some(tls) => {
                    let stream = tls.connect(stream, addr).await?;
                    let (rd, wr) = tokio::io::split(stream);
                    Conn(Shared::start(Box::new(rd), Box::new(wr)))
                }
            };
            // On failure `conn` is dropped, which closes the connection.
            let connected = crate::auth::connect(&conn.0, opts).await?;
            if connected.version != PROTOCOL_VERSION {
                return Err(ClientError::Protocol(WireError::InvalidValue {
                    field: "protocol version",
                    value: u64::from(connected.version),
                }));
            }
            conn.0.set_limits(&connected.limits);
            let keepalive = std::time::Duration::from_millis(u64::from(connected.keepalive_ms));
            conn.0.keep_alive(keepalive);
            Ok(Client {
                inner: Arc::new(Inner {
                    conn,
                    name: connected.client,
                    limits: connected.limits,
                    keepalive,
                    addr: addr.to_owned(),
                }),
            })
        };
        match tokio::time::timeout(opts.connect_timeout, handshake).await {
            Ok(res) => res,
            Err(_) => Err(ClientError::Timeout),
        }
    }

    /// The address of the node this client is connected to (one of those it was given).
    pub fn server_addr(&self) -> &str {
        &self.inner.addr
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.conn.0
    }

    /// The client name the session runs under.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The limits the broker advertised in the connect reply.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// The keep-alive interval the broker granted: the client pings by itself whenever it has
    /// sent nothing for half of it.
    pub fn keepalive(&self) -> std::time::Duration {
        self.inner.keepalive
    }

    /// Whether the connection has ended (every call would fail).
    pub fn is_closed(&self) -> bool {
        self.shared().is_closed()
    }

    pub(crate) async fn call(&self, req: Request) -> Result<Response, ClientError> {
        self.shared().call(&req).await
    }

    pub(crate) async fn call_ok(&self, req: Request) -> Result<(), ClientError> {
        let reply = self.call(req).await?;
        expect_reply!(reply, Response::Ok => ())
    }

    /// Round trip to the broker.
    pub async fn ping(&self) -> Result<(), ClientError> {
        let reply = self.call(Request::Ping).await?;
        expect_reply!(reply, Response::Pong => ())
    }

    /// Creates a queue. `QueueExists` if it exists, `InvalidArgument` for a bad name.
    pub async fn create_queue(&self, name: &str) -> Result<(), ClientError> {
        self.create_queue_with(name, QueueOptions::default()).await
    }

    /// Creates a queue with settings (maximum delivery count, dead-letter queue).
    pub async fn create_queue_with(
        &self,
        name: &str,
        options: QueueOptions,
    ) -> Result<(), ClientError> {
        check_str("queue name", name)?;
        if let Some(d) = &options.dead_letter_queue {
            check_str("dead-letter queue name", d)?;
        }
        if let Some(x) = &options.expiry_queue {
            check_str("expiry queue name", x)?;
        }
        self.call_ok(Request::CreateQueue {
            name: name.into(),
            options,
        })
        .await
    }

    /// Deletes a queue. `QueueNotEmpty` if it holds messages and `force` is false;
    /// `QueueNotFound` if it does not exist.
    pub async fn delete_queue(&self, name: &str, force: bool) -> Result<(), ClientError> {
        check_str("queue name", name)?;
        self.call_ok(Request::DeleteQueue {
            name: name.into(),
            force,
        })
        .await
    }

    /// Every queue with its depth.
    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>, ClientError> {
        let reply = self.call(Request::ListQueues).await?;
        expect_reply!(reply, Response::Queues(q) => q)
    }

    /// Sends one message to all its queues, atomically; returns its id once the broker has
    /// stored it. [`ClientError::TooLarge`] without a round trip when it breaks an advertised
    /// limit.
    ///
    /// Concurrent sends (and publishes) are coalesced into batch requests on the wire; each
    /// still succeeds or fails on its own. Inside a transaction ([`Client::begin`]) the message
    /// is held until [`Client::commit`], which returns the ids: here the id is 0.
    pub async fn send(&self, msg: OutgoingMessage) -> Result<MessageId, ClientError> {
        check_message(&msg, &self.inner.limits)?;
        let reply = self.shared().submit_send(msg)?.reply().await?;
        expect_reply!(reply, Response::Sent { id } => id)
    }

    /// Sends many messages; each succeeds or fails on its own, and the results come back in
    /// order.
    ///
    /// More messages than the broker's `max_batch` fail the whole call with
    /// [`ClientError::TooLarge`]. A message over a limit gets its own `TooLarge` result and the
    /// others are still sent. A batch whose encoding exceeds the frame limit is split into
    /// several requests, pipelined; if all of them fail as a whole (nothing was stored), the call
    /// fails with that error, otherwise each message of a failed request carries the error.
    pub async fn send_batch(
        &self,
        msgs: Vec<OutgoingMessage>,
    ) -> Result<Vec<Result<MessageId, ClientError>>, ClientError> {
        let limits = &self.inner.limits;
        check_batch_len(msgs.len(), limits)?;
        let room = (limits.max_frame_bytes as usize).saturating_sub(HEADER_LEN + 4);
        // The usual case: every message is fine and together they fit one request. It goes
        // out as it is and the reply's results are the call's, without the per-message
        // bookkeeping below (positions, slots) that only a split or a refused message needs.
        if let Some(used) = whole_batch_len(&msgs, limits, room) {
            let n = msgs.len();
            let reply = self
                .shared()
                .submit_sized(&Request::SendBatch(msgs), used + HEADER_LEN + 4)?
                .reply()
                .await?;
            return batch_results(reply, n);
        }
        // Each message's encoded length, or why it cannot be sent.
        let checked: Vec<Result<usize, ClientError>> = msgs
            .iter()
            .map(|m| {
                check_message(m, limits)?;
                let len = outgoing_encoded_len(m);
                if len > room {
                    return Err(ClientError::TooLarge(format!(
                        "a message of {len} encoded bytes does not fit the broker's frame limit of {} bytes",
                        limits.max_frame_bytes
                    )));
                }
                Ok(len)
            })
            .collect();
        let mut results: Vec<Option<Result<MessageId, ClientError>>> =
            Vec::with_capacity(msgs.len());
        // Requests to send: (positions in `results`, messages, encoded bytes).
        let mut chunks: Vec<(Vec<usize>, Vec<OutgoingMessage>, usize)> = Vec::new();
        let total = checked
            .iter()
            .try_fold(0usize, |sum, c| c.as_ref().ok().map(|len| sum + len));
        match total {
            // The usual case: every message is fine and they fit one request, sent as they are.
            Some(used) if used <= room && !msgs.is_empty() => {
                results.resize_with(msgs.len(), || None);
                chunks.push(((0..msgs.len()).collect(), msgs, used));
            }
            _ => {
                for (i, (m, c)) in msgs.into_iter().zip(checked).enumerate() {
                    let len = match c {
                        Ok(len) => len,
                        Err(e) => {
                            results.push(Some(Err(e)));
                            continue;
                        }
                    };
                    results.push(None);
                    match chunks.last_mut() {
                        Some((pos, items, used)) if used.saturating_add(len) <= room => {
                            pos.push(i);
                            items.push(m);
                            *used += len;
                        }
                        _ => chunks.push((vec![i], vec![m], len)),
                    }
                }
            }
        }
        // Submit every request before awaiting any: they travel together.
        let mut in_flight: Vec<(Vec<usize>, Result<InFlight, ClientError>)> = Vec::new();
        for (pos, items, used) in chunks {
            // Room for the whole frame up front: encoding does not grow the buffer piecemeal.
            let f = self
                .shared()
                .submit_sized(&Request::SendBatch(items), used + HEADER_LEN + 4);
            in_flight.push((pos, f));
        }
        let mut whole_failures: Vec<(Vec<usize>, ClientError)> = Vec::new();
        let mut any_succeeded = false;
        for (pos, f) in in_flight {
            let reply = match f {
                Ok(f) => f.reply().await,
                Err(e) => Err(e),
            };
            match reply {
                Ok(Response::BatchSent(items)) if items.len() == pos.len() => {
                    any_succeeded = true;
                    for (i, r) in pos.into_iter().zip(items) {
                        if let Some(slot) = results.get_mut(i) {
                            *slot = Some(r.map_err(ClientError::Server));
                        }
                    }
                }
                Ok(Response::BatchSent(_)) => {
                    whole_failures.push((
                        pos,
                        ClientError::Protocol(WireError::InvalidValue {
                            field: "batch result count",
                            value: 0,
                        }),
                    ));
                }
                Ok(other) => whole_failures.push((pos, ClientError::unexpected(other.kind()))),
                Err(e) => whole_failures.push((pos, e)),
            }
        }
        if !any_succeeded {
            if let Some((_, e)) = whole_failures.into_iter().next() {
                return Err(e);
            }
        } else {
            for (pos, e) in whole_failures {
                for i in pos {
                    if let Some(slot) = results.get_mut(i) {
                        *slot = Some(Err(e.duplicate()));
                    }
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or(Err(ClientError::Closed)))
            .collect())
    }

    /// Receives one message, or `None` if none arrived within `req.wait_ms`.
    pub async fn receive(&self, req: Receive) -> Result<Option<Delivery>, ClientError> {
        match &req.source {
            ferry_protocol::Source::Queue(n) | ferry_protocol::Source::Sender(n) => {
                check_str("name", n)?
            }
        }
        check_str("selector", &req.selector)?;
        let reply = self.call(Request::Receive(req)).await?;
        expect_reply!(reply, Response::Received(d) => d)
    }

    /// Settles client-ack deliveries. `NotFound` if one is unknown or already settled.
    pub async fn ack(&self, ids: &[DeliveryId]) -> Result<(), ClientError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.call_ok(Request::Ack { ids: ids.to_vec() }).await
    }

    /// Returns client-ack deliveries to their queues (`requeue`, flagged redelivered) or drops
    /// them.
    pub async fn nack(&self, ids: &[DeliveryId], requeue: bool) -> Result<(), ClientError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.call_ok(Request::Nack {
            ids: ids.to_vec(),
            requeue,
        })
        .await
    }

    /// Names of the queues holding messages addressed to this client.
    pub async fn waiting_queues(&self) -> Result<Vec<String>, ClientError> {
        let reply = self.call(Request::WaitingQueues).await?;
        expect_reply!(reply, Response::WaitingQueues(q) => q)
    }

    /// Ends the session: the broker returns unsettled deliveries to their queues and closes the
    /// connection. Every later call on this client fails with [`ClientError::Closed`]. Succeeds
    /// too if the connection was already gone (the session has ended either way).
    pub async fn disconnect(&self) -> Result<(), ClientError> {
        let res = match self.call(Request::Disconnect).await {
            Ok(Response::Ok) | Err(ClientError::Closed) => Ok(()),
            Ok(other) => Err(ClientError::unexpected(other.kind())),
            Err(e) => Err(e),
        };
        self.shared().close();
        res
    }
}

/// The per-message results of a batch request of `n` messages (`SendBatch` or
/// `PublishBatch`), from its reply (`BatchSent`, or for a `PublishBatch` whose every body went
/// in, `PublishedRun`); a reply with another count is a protocol error.
pub(crate) fn batch_results(
    reply: Response,
    n: usize,
) -> Result<Vec<Result<MessageId, ClientError>>, ClientError> {
    match reply {
        Response::BatchSent(items) if items.len() == n => Ok(items
            .into_iter()
            .map(|r| r.map_err(ClientError::Server))
            .collect()),
        Response::PublishedRun { first_id, count } if count as usize == n => {
            Ok((first_id..first_id + u64::from(count)).map(Ok).collect())
        }
        Response::BatchSent(_) | Response::PublishedRun { .. } => {
            Err(ClientError::Protocol(WireError::InvalidValue {
                field: "batch result count",
                value: 0,
            }))
        }
        other => Err(ClientError::unexpected(other.kind())),
    }
}

/// The encoded length of `msgs` as one `SendBatch` request when there are some, each passes
/// the limit checks and together they fit `room`; `None` otherwise.
fn whole_batch_len(msgs: &[OutgoingMessage], limits: &Limits, room: usize) -> Option<usize> {
    if msgs.is_empty() {
        return None;
    }
    let mut used = 0usize;
    for m in msgs {
        check_message(m, limits).ok()?;
        used = used.saturating_add(outgoing_encoded_len(m));
        if used > room {
            return None;
        }
    }
    Some(used)
}
