//! The values that travel inside frames: messages, deliveries, properties and receive options.

use crate::name::Name;
use bytes::Bytes;

/// A message id: unique within a store, increasing in arrival order.
pub type MessageId = u64;
/// A delivery id: names one client-ack delivery until it is settled. 0 means "nothing to settle".
pub type DeliveryId = u64;
/// A subscription id, unique within a session.
pub type SubscriptionId = u64;

/// Lowest message priority.
pub const MIN_PRIORITY: u8 = 1;
/// Highest message priority.
pub const MAX_PRIORITY: u8 = 10;
/// Priority of a message whose sender did not choose one.
pub const DEFAULT_PRIORITY: u8 = 5;

pub use crate::properties::{Properties, Property, PropertyValue};

/// The order in which a receive picks among ready messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Highest priority first, oldest first within a priority.
    Priority,
    /// Oldest first.
    Time,
}

/// Whether a receive removes the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReceiveMode {
    /// Hand the message out (removed or leased, depending on [`AckMode`]).
    Take,
    /// Return the message and leave it in place; no lease.
    Peek,
}

/// How a taken message is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckMode {
    /// Removed when handed out (at most once).
    Auto,
    /// In flight until acked; returned on nack, lease expiry or disconnect (at least once).
    Client,
}

/// Where a receive looks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// One queue, by name.
    Queue(String),
    /// Every queue, restricted to messages from this sender.
    Sender(String),
}

/// Settings of a queue, given when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueOptions {
    /// Client-ack deliveries a message may have on the queue: when one that reaches this count
    /// comes back (nack with requeue, lease expiry, disconnect), the message goes to the
    /// dead-letter queue instead. 0 = unlimited.
    pub max_deliveries: u32,
    /// Where messages over `max_deliveries` go (a queue that exists); `None`: they are dropped.
    pub dead_letter_queue: Option<String>,
    /// Where messages that expire (time to live) on the queue go (a queue that exists);
    /// `None`: they are dropped.
    pub expiry_queue: Option<String>,
}

/// A message as a sender hands it to the broker.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage {
    /// The queues to place it on, atomically: all or none. Empty when it is published to
    /// `topic`.
    pub queues: Vec<String>,
    /// The topic to publish it to (a copy for every subscription whose selector matches);
    /// `None` when it is sent to `queues`. Exactly one of the two is given.
    pub topic: Option<Name>,
    /// `false`: kept in memory only, never written to the log, lost when the broker stops
    /// (much faster). Default `true`.
    pub persistent: bool,
    /// If set, only this client may receive it.
    pub receiver: Option<String>,
    /// 1 (lowest) to 10 (highest).
    pub priority: u8,
    /// Free for the application, typically to pair requests and replies; 0 = none.
    pub context: u64,
    /// Named values for selectors and applications.
    pub properties: Properties,
    /// The payload.
    pub body: Bytes,
    /// Time to live in ms from when the broker accepts it: past that it is never delivered.
    /// 0 = forever.
    pub ttl_ms: u64,
    /// Delayed delivery: not visible to receivers until this many ms after the broker accepts
    /// it. 0 = at once.
    pub delay_ms: u64,
}

impl OutgoingMessage {
    /// A message for one queue with default priority and no receiver, context or properties.
    pub fn new(queue: impl Into<String>, body: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            queues: vec![queue.into()],
            topic: None,
            persistent: true,
            receiver: None,
            priority: DEFAULT_PRIORITY,
            context: 0,
            properties: Properties::new(),
            body: body.into(),
            ttl_ms: 0,
            delay_ms: 0,
        }
    }

    /// A message for every subscription of `topic`, with default priority and no receiver,
    /// context or properties.
    pub fn to_topic(topic: impl Into<Name>, body: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            queues: Vec::new(),
            topic: Some(topic.into()),
            ..OutgoingMessage::new(String::new(), body)
        }
    }

    /// The same message, kept in memory only (lost when the broker stops).
    pub fn non_persistent(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// The same message with a time to live (0 = forever).
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = ttl_ms;
        self
    }

    /// The same message delayed by `delay_ms` (0 = visible at once).
    pub fn with_delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = delay_ms;
        self
    }
}

/// A message as a receiver gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Broker-assigned id, unique within the store.
    pub id: MessageId,
    /// The queue it was taken or peeked from (shared with the other messages from it).
    pub queue: Name,
    /// The sending client's name (shared with the other messages from it).
    pub sender: Name,
    /// The addressed client, if any.
    pub receiver: Option<String>,
    /// 1 to 10.
    pub priority: u8,
    /// As set by the sender.
    pub context: u64,
    /// As set by the sender.
    pub properties: Properties,
    /// The payload.
    pub body: Bytes,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// How often it was handed out (client ack) before this delivery.
    pub delivery_count: u32,
    /// When it expires, ms since the Unix epoch (arrival plus its time to live); 0 = never.
    pub expires_at: u64,
}

impl Message {
    /// Whether the message may have been seen by a consumer before.
    pub fn redelivered(&self) -> bool {
        self.delivery_count > 0
    }
}

/// A message handed to a receiver, with the id to settle it by.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The id to ack or nack; 0 for peeks and auto-ack takes.
    pub delivery_id: DeliveryId,
    /// The message.
    pub message: Message,
}

/// One queue in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInfo {
    /// The queue name.
    pub name: String,
    /// Messages ready to be taken.
    pub ready: u64,
    /// Messages handed out with client ack and not yet settled.
    pub in_flight: u64,
}

/// Separates a topic's name from a subscription's in the name of the queue that holds the
/// subscription's messages (`prices:audit`). Never part of a queue or topic name.
pub const SUBSCRIPTION_SEPARATOR: char = ':';

/// The name of the queue holding the messages of subscription `name` on `topic`: what
/// deliveries from it carry as their queue, and what a receive names to pull from it.
pub fn subscription_queue(topic: &str, name: &str) -> String {
    format!("{topic}{SUBSCRIPTION_SEPARATOR}{name}")
}

/// Topic and subscription names of a subscription queue name, if it is one.
pub fn split_subscription_queue(queue: &str) -> Option<(&str, &str)> {
    queue.split_once(SUBSCRIPTION_SEPARATOR)
}

/// How a topic subscription is set up (the part the store keeps).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionOptions {
    /// Named and kept while nobody is connected (and across restarts) until unsubscribed;
    /// otherwise it lives as long as the consumer that made it.
    pub durable: bool,
    /// Several sessions may consume it at once, as competing consumers (durable only).
    pub shared: bool,
    /// A JMS message selector: only messages it is TRUE for are placed on the subscription.
    /// Empty: every message.
    pub selector: String,
    /// Maximum delivery count and dead-letter queue, as for a queue (expiry queue too).
    pub queue: QueueOptions,
}

/// One subscription in a topic listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionInfo {
    /// The subscription's name (generated for non-durable ones).
    pub name: String,
    /// Durable or not.
    pub durable: bool,
    /// Shared or not.
    pub shared: bool,
    /// Its selector; empty when none.
    pub selector: String,
    /// Messages ready to be taken.
    pub ready: u64,
    /// Messages handed out with client ack and not yet settled.
    pub in_flight: u64,
}

/// One topic in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic name.
    pub name: String,
    /// Its subscriptions, sorted by name.
    pub subscriptions: Vec<SubscriptionInfo>,
}

/// A delivery's fields, borrowed: what `responses::put_delivery_view` writes. A store that holds its
/// messages in memory encodes deliveries from it directly, without building an owned
/// [`Delivery`] (and its strings) for each message first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeliveryView<'a> {
    /// The id to ack or nack; 0 for peeks and auto-ack takes.
    pub delivery_id: DeliveryId,
    /// The message id.
    pub id: MessageId,
    /// The queue it was taken or peeked from.
    pub queue: &'a str,
    /// The sending client's name.
    pub sender: &'a str,
    /// The addressed client, if any.
    pub receiver: Option<&'a str>,
    /// 1 to 10.
    pub priority: u8,
    /// As set by the sender.
    pub context: u64,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// Client-ack deliveries before this one.
    pub delivery_count: u32,
    /// As set by the sender.
    pub properties: &'a Properties,
    /// The payload.
    pub body: &'a [u8],
    /// Expiry time, ms since the Unix epoch (0: never).
    pub expires_at: u64,
}

impl<'a> DeliveryView<'a> {
    /// A run of deliveries alike but for their ids and bodies: this one's fields, with ids
    /// from `first_id` on and each of `bodies` in turn (its own id and body are not used).
    pub fn run<'s, I>(
        &self,
        first_id: MessageId,
        bodies: I,
    ) -> impl Iterator<Item = DeliveryView<'s>> + 's
    where
        'a: 's,
        I: IntoIterator<Item = &'s [u8]>,
        I::IntoIter: 's,
    {
        let template: DeliveryView<'s> = *self;
        (first_id..)
            .zip(bodies)
            .map(move |(id, body)| DeliveryView {
                id,
                body,
                ..template
            })
    }
}

impl Delivery {
    /// This delivery, borrowed.
    pub fn view(&self) -> DeliveryView<'_> {
        let m = &self.message;
        DeliveryView {
            delivery_id: self.delivery_id,
            id: m.id,
            queue: &m.queue,
            sender: &m.sender,
            receiver: m.receiver.as_deref(),
            priority: m.priority,
            context: m.context,
            created_at: m.created_at,
            delivery_count: m.delivery_count,
            properties: &m.properties,
            body: &m.body,
            expires_at: m.expires_at,
        }
    }
}
