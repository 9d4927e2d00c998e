//! The `ferry` driver: Ferry through its public async client, `ferry_client::Client`.
//!
//! Durability: Ferry's default (`fsync always`) acknowledges a send only after the record is
//! fsynced to disk, with group commit sharing one fsync among concurrent sends. A broker started
//! with `--fsync interval:N` or `never` acknowledges earlier; the driver cannot see the broker's
//! setting, so the report states the default and the bench's documentation says to name the
//! setting used.
//!
//! Topics: a batch of publishes that differ only in their bodies (the usual case) goes as one
//! `PublishBatch`, any other as a send batch of `OutgoingMessage::to_topic`; a topic
//! subscription is a push subscription on its `topic:name` queue, consumed like a queue's.
//!
//! Consumers use a client-ack subscription; acknowledgements go out in batches from a separate
//! acker task (every [`ACK_BATCH`] deliveries or [`ACK_INTERVAL`], whichever comes first, with
//! several ack requests in flight), so the delivery loop never waits for an ack round trip.
//! When every ack request allowed is in flight, what piles up meanwhile goes out in one
//! request once one returns (up to [`MAX_ACK_IDS`] ids): under load one `Ack` settles a whole
//! run of deliveries, in one store mutation and one wait for the disk, instead of a request per
//! [`ACK_BATCH`] waiting behind each other.
//! The consumer hands its acks to the acker in groups (of [`ACK_BATCH`], or whatever it holds
//! when it is about to wait for the next delivery), not one channel message per delivery.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ferry_client::protocol::packed::PackedBodies;
use ferry_client::protocol::requests::SubscribeTopic;
use ferry_client::protocol::{
    AckMode, DeliveryId, ErrorCode, Name, Order, OutgoingMessage, PublishBatch, Source,
    DEFAULT_PRIORITY,
};
use ferry_client::{Client, ClientError, Receive, Subscribe, Subscription};
use futures::FutureExt;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use super::{
    AckOutcome, AckToken, Bodies, Capabilities, Connection, Consumer, Driver, DriverError,
    DriverLimits, From, OutMessage, ReceiveOne, Received, TopicSubscription,
};

/// Deliveries per ack request, at most.
pub const ACK_BATCH: usize = 64;
/// Longest a handled delivery waits for its ack to be sent.
pub const ACK_INTERVAL: Duration = Duration::from_millis(1);
/// Ack requests in flight per consumer.
const ACKS_IN_FLIGHT: usize = 16;
/// Delivery ids in one ack request, at most (64 KiB of ids).
pub const MAX_ACK_IDS: usize = 8192;

/// Ferry at one address.
#[derive(Debug, Clone)]
pub struct FerryDriver {
    server: String,
    fsync: String,
}

impl FerryDriver {
    /// A driver for the broker at `server` (`HOST:PORT`), which runs with the fsync policy
    /// `fsync` (`always`, `interval:MS`, `never`; for the report).
    pub fn new(server: String, fsync: String) -> Self {
        FerryDriver { server, fsync }
    }
}

#[async_trait]
impl Driver for FerryDriver {
    fn name(&self) -> &'static str {
        "ferry"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn durability(&self) -> String {
        match self.fsync.as_str() {
            "always" => "broker fsync always (its default): a send is acknowledged after its \
                         record is fsynced (group commit)"
                .to_string(),
            "never" => "broker fsync never: a send is acknowledged once written to the OS, \
                        never fsynced per commit (a machine crash may lose it)"
                .to_string(),
            other => format!(
                "broker fsync {other}: a send is acknowledged once written to the OS and \
                 fsynced on that interval (a machine crash may lose the last interval)"
            ),
        }
    }

    fn supports_non_persistent(&self) -> bool {
        true
    }

    fn non_persistent_durability(&self) -> String {
        "non-persistent messages: kept in the broker's memory only (no log record), lost if \
         the broker stops"
            .to_string()
    }

    async fn connect(&self, client_name: &str) -> Result<Box<dyn Connection>, DriverError> {
        let client = Client::connect_with(connect_options(&self.server, client_name))
            .await
            .map_err(|e| DriverError {
                message: format!("cannot connect to {}: {}", self.server, connect_reason(&e)),
                fatal: true,
            })?;
        Ok(Box::new(FerryConnection { client }))
    }
}

/// Options for `client_name` at `server`: over TLS trusting `FERRY_CA` when it is set, as
/// `FERRY_USER` with `FERRY_PASSWORD` (SCRAM) when it is set, as the CLI reads them.
fn connect_options(server: &str, client_name: &str) -> ferry_client::ConnectOptions {
    let mut o = ferry_client::ConnectOptions::new(server, client_name);
    if let Some(ca) = std::env::var_os("FERRY_CA") {
        o = o.tls(ferry_client::ClientTls {
            ca: Some(ca.into()),
            ..ferry_client::ClientTls::default()
        });
    }
    if let Ok(user) = std::env::var("FERRY_USER") {
        o = o.user(user, std::env::var("FERRY_PASSWORD").unwrap_or_default());
    }
    o
}

/// One `ferry_client::Client`; concurrent calls pipeline on its connection.
struct FerryConnection {
    client: Client,
}

fn outgoing(msg: OutMessage) -> OutgoingMessage {
    outgoing_to(msg, None)
}

/// `msg` for its queues, or published to `topic` when given (its queues are then ignored).
/// Built field by field: `OutgoingMessage::new` would allocate a queue list only to drop it.
fn outgoing_to(msg: OutMessage, topic: Option<Name>) -> OutgoingMessage {
    OutgoingMessage {
        queues: if topic.is_some() {
            Vec::new()
        } else {
            msg.queues
        },
        topic,
        persistent: msg.persistent,
        receiver: msg.to,
        priority: msg.priority.unwrap_or(DEFAULT_PRIORITY),
        context: 0,
        properties: msg.properties,
        body: msg.body,
        ttl_ms: 0,
        delay_ms: 0,
    }
}

/// The `PublishBatch` (without bodies) that `msgs` to `topic` make when they differ only in
/// their bodies; `None` otherwise (or when there are none).
fn shared_batch(topic: &Name, msgs: &[OutMessage]) -> Option<PublishBatch> {
    let first = msgs.first()?;
    let same = |m: &OutMessage| {
        m.to.is_none()
            && m.persistent == first.persistent
            && m.priority == first.priority
            && m.properties == first.properties
    };
    if !msgs.iter().all(same) {
        return None;
    }
    Some(PublishBatch {
        priority: first.priority.unwrap_or(DEFAULT_PRIORITY),
        persistent: first.persistent,
        properties: first.properties.clone(),
        ..PublishBatch::new(topic.clone(), Vec::new())
    })
}

#[async_trait]
impl Connection for FerryConnection {
    fn limits(&self) -> DriverLimits {
        let l = self.client.limits();
        DriverLimits {
            max_batch: l.max_batch,
            max_prefetch: l.max_prefetch,
        }
    }

    async fn ensure_queues(&self, queues: &[String]) -> Result<(), DriverError> {
        for q in queues {
            match self.client.create_queue(q).await {
                Ok(()) => {}
                Err(e) if e.code() == Some(ErrorCode::QueueExists) => {}
                Err(e) => return Err(error(e)),
            }
        }
        Ok(())
    }

    async fn send(&self, msg: OutMessage) -> Result<(), DriverError> {
        self.client
            .send(outgoing(msg))
            .await
            .map(drop)
            .map_err(error)
    }

    async fn send_batch(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let msgs = msgs.into_iter().map(outgoing).collect();
        let results = self.client.send_batch(msgs).await.map_err(error)?;
        Ok(results
            .into_iter()
            .map(|r| r.map(drop).map_err(error))
            .collect())
    }

    async fn receive_one(&self, req: ReceiveOne) -> Result<Option<Received>, DriverError> {
        let source = match req.from {
            From::Queue(q) => Source::Queue(q),
            From::Sender(s) => Source::Sender(s),
        };
        let delivery = self
            .client
            .receive(Receive {
                source,
                order: if req.by_priority {
                    Order::Priority
                } else {
                    Order::Time
                },
                mode: ferry_client::protocol::ReceiveMode::Take,
                ack: AckMode::Auto,
                wait_ms: 0,
                selector: String::new(),
            })
            .await
            .map_err(error)?;
        Ok(delivery.map(|d| Received {
            body: d.message.body,
            queue: d.message.queue,
            sender: Some(d.message.sender),
            ack: None,
        }))
    }

    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError> {
        self.client.waiting_queues().await.map_err(error)
    }

    async fn consume(&self, queue: &str, prefetch: u32) -> Result<Box<dyn Consumer>, DriverError> {
        let sub = self
            .client
            .subscribe(Subscribe {
                queue: queue.to_string(),
                order: Order::Priority,
                ack: AckMode::Client,
                prefetch,
                selector: String::new(),
            })
            .await
            .map_err(error)?;
        Ok(self.consumer(sub))
    }

    async fn close(&self) {
        let _ = self.client.disconnect().await;
    }

    async fn ensure_topic(&self, topic: &str) -> Result<(), DriverError> {
        match self.client.create_topic(topic).await {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::TopicExists) => Ok(()),
            Err(e) => Err(error(e)),
        }
    }

    async fn publish_batch(
        &self,
        topic: &str,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        // One name shared by the batch, not a string per message.
        let topic = Name::from(topic);
        if let Some(batch) = shared_batch(&topic, &msgs) {
            let batch = PublishBatch {
                bodies: msgs.into_iter().map(|m| m.body).collect(),
                ..batch
            };
            let results = self.client.publish_batch(batch).await.map_err(error)?;
            return Ok(results
                .into_iter()
                .map(|r| r.map(drop).map_err(error))
                .collect());
        }
        let msgs = msgs
            .into_iter()
            .map(|m| outgoing_to(m, Some(topic.clone())))
            .collect();
        let results = self.client.send_batch(msgs).await.map_err(error)?;
        Ok(results
            .into_iter()
            .map(|r| r.map(drop).map_err(error))
            .collect())
    }

    async fn publish_bodies(
        &self,
        topic: &str,
        persistent: bool,
        bodies: PackedBodies,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let batch = PublishBatch {
            persistent,
            ..PublishBatch::new(topic, bodies)
        };
        let results = self.client.publish_batch(batch).await.map_err(error)?;
        Ok(results
            .into_iter()
            .map(|r| r.map(drop).map_err(error))
            .collect())
    }

    async fn subscribe_topic(
        &self,
        topic: &str,
        spec: &TopicSubscription,
    ) -> Result<Box<dyn Consumer>, DriverError> {
        let mut request = SubscribeTopic::new(topic)
            .ack(if spec.client_ack {
                AckMode::Client
            } else {
                AckMode::Auto
            })
            .prefetch(spec.prefetch.max(1))
            .with_selector(spec.selector.clone());
        if let Some(name) = &spec.durable {
            request = request.durable(name.clone());
        }
        let sub = self.client.subscribe_topic(request).await.map_err(error)?;
        Ok(self.consumer(sub))
    }

    fn transactions(&self) -> bool {
        true
    }

    async fn begin(&self) -> Result<(), DriverError> {
        self.client.begin().await.map_err(error)
    }

    async fn commit(&self) -> Result<(), DriverError> {
        self.client.commit().await.map(drop).map_err(error)
    }

    async fn delete_topic(&self, topic: &str) -> Result<(), DriverError> {
        match self.client.delete_topic(topic, true).await {
            Err(e) if e.code() != Some(ErrorCode::TopicNotFound) => Err(error(e)),
            _ => Ok(()),
        }
    }

    async fn delete_queue(&self, queue: &str) -> Result<(), DriverError> {
        match self.client.delete_queue(queue, true).await {
            Err(e) if e.code() != Some(ErrorCode::QueueNotFound) => Err(error(e)),
            _ => Ok(()),
        }
    }

    async fn remove_subscription(&self, topic: &str, name: &str) -> Result<(), DriverError> {
        match self.client.unsubscribe(topic, name).await {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.code(),
                    Some(ErrorCode::NotFound | ErrorCode::TopicNotFound)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(error(e)),
        }
    }
}

impl FerryConnection {
    /// A consumer over `sub`, with an acker task of its own for client-ack deliveries.
    fn consumer(&self, sub: Subscription) -> Box<dyn Consumer> {
        let failures = Arc::new(AckFailures::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let acker = tokio::spawn(acker(self.client.clone(), rx, failures.clone()));
        Box::new(FerryConsumer {
            sub,
            taken: Vec::new(),
            pending: Vec::with_capacity(ACK_BATCH),
            acks: tx,
            acker,
            failures,
        })
    }
}

/// Acknowledgements that failed, shared between a consumer and its acker.
#[derive(Debug, Default)]
struct AckFailures {
    count: AtomicU64,
    first: Mutex<Option<String>>,
}

impl AckFailures {
    fn note(&self, n: u64, what: String) {
        self.count.fetch_add(n, Ordering::Relaxed);
        // A poisoned lock only means another task panicked while noting; keep its value.
        let mut first = self.first.lock().unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert(what);
    }
}

struct FerryConsumer {
    sub: Subscription,
    /// Deliveries taken from `sub` by `next_batch`, kept for its allocation.
    taken: Vec<ferry_client::Delivery>,
    /// Acks not yet handed to the acker: handed over [`ACK_BATCH`] at a time, and whenever
    /// `next` would wait, so that the acker never waits for acks the consumer sits on.
    pending: Vec<DeliveryId>,
    acks: mpsc::UnboundedSender<Vec<DeliveryId>>,
    acker: JoinHandle<()>,
    failures: Arc<AckFailures>,
}

#[async_trait]
impl Consumer for FerryConsumer {
    async fn next(&mut self) -> Option<Result<Received, DriverError>> {
        let item = match self.sub.next().now_or_never() {
            Some(item) => item?,
            None => {
                self.hand_over_acks();
                self.sub.next().await?
            }
        };
        Some(received(item))
    }

    async fn next_batch(
        &mut self,
        out: &mut Vec<Result<Received, DriverError>>,
        max: usize,
    ) -> bool {
        // The subscription hands over what it holds in one go; nothing is taken from it until
        // the call completes, so dropping a pending call loses nothing.
        let mut taken = std::mem::take(&mut self.taken);
        let got = match self.sub.next_batch(&mut taken, max).now_or_never() {
            Some(got) => got,
            None => {
                self.hand_over_acks();
                self.sub.next_batch(&mut taken, max).await
            }
        };
        let open = match got {
            Some(Ok(_)) => true,
            Some(Err(e)) => {
                out.push(Err(error(e)));
                true
            }
            None => false,
        };
        out.extend(taken.drain(..).map(|d| Ok(received_delivery(d))));
        self.taken = taken;
        open
    }

    async fn next_bodies(&mut self, body: &mut (dyn for<'b> FnMut(&'b [u8]) + Send)) -> Bodies {
        // The bodies are read in place in the batch the client decoded: no `Delivery` (nor
        // `Received`) is built per delivery. Nothing is taken until the call completes.
        let got = match self.sub.next_deliveries().now_or_never() {
            Some(got) => got,
            None => {
                self.hand_over_acks();
                self.sub.next_deliveries().await
            }
        };
        match got {
            Some(Ok(batch)) => {
                for d in batch.iter() {
                    body(d.body);
                    if d.delivery_id != 0 {
                        self.ack(d.delivery_id);
                    }
                }
                Bodies {
                    open: true,
                    error: None,
                }
            }
            Some(Err(e)) => Bodies {
                open: true,
                error: Some(error(e)),
            },
            None => Bodies {
                open: false,
                error: None,
            },
        }
    }

    fn ack(&mut self, token: AckToken) {
        self.pending.push(token);
        if self.pending.len() >= ACK_BATCH {
            self.hand_over_acks();
        }
    }

    async fn finish(self: Box<Self>) -> AckOutcome {
        let mut this = self;
        this.hand_over_acks();
        let FerryConsumer {
            sub,
            taken: _,
            pending: _,
            acks,
            acker,
            failures,
        } = *this;
        drop(acks);
        if let Err(e) = acker.await {
            failures.note(0, format!("acker failed: {e}"));
        }
        // Deliveries pushed but not handled return to their queue when the session ends.
        sub.cancel().await;
        let first_error = failures
            .first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        AckOutcome {
            failed: failures.count.load(Ordering::Relaxed),
            first_error,
        }
    }
}

/// A subscription's item as the bench's delivery.
fn received(item: Result<ferry_client::Delivery, ClientError>) -> Result<Received, DriverError> {
    item.map_err(error).map(received_delivery)
}

/// A delivery as the bench's.
fn received_delivery(d: ferry_client::Delivery) -> Received {
    Received {
        body: d.message.body,
        queue: d.message.queue,
        sender: Some(d.message.sender),
        ack: (d.delivery_id != 0).then_some(d.delivery_id),
    }
}

impl FerryConsumer {
    /// Hands the acks gathered so far to the acker.
    fn hand_over_acks(&mut self) {
        if !self.pending.is_empty() {
            let ids = std::mem::replace(&mut self.pending, Vec::with_capacity(ACK_BATCH));
            // Fails only when the acker is gone, which finish() reports through the failures.
            let _ = self.acks.send(ids);
        }
    }
}

/// Sends the acks received on `rx` in batches until every sender is gone.
async fn acker(
    client: Client,
    mut rx: mpsc::UnboundedReceiver<Vec<DeliveryId>>,
    failures: Arc<AckFailures>,
) {
    let permits = Arc::new(Semaphore::new(ACKS_IN_FLIGHT));
    let mut acks = JoinSet::new();
    let mut batch = Vec::with_capacity(ACK_BATCH);
    while let Some(first) = rx.recv().await {
        batch.extend(first);
        let deadline = tokio::time::Instant::now() + ACK_INTERVAL;
        while batch.len() < ACK_BATCH {
            // Take what is already queued without touching the timer.
            match rx.try_recv() {
                Ok(ids) => {
                    batch.extend(ids);
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(ids)) => batch.extend(ids),
                Ok(None) | Err(_) => break,
            }
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        // Whatever arrived while every request was in flight goes out with this one.
        while batch.len() < MAX_ACK_IDS {
            match rx.try_recv() {
                Ok(ids) => batch.extend(ids),
                Err(_) => break,
            }
        }
        let ids = std::mem::replace(&mut batch, Vec::with_capacity(ACK_BATCH));
        let (client, failures) = (client.clone(), failures.clone());
        acks.spawn(async move {
            if let Err(e) = client.ack(&ids).await {
                failures.note(ids.len() as u64, describe(&e));
            }
            drop(permit);
        });
        while acks.try_join_next().is_some() {}
    }
    while acks.join_next().await.is_some() {}
}

/// A client error as a driver error: fatal when the connection is gone.
fn error(e: ClientError) -> DriverError {
    DriverError {
        fatal: matches!(e, ClientError::Closed | ClientError::Io(_)),
        message: describe(&e),
    }
}

/// One line for a client error: the broker's own message for server errors (it names the thing
/// at fault), a plain description otherwise.
fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Server(reply) => reply.message.clone(),
        ClientError::Io(io) => format!("connection error: {io}"),
        ClientError::Closed => "the broker closed the connection".to_string(),
        ClientError::Timeout => "the broker did not answer in time".to_string(),
        ClientError::TooLarge(what) => what.clone(),
        ClientError::Authentication(why) => format!("authentication: {why}"),
        ClientError::Protocol(w) => format!("protocol error: {w}"),
        // A kind of error added to the client later: its own text.
        other => other.to_string(),
    }
}

/// Why a connect failed, phrased for someone who just typed a command.
fn connect_reason(e: &ClientError) -> String {
    match e {
        ClientError::Io(io) if io.kind() == ErrorKind::ConnectionRefused => {
            "connection refused (is 'ferry serve' running?)".to_string()
        }
        other => describe(other),
    }
}
