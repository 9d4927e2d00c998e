//! The `amqp` driver: RabbitMQ over AMQP 0.9.1 through `lapin`.
//!
//! Each bench queue is a durable classic queue on the default exchange. Sends are persistent
//! messages (`delivery_mode` 2) on a channel in publisher-confirm mode; a send returns when its
//! confirm arrives, and concurrent sends on one connection pipeline on that channel. Consumers
//! get a channel each with `basic.qos` prefetch and manual acknowledgements, sent from an acker
//! task as one `multiple` ack for every [`ACK_BATCH`] deliveries or [`ACK_INTERVAL`].
//!
//! Durability: RabbitMQ confirms a persistent message on a durable queue once it has been
//! written to its message store and fsynced, but it batches those fsyncs across publishes (and
//! confirms on its own schedule, at the latest after a few hundred milliseconds), so a confirm
//! means "on disk" while the confirm latency includes RabbitMQ's batching.
//!
//! Topics (module `topics`): a topic is a durable topic exchange of its name; a publish goes
//! to it with the message's routing key; a subscription is a queue bound to it with the
//! subscription's binding keys (RabbitMQ routes by key where JMS selects by properties), durable
//! and named after the subscription when durable, exclusive and auto-deleted otherwise.
//!
//! Transactions: `begin` switches the connection's sends to a channel in transaction mode
//! (`tx.select`; a channel cannot be in confirm and transaction mode at once) until `commit`
//! (`tx.commit`, answered once RabbitMQ has the messages on disk).
//!
//! Capabilities: none of by-sender retrieval, addressed messages, priorities or the queue query.
//! (RabbitMQ has priority queues, declared with `x-max-priority`; they are a different queue
//! implementation with its own costs, so the bench's plain queues do not use them.)

mod topics;

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions,
    BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};

use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Confirmation, ConnectionProperties};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{
    AckOutcome, AckToken, Capabilities, Connection, Consumer, Driver, DriverError, DriverLimits,
    From, OutMessage, ReceiveOne, Received, TopicSubscription,
};
use ferry_client::protocol::Name;

/// The default URL: the port `scripts/peers up` starts RabbitMQ on, default user and vhost.
pub const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// Deliveries per ack, at most.
pub const ACK_BATCH: usize = 64;
/// Longest a handled delivery waits for its ack to be sent.
pub const ACK_INTERVAL: Duration = Duration::from_millis(1);
/// `basic.qos` takes a 16-bit prefetch count.
const MAX_PREFETCH: u32 = u16::MAX as u32;

/// RabbitMQ at one URL.
#[derive(Debug, Clone)]
pub struct AmqpDriver {
    url: String,
}

impl AmqpDriver {
    /// A driver for the broker at `url` (`amqp://USER:PASS@HOST:PORT/VHOST`).
    pub fn new(url: String) -> Self {
        AmqpDriver { url }
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> DriverError {
    DriverError::failed("amqp", what, e)
}

fn unsupported(what: &str) -> DriverError {
    DriverError::unsupported("amqp", what, "RabbitMQ")
}

#[async_trait]
impl Driver for AmqpDriver {
    fn name(&self) -> &'static str {
        "amqp"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn durability(&self) -> String {
        "RabbitMQ durable queues, persistent messages, publisher confirms: a message is confirmed \
         once fsynced, with fsyncs and confirms batched by the broker"
            .to_string()
    }

    fn supports_non_persistent(&self) -> bool {
        true
    }

    fn non_persistent_durability(&self) -> String {
        "RabbitMQ durable queues, transient messages (delivery mode 1), publisher confirms: \
         kept in memory unless paged out, lost if the broker stops"
            .to_string()
    }

    async fn connect(&self, client_name: &str) -> Result<Box<dyn Connection>, DriverError> {
        let props = ConnectionProperties::default().with_connection_name(client_name.into());
        let conn = lapin::Connection::connect(&self.url, props)
            .await
            .map_err(|e| DriverError {
                message: format!(
                    "cannot connect to RabbitMQ at {}: {e} (is 'scripts/peers up' running?)",
                    self.url
                ),
                fatal: true,
            })?;
        let publish = conn.create_channel().await.map_err(|e| err("channel", e))?;
        publish
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| err("confirm.select", e))?;
        Ok(Box::new(AmqpConnection {
            conn,
            publish,
            tx: tokio::sync::Mutex::new(None),
            in_tx: std::sync::atomic::AtomicBool::new(false),
        }))
    }
}

/// One AMQP connection with a publisher-confirm channel for sends, and a channel in
/// transaction mode once a transaction was begun.
struct AmqpConnection {
    conn: lapin::Connection,
    publish: Channel,
    tx: tokio::sync::Mutex<Option<Channel>>,
    in_tx: std::sync::atomic::AtomicBool,
}

impl AmqpConnection {
    /// Declares durable queues (on a channel of its own: a refused declaration closes the
    /// channel it was made on).
    async fn declare_queues(&self, queues: &[String]) -> Result<(), DriverError> {
        let ch = self
            .conn
            .create_channel()
            .await
            .map_err(|e| err("channel", e))?;
        for q in queues {
            ch.queue_declare(
                q.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| err(&format!("declare queue '{q}'"), e))?;
        }
        let _ = ch.close(200, "done".into()).await;
        Ok(())
    }

    /// Sends each message to its one queue through the default exchange.
    async fn send_to_queues(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let routed = msgs
            .iter()
            .map(|m| {
                let queue = m.only_queue().map_err(unsupported)?;
                Ok((String::new(), queue.to_owned(), m))
            })
            .collect::<Result<Vec<_>, DriverError>>()?;
        self.publish_routed(routed).await
    }
}

impl AmqpConnection {
    /// Publishes each message to (exchange, routing key): inside a transaction on the
    /// transaction's channel (settled by the commit), otherwise on the confirm channel,
    /// everything first, then the confirms awaited.
    async fn publish_routed(
        &self,
        msgs: Vec<(String, String, &OutMessage)>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let props = |m: &OutMessage| {
            // 2: persistent; 1: transient.
            BasicProperties::default().with_delivery_mode(if m.persistent { 2 } else { 1 })
        };
        if self.in_tx.load(std::sync::atomic::Ordering::Acquire) {
            let guard = self.tx.lock().await;
            let ch = guard
                .as_ref()
                .ok_or_else(|| err("publish", "no transaction channel"))?;
            let mut results = Vec::with_capacity(msgs.len());
            for (exchange, key, m) in msgs {
                let r = ch
                    .basic_publish(
                        exchange.as_str().into(),
                        key.as_str().into(),
                        BasicPublishOptions::default(),
                        &m.body,
                        props(m),
                    )
                    .await;
                results.push(r.map(drop).map_err(|e| err("publish", e)));
            }
            return Ok(results);
        }
        let mut pending = Vec::with_capacity(msgs.len());
        for (exchange, key, m) in &msgs {
            let confirm = self
                .publish
                .basic_publish(
                    exchange.as_str().into(),
                    key.as_str().into(),
                    BasicPublishOptions::default(),
                    &m.body,
                    props(m),
                )
                .await;
            pending.push(confirm);
        }
        let mut results = Vec::with_capacity(pending.len());
        for p in pending {
            results.push(match p {
                Err(e) => Err(err("publish", e)),
                Ok(confirm) => match confirm.await {
                    Ok(Confirmation::Nack(_)) => Err(err("publish", "the broker refused it")),
                    Ok(_) => Ok(()),
                    Err(e) => Err(err("confirm", e)),
                },
            });
        }
        Ok(results)
    }
}

#[async_trait]
impl Connection for AmqpConnection {
    fn limits(&self) -> DriverLimits {
        DriverLimits {
            max_batch: 10_000,
            max_prefetch: MAX_PREFETCH,
        }
    }

    async fn ensure_queues(&self, queues: &[String]) -> Result<(), DriverError> {
        self.declare_queues(queues).await
    }

    async fn send(&self, msg: OutMessage) -> Result<(), DriverError> {
        let mut results = self.send_batch(vec![msg]).await?;
        results.pop().unwrap_or(Ok(()))
    }

    async fn send_batch(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        self.send_to_queues(msgs).await
    }

    async fn receive_one(&self, req: ReceiveOne) -> Result<Option<Received>, DriverError> {
        let queue = match req.from {
            From::Queue(q) => q,
            From::Sender(_) => return Err(unsupported("retrieval by sender")),
        };
        let got = self
            .publish
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .map_err(|e| err("basic.get", e))?;
        Ok(got.map(|m| Received {
            body: m.delivery.data.into(),
            queue: queue.into(),
            sender: None,
            ack: None,
        }))
    }

    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError> {
        Err(unsupported("the 'queues holding messages for me' query"))
    }

    async fn consume(&self, queue: &str, prefetch: u32) -> Result<Box<dyn Consumer>, DriverError> {
        let ch = self
            .conn
            .create_channel()
            .await
            .map_err(|e| err("channel", e))?;
        ch.basic_qos(
            prefetch.clamp(1, MAX_PREFETCH) as u16,
            BasicQosOptions::default(),
        )
        .await
        .map_err(|e| err("basic.qos", e))?;
        let consumer = ch
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| err(&format!("consume '{queue}'"), e))?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Box::new(AmqpConsumer {
            acker: tokio::spawn(acker(ch.clone(), rx)),
            tag: consumer.tag().to_string(),
            consumer,
            channel: ch,
            queue: queue.into(),
            acks: tx,
        }))
    }

    async fn close(&self) {
        let _ = self.conn.close(200, "bye".into()).await;
    }

    async fn ensure_topic(&self, topic: &str) -> Result<(), DriverError> {
        self.declare_exchange(topic).await
    }

    async fn publish_batch(
        &self,
        topic: &str,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let routed = msgs
            .iter()
            .map(|m| {
                let key = m.routing_key.clone().unwrap_or_else(|| topic.to_string());
                (topic.to_string(), key, m)
            })
            .collect();
        self.publish_routed(routed).await
    }

    async fn subscribe_topic(
        &self,
        topic: &str,
        sub: &TopicSubscription,
    ) -> Result<Box<dyn Consumer>, DriverError> {
        self.bound_consumer(topic, sub).await
    }

    async fn remove_subscription(&self, topic: &str, name: &str) -> Result<(), DriverError> {
        self.delete_bound_queue(topic, name).await
    }

    async fn delete_topic(&self, topic: &str) -> Result<(), DriverError> {
        self.delete_exchange(topic).await
    }

    async fn delete_queue(&self, queue: &str) -> Result<(), DriverError> {
        self.delete_plain_queue(queue).await
    }

    fn transactions(&self) -> bool {
        true
    }

    async fn begin(&self) -> Result<(), DriverError> {
        self.tx_begin().await
    }

    async fn commit(&self) -> Result<(), DriverError> {
        self.tx_commit().await
    }
}

/// A consumer on a channel of its own.
struct AmqpConsumer {
    consumer: lapin::Consumer,
    tag: String,
    channel: Channel,
    queue: Name,
    acks: mpsc::UnboundedSender<u64>,
    acker: JoinHandle<AckOutcome>,
}

/// Acknowledges the delivery tags received on `rx`: deliveries are handled in order, so one
/// `multiple` ack of the highest tag covers a batch.
async fn acker(channel: Channel, mut rx: mpsc::UnboundedReceiver<u64>) -> AckOutcome {
    let mut outcome = AckOutcome::default();
    while let Some(mut highest) = rx.recv().await {
        let mut n = 1;
        let deadline = tokio::time::Instant::now() + ACK_INTERVAL;
        while n < ACK_BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(tag)) => {
                    highest = highest.max(tag);
                    n += 1;
                }
                Ok(None) | Err(_) => break,
            }
        }
        if let Err(e) = channel
            .basic_ack(highest, BasicAckOptions { multiple: true })
            .await
        {
            outcome.failed += n as u64;
            outcome.first_error.get_or_insert(format!("amqp: ack: {e}"));
        }
    }
    outcome
}

#[async_trait]
impl Consumer for AmqpConsumer {
    async fn next(&mut self) -> Option<Result<Received, DriverError>> {
        let item = self.consumer.next().await?;
        Some(match item {
            Err(e) => Err(err("delivery", e)),
            Ok(d) => Ok(Received {
                body: d.data.into(),
                queue: self.queue.clone(),
                sender: None,
                ack: Some(d.delivery_tag),
            }),
        })
    }

    fn ack(&mut self, token: AckToken) {
        // Fails only when the acker is gone, which finish() reports.
        let _ = self.acks.send(token);
    }

    async fn finish(self: Box<Self>) -> AckOutcome {
        let AmqpConsumer {
            consumer,
            tag,
            channel,
            acks,
            acker,
            ..
        } = *self;
        drop(acks);
        let outcome = acker.await.unwrap_or_else(|e| AckOutcome {
            failed: 0,
            first_error: Some(format!("amqp: acker failed: {e}")),
        });
        let _ = channel
            .basic_cancel(tag.as_str().into(), BasicCancelOptions::default())
            .await;
        drop(consumer);
        // Unacknowledged deliveries return to the queue when the channel closes.
        let _ = channel.close(200, "done".into()).await;
        outcome
    }
}
