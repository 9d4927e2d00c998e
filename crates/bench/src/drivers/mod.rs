//! Drivers: how a workload talks to a target. A workload sees only these traits, so adding a
//! target (NATS, RabbitMQ, PostgreSQL) means adding a driver, not changing workloads.
//!
//! - [`Driver`]: one target; says what it can do ([`Capabilities`]) and how durable an
//!   acknowledged send is, and opens connections;
//! - [`Connection`]: one client connection: queues, sends (single or batched, pipelined when
//!   called concurrently), receiving one message, the "which queues hold messages for me"
//!   query, and consumers;
//! - [`Consumer`]: a push subscription on one queue whose deliveries are acknowledged by the
//!   workload once handled (the driver may batch the acknowledgements).
//!
//! Publish/subscribe (topics) is optional: [`Connection::ensure_topic`],
//! [`Connection::publish_batch`] and [`Connection::subscribe_topic`] fail as unsupported unless
//! the driver implements them (ferry; nats with a subject per topic).
//!
//! Modules: [`ferry`] (the native client), [`nats`] (JetStream or core NATS), [`amqp`]
//! (RabbitMQ), [`postgres`] (a queue table), [`stomp`] (any STOMP broker: Ferry's gateway,
//! RabbitMQ's plugin), [`target`] (choosing a driver by `--target`).

pub mod amqp;
pub mod ferry;
pub mod nats;
pub mod postgres;
pub mod stomp;
pub mod target;

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use ferry_client::protocol::packed::PackedBodies;
use ferry_client::protocol::Name;
pub use ferry_client::protocol::{Properties, PropertyValue};

pub use target::{open, Target, TargetOptions};

/// What a target supports beyond plain queues. Workloads that need a missing capability say
/// so instead of running something else under the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    /// Retrieval by sender across queues (FTaB "read by sender").
    pub by_sender: bool,
    /// Messages addressed to one client, invisible to the others.
    pub addressed: bool,
    /// Priority order within a queue.
    pub priorities: bool,
    /// The "which queues hold messages for me" query.
    pub queue_query: bool,
}

impl Capabilities {
    /// Plain queues only.
    pub const NONE: Capabilities = Capabilities {
        by_sender: false,
        addressed: false,
        priorities: false,
        queue_query: false,
    };
    /// Everything FTaB's clients use.
    pub const ALL: Capabilities = Capabilities {
        by_sender: true,
        addressed: true,
        priorities: true,
        queue_query: true,
    };
}

/// Broker-side limits a workload must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverLimits {
    /// Most messages in one `send_batch`.
    pub max_batch: u32,
    /// Most unacknowledged deliveries a consumer may hold.
    pub max_prefetch: u32,
}

/// A failed operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverError {
    /// One line, for the report.
    pub message: String,
    /// The connection is gone: retrying on it is pointless.
    pub fatal: bool,
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DriverError {}

impl DriverError {
    /// A failed operation of `driver` (`"nats: publish: ..."`); the connection may go on.
    pub fn failed(driver: &str, what: &str, e: impl fmt::Display) -> DriverError {
        DriverError {
            message: format!("{driver}: {what}: {e}"),
            fatal: false,
        }
    }

    /// Publish/subscribe asked of a target whose driver has no topics.
    pub fn no_topics() -> DriverError {
        DriverError {
            message: "topics (publish/subscribe) are not supported by this target".to_string(),
            fatal: false,
        }
    }

    /// An operation the peer `system` does not offer.
    pub fn unsupported(driver: &str, what: &str, system: &str) -> DriverError {
        DriverError {
            message: format!("{driver}: {what} is not supported by {system}"),
            fatal: false,
        }
    }
}

/// What a workload sends.
#[derive(Debug, Clone, PartialEq)]
pub struct OutMessage {
    /// Target queues (more than one only where the target supports atomic multi-queue sends);
    /// empty for a publish.
    pub queues: Vec<String>,
    /// The body.
    pub body: Bytes,
    /// 1 (lowest) to 10; `None` for the target's default.
    pub priority: Option<u8>,
    /// Addressed to this client only (needs [`Capabilities::addressed`]).
    pub to: Option<String>,
    /// Stored durably (`true`), or kept in memory only where the target can
    /// ([`Driver::supports_non_persistent`]).
    pub persistent: bool,
    /// Message properties, for selectors; targets without them ignore them.
    pub properties: Properties,
    /// For a publish: the routing key on targets that route by key instead of selecting by
    /// properties (RabbitMQ's topic exchanges); `None`: the topic's name.
    pub routing_key: Option<String>,
}

impl OutMessage {
    /// A persistent message for one queue with default priority, no addressee, no properties.
    pub fn to_queue(queue: impl Into<String>, body: Bytes) -> Self {
        OutMessage {
            queues: vec![queue.into()],
            body,
            priority: None,
            to: None,
            persistent: true,
            properties: Properties::new(),
            routing_key: None,
        }
    }

    /// A persistent message for publishing to a topic ([`Connection::publish_batch`]).
    pub fn for_topic(body: Bytes) -> Self {
        OutMessage {
            queues: Vec::new(),
            body,
            priority: None,
            to: None,
            persistent: true,
            properties: Properties::new(),
            routing_key: None,
        }
    }

    /// The queue of a plain send (one queue, no addressee), or what a target that only sends
    /// those cannot do with this message.
    pub fn only_queue(&self) -> Result<&str, &'static str> {
        match (self.queues.as_slice(), &self.to) {
            (_, Some(_)) => Err("an addressed message"),
            ([queue], None) => Ok(queue),
            _ => Err("a send to several queues at once"),
        }
    }
}

/// How a workload subscribes to a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSubscription {
    /// A durable subscription of this name; `None`: a non-durable one (gone with its consumer).
    pub durable: Option<String>,
    /// A JMS message selector; empty: every message.
    pub selector: String,
    /// Client acknowledgement (`true`) or auto acknowledgement on delivery.
    pub client_ack: bool,
    /// Most deliveries pushed ahead of the workload.
    pub prefetch: u32,
    /// On targets that route by key (RabbitMQ), the binding keys that select what the
    /// selector would (`*` one word, `#` any); empty: every message.
    pub bindings: Vec<String>,
}

/// Opaque handle to acknowledge a delivery by; meaning depends on the driver.
pub type AckToken = u64;

/// A message as a workload receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The body.
    pub body: Bytes,
    /// The queue it came from.
    pub queue: Name,
    /// The sending client, where the target records it.
    pub sender: Option<Name>,
    /// To acknowledge it with; `None` when nothing needs acknowledging.
    pub ack: Option<AckToken>,
}

/// Where a single receive looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    /// One queue.
    Queue(String),
    /// Messages of one sender across all queues (needs [`Capabilities::by_sender`]).
    Sender(String),
}

/// A single receive: take one message, highest priority first, acknowledged on receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveOne {
    /// Where to look.
    pub from: From,
    /// Priority order (`true`) or time order.
    pub by_priority: bool,
}

/// One target.
#[async_trait]
pub trait Driver: Send + Sync {
    /// The target's name in reports (`ferry`, `nats`, ...).
    fn name(&self) -> &'static str;
    /// What it supports.
    fn capabilities(&self) -> Capabilities;
    /// When an acknowledged send is durable, in one sentence for the report: what makes
    /// figures of different targets comparable.
    fn durability(&self) -> String;
    /// Opens a connection as client `client_name` (unique per connection).
    async fn connect(&self, client_name: &str) -> Result<Box<dyn Connection>, DriverError>;
    /// Whether sends with [`OutMessage::persistent`] `false` are kept in memory only.
    fn supports_non_persistent(&self) -> bool {
        false
    }
    /// When an acknowledged non-persistent send is durable (not at all, usually), for the
    /// report; only asked when [`Driver::supports_non_persistent`].
    fn non_persistent_durability(&self) -> String {
        "non-persistent messages: kept in memory only, lost if the server stops".to_string()
    }
}

/// One client connection. Methods take `&self` and may be called concurrently: drivers whose
/// protocol pipelines keep that many requests in flight.
#[async_trait]
pub trait Connection: Send + Sync {
    /// The broker's limits for this connection.
    fn limits(&self) -> DriverLimits;
    /// Creates the queues that do not exist yet.
    async fn ensure_queues(&self, queues: &[String]) -> Result<(), DriverError>;
    /// Sends one message; returns once the target acknowledged it.
    async fn send(&self, msg: OutMessage) -> Result<(), DriverError>;
    /// Sends several messages in one request where the target can; each succeeds or fails on
    /// its own. The outer error means none was sent.
    async fn send_batch(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError>;
    /// Takes at most one message, without waiting.
    async fn receive_one(&self, req: ReceiveOne) -> Result<Option<Received>, DriverError>;
    /// The queues holding messages addressed to this client (needs
    /// [`Capabilities::queue_query`]).
    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError>;
    /// Subscribes to `queue` with client acknowledgement and at most `prefetch` unacknowledged
    /// deliveries; returns once the subscription is live.
    async fn consume(&self, queue: &str, prefetch: u32) -> Result<Box<dyn Consumer>, DriverError>;
    /// Closes the connection; unacknowledged deliveries return to their queues.
    async fn close(&self);
    /// Creates `topic` unless it exists.
    async fn ensure_topic(&self, topic: &str) -> Result<(), DriverError> {
        let _ = topic;
        Err(DriverError::no_topics())
    }
    /// Publishes several messages to `topic` in one request where the target can; each
    /// succeeds or fails on its own. The outer error means none was published.
    async fn publish_batch(
        &self,
        topic: &str,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let _ = (topic, msgs);
        Err(DriverError::no_topics())
    }
    /// Publishes each of `bodies` to `topic` as a message of its own, persistent or not, with
    /// nothing else set: [`Connection::publish_batch`] without an [`OutMessage`] built per
    /// body, for drivers that can send bodies as they are. Results as `publish_batch`'s.
    async fn publish_bodies(
        &self,
        topic: &str,
        persistent: bool,
        bodies: PackedBodies,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let msgs = bodies
            .handles()
            .map(|body| OutMessage {
                persistent,
                ..OutMessage::for_topic(body)
            })
            .collect();
        self.publish_batch(topic, msgs).await
    }
    /// Subscribes to `topic`; returns once the subscription is live (messages published from
    /// then on reach it).
    async fn subscribe_topic(
        &self,
        topic: &str,
        sub: &TopicSubscription,
    ) -> Result<Box<dyn Consumer>, DriverError> {
        let _ = (topic, sub);
        Err(DriverError::no_topics())
    }
    /// Removes the durable subscription `name` of `topic` (and its backlog), if there is one.
    async fn remove_subscription(&self, topic: &str, name: &str) -> Result<(), DriverError> {
        let _ = (topic, name);
        Ok(())
    }
    /// Whether [`Connection::begin`] and [`Connection::commit`] work: the sends and publishes
    /// between them take effect together or not at all.
    fn transactions(&self) -> bool {
        false
    }
    /// Begins a transaction on this connection (see [`Connection::transactions`]).
    async fn begin(&self) -> Result<(), DriverError> {
        Err(DriverError {
            message: "transactions are not supported by this target".to_string(),
            fatal: false,
        })
    }
    /// Commits the transaction begun by [`Connection::begin`].
    async fn commit(&self) -> Result<(), DriverError> {
        Err(DriverError {
            message: "transactions are not supported by this target".to_string(),
            fatal: false,
        })
    }
    /// Deletes `topic` with its subscriptions and what they hold (runs clean up after
    /// themselves); nothing where the target has no topics.
    async fn delete_topic(&self, topic: &str) -> Result<(), DriverError> {
        let _ = topic;
        Ok(())
    }
    /// Deletes `queue` with what it holds; nothing where the driver cannot.
    async fn delete_queue(&self, queue: &str) -> Result<(), DriverError> {
        let _ = queue;
        Ok(())
    }
}

/// A push subscription with client acknowledgement.
#[async_trait]
pub trait Consumer: Send {
    /// The next delivery; `None` once the subscription ended.
    async fn next(&mut self) -> Option<Result<Received, DriverError>>;
    /// Appends to `out` the deliveries already at hand, at most `max` (at least one: waits for
    /// the first when none is there), so that a consumer handles many deliveries per wait.
    /// Returns `false` once the subscription ended (after whatever `out` got); an error is
    /// appended and ends the batch. Dropping a pending call loses nothing.
    ///
    /// The default hands over one delivery per call: draining more by polling `next` once and
    /// dropping it when it is pending is only safe for drivers whose `next` takes nothing before
    /// it completes (the PostgreSQL driver's `next` runs a statement that takes rows), so
    /// drivers that can batch safely override this.
    async fn next_batch(
        &mut self,
        out: &mut Vec<Result<Received, DriverError>>,
        _max: usize,
    ) -> bool {
        match self.next().await {
            None => false,
            Some(item) => {
                out.push(item);
                true
            }
        }
    }
    /// Hands the body of each delivery at hand to `body` (at least one: waits for the first
    /// when none is there), in the order they came, acknowledging each that needs it once
    /// `body` has returned for it: what a workload that only reads bodies does with
    /// [`Consumer::next_batch`], for drivers that can lend bodies without building a
    /// [`Received`] per delivery. Returns `false` once the subscription ended, and the error
    /// that ended it, if any (after the bodies received before it). Dropping a pending call
    /// loses nothing.
    async fn next_bodies(&mut self, body: &mut (dyn for<'b> FnMut(&'b [u8]) + Send)) -> Bodies {
        let mut got = Vec::new();
        let open = self.next_batch(&mut got, 1024).await;
        let mut error = None;
        for item in got {
            match item {
                Ok(d) => {
                    body(&d.body);
                    if let Some(token) = d.ack {
                        self.ack(token);
                    }
                }
                Err(e) => error = error.or(Some(e)),
            }
        }
        Bodies { open, error }
    }
    /// Acknowledges a handled delivery. Drivers may batch acknowledgements; failures are
    /// counted and reported by [`Consumer::finish`].
    fn ack(&mut self, token: AckToken);
    /// Sends the acknowledgements still pending and ends the subscription. Returns how many
    /// acknowledgements failed and the first failure.
    async fn finish(self: Box<Self>) -> AckOutcome;
}

/// What [`Consumer::next_bodies`] ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Bodies {
    /// Whether the subscription may bring more.
    pub open: bool,
    /// The error the subscription ended with, if it did.
    pub error: Option<DriverError>,
}

/// How the acknowledgements of one consumer went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Acknowledgements that failed.
    pub failed: u64,
    /// The first failure.
    pub first_error: Option<String>,
}
