//! The `nats` driver: NATS through `async-nats`, in one of two modes ([`NatsMode`]).
//!
//! - **JetStream** (default, persistent): each bench queue is a stream with file storage and
//!   work-queue retention (a message is removed once acknowledged), subject
//!   `ferrybench.<queue>`; a send is a JetStream publish that returns once the server's publish
//!   acknowledgement arrives (sends on one connection pipeline); consumers share one durable pull
//!   consumer per stream (`ferry-bench`, explicit acks), fetching up to the prefetch per pull.
//! - **Core** (non-persistent): plain publish and queue-group subscriptions; nothing is stored,
//!   nothing is acknowledged.
//!
//! Durability: JetStream acknowledges a publish once the message is written to the stream's
//! file, **without fsyncing it**: the server fsyncs on a timer (`sync_interval`, two minutes by
//! default), so a machine crash may lose acknowledged messages; a killed server loses nothing.
//! Stricter servers take `jetstream { sync_interval: always }` (fsync every write) in their
//! configuration; that is a server setting, not a client one, and it appeared in nats-server
//! 2.10: the Debian package `scripts/peers` installs is 2.9, so only the default is measured here
//! (see docs/benchmarks.md).
//!
//! Capabilities: none of by-sender retrieval, addressed messages, priorities or the queue query.
//!
//! Topics (module `topics`): core mode publishes on a subject per topic, and each subscription is a
//! plain subscription to it (every subscriber gets every message); JetStream mode keeps a
//! topic in a stream with interest retention, each subscription a consumer of its own.
//! Selectors are not supported.

mod topics;

use std::collections::HashMap;

use async_nats::jetstream::{self, consumer::pull, stream};
use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{
    AckOutcome, AckToken, Capabilities, Connection, Consumer, Driver, DriverError, DriverLimits,
    From, OutMessage, ReceiveOne, Received, TopicSubscription,
};
use ferry_client::protocol::Name;

/// The default server URL: the port `scripts/peers up` starts NATS on.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// The durable pull consumer every bench consumer of a stream shares.
const DURABLE: &str = "ferry-bench";
/// Most messages per send batch and per pull.
const MAX_BATCH: u32 = 10_000;

/// Persistent (JetStream) or not (core NATS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatsMode {
    /// JetStream streams with file storage and durable pull consumers.
    JetStream,
    /// Core NATS publish and queue-group subscribe: no persistence, no acknowledgements.
    Core,
}

/// NATS at one URL.
#[derive(Debug, Clone)]
pub struct NatsDriver {
    url: String,
    mode: NatsMode,
}

impl NatsDriver {
    /// A driver for the server at `url` (`nats://HOST:PORT`) in `mode`.
    pub fn new(url: String, mode: NatsMode) -> Self {
        NatsDriver { url, mode }
    }
}

/// The subject a bench queue's messages are published on.
fn subject(queue: &str) -> String {
    format!("ferrybench.{queue}")
}

/// The JetStream stream holding `queue`: stream names allow letters, digits, `-` and `_`.
fn stream_name(queue: &str) -> String {
    let safe: String = queue
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("FERRYBENCH_{safe}")
}

fn err(what: &str, e: impl std::fmt::Display) -> DriverError {
    DriverError::failed("nats", what, e)
}

fn unsupported(what: &str) -> DriverError {
    DriverError::unsupported("nats", what, "NATS")
}

#[async_trait]
impl Driver for NatsDriver {
    fn name(&self) -> &'static str {
        "nats"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn durability(&self) -> String {
        match self.mode {
            NatsMode::JetStream => "JetStream file storage, server default sync: a publish is \
                acknowledged once written to the stream file, fsynced only every sync_interval \
                (2 min by default), so a machine crash may lose acknowledged messages"
                .to_string(),
            NatsMode::Core => "core NATS: nothing is stored or acknowledged (a send completes \
                when the client has queued it)"
                .to_string(),
        }
    }

    fn supports_non_persistent(&self) -> bool {
        // Core NATS stores nothing; JetStream streams here always use file storage.
        self.mode == NatsMode::Core
    }

    fn non_persistent_durability(&self) -> String {
        self.durability()
    }

    async fn connect(&self, client_name: &str) -> Result<Box<dyn Connection>, DriverError> {
        let client = async_nats::ConnectOptions::new()
            .name(client_name)
            .connect(self.url.as_str())
            .await
            .map_err(|e| DriverError {
                message: format!(
                    "cannot connect to NATS at {}: {e} (is 'scripts/peers up' running?)",
                    self.url
                ),
                fatal: true,
            })?;
        let js = jetstream::new(client.clone());
        Ok(Box::new(NatsConnection {
            client,
            js,
            mode: self.mode,
        }))
    }
}

/// One NATS client connection; concurrent publishes pipeline on it.
struct NatsConnection {
    client: async_nats::Client,
    js: jetstream::Context,
    mode: NatsMode,
}

impl NatsConnection {
    async fn stream(&self, queue: &str) -> Result<stream::Stream, DriverError> {
        self.js
            .get_or_create_stream(stream::Config {
                name: stream_name(queue),
                subjects: vec![subject(queue)],
                storage: stream::StorageType::File,
                retention: stream::RetentionPolicy::WorkQueue,
                num_replicas: 1,
                ..Default::default()
            })
            .await
            .map_err(|e| err(&format!("stream for queue '{queue}'"), e))
    }

    async fn durable(&self, queue: &str, prefetch: u32) -> Result<DurableConsumer, DriverError> {
        self.stream(queue)
            .await?
            .get_or_create_consumer(
                DURABLE,
                pull::Config {
                    durable_name: Some(DURABLE.to_string()),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    max_ack_pending: i64::from(prefetch.max(1)) * 64,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| err(&format!("durable consumer on '{queue}'"), e))
    }
}

type DurableConsumer = jetstream::consumer::Consumer<pull::Config>;

impl NatsConnection {
    /// Publishes each body on its subject: in core mode fire and forget; in JetStream mode
    /// everything first, then the acknowledgements are awaited (one round trip).
    async fn publish_many(
        &self,
        items: Vec<(String, bytes::Bytes)>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        match self.mode {
            NatsMode::Core => {
                let n = items.len();
                for (subject, body) in items {
                    self.client
                        .publish(subject, body)
                        .await
                        .map_err(|e| err("publish", e))?;
                }
                Ok((0..n).map(|_| Ok(())).collect())
            }
            NatsMode::JetStream => {
                let mut pending = Vec::with_capacity(items.len());
                for (subject, body) in items {
                    pending.push(self.js.publish(subject, body).await);
                }
                let mut results = Vec::with_capacity(pending.len());
                for p in pending {
                    results.push(match p {
                        Ok(ack) => ack.await.map(drop).map_err(|e| err("publish ack", e)),
                        Err(e) => Err(err("publish", e)),
                    });
                }
                Ok(results)
            }
        }
    }
}

#[async_trait]
impl Connection for NatsConnection {
    fn limits(&self) -> DriverLimits {
        DriverLimits {
            max_batch: MAX_BATCH,
            max_prefetch: MAX_BATCH,
        }
    }

    async fn ensure_queues(&self, queues: &[String]) -> Result<(), DriverError> {
        if self.mode == NatsMode::JetStream {
            for q in queues {
                self.stream(q).await?;
            }
        }
        Ok(())
    }

    async fn send(&self, msg: OutMessage) -> Result<(), DriverError> {
        let mut results = self.send_batch(vec![msg]).await?;
        results.pop().unwrap_or(Ok(()))
    }

    async fn send_batch(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let items = msgs
            .into_iter()
            .map(|m| {
                let subject = subject(m.only_queue().map_err(unsupported)?);
                Ok((subject, m.body))
            })
            .collect::<Result<_, DriverError>>()?;
        self.publish_many(items).await
    }

    async fn receive_one(&self, req: ReceiveOne) -> Result<Option<Received>, DriverError> {
        let queue = match req.from {
            From::Queue(q) => q,
            From::Sender(_) => return Err(unsupported("retrieval by sender")),
        };
        if self.mode == NatsMode::Core {
            return Err(unsupported(
                "a single receive in core mode (nothing is stored)",
            ));
        }
        let consumer = self.durable(&queue, 1).await?;
        let mut batch = consumer
            .fetch()
            .max_messages(1)
            .messages()
            .await
            .map_err(|e| err("fetch", e))?;
        match batch.next().await {
            None => Ok(None),
            Some(Err(e)) => Err(err("fetch", e)),
            Some(Ok(m)) => {
                m.ack().await.map_err(|e| err("ack", e))?;
                Ok(Some(Received {
                    body: m.payload.clone(),
                    queue: queue.into(),
                    sender: None,
                    ack: None,
                }))
            }
        }
    }

    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError> {
        Err(unsupported("the 'queues holding messages for me' query"))
    }

    async fn consume(&self, queue: &str, prefetch: u32) -> Result<Box<dyn Consumer>, DriverError> {
        match self.mode {
            NatsMode::Core => {
                let sub = self
                    .client
                    .queue_subscribe(subject(queue), DURABLE.to_string())
                    .await
                    .map_err(|e| err("subscribe", e))?;
                // The subscription is live once the server has seen it.
                self.client.flush().await.map_err(|e| err("flush", e))?;
                Ok(Box::new(CoreConsumer {
                    sub,
                    queue: queue.into(),
                }))
            }
            NatsMode::JetStream => {
                let consumer = self.durable(queue, prefetch).await?;
                let messages = consumer
                    .stream()
                    .max_messages_per_batch(prefetch.clamp(1, MAX_BATCH) as usize)
                    .messages()
                    .await
                    .map_err(|e| err("pull", e))?;
                let (tx, rx) = mpsc::unbounded_channel();
                Ok(Box::new(JetStreamConsumer {
                    messages,
                    queue: queue.into(),
                    unacked: HashMap::new(),
                    next_token: 1,
                    acks: tx,
                    acker: tokio::spawn(acker(rx)),
                    no_ack: false,
                }))
            }
        }
    }

    async fn close(&self) {
        let _ = self.client.flush().await;
        let _ = self.client.drain().await;
    }

    async fn ensure_topic(&self, topic: &str) -> Result<(), DriverError> {
        self.topic_stream_if_stored(topic).await
    }

    async fn publish_batch(
        &self,
        topic: &str,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let subject = topics::topic_subject(topic);
        let items = msgs
            .into_iter()
            .map(|m| (subject.clone(), m.body))
            .collect();
        self.publish_many(items).await
    }

    async fn subscribe_topic(
        &self,
        topic: &str,
        sub: &TopicSubscription,
    ) -> Result<Box<dyn Consumer>, DriverError> {
        self.topic_consumer(topic, sub).await
    }

    async fn remove_subscription(&self, topic: &str, name: &str) -> Result<(), DriverError> {
        self.remove_topic_consumer(topic, name).await
    }
}

/// A pull subscription on a durable consumer; acks go out from an acker task.
struct JetStreamConsumer {
    messages: pull::Stream,
    queue: Name,
    unacked: HashMap<AckToken, jetstream::Message>,
    next_token: AckToken,
    acks: mpsc::UnboundedSender<jetstream::Message>,
    acker: JoinHandle<AckOutcome>,
    /// The consumer acknowledges nothing (ack policy none): deliveries carry no ack token.
    no_ack: bool,
}

/// Acknowledges the messages received on `rx` until every sender is gone.
async fn acker(mut rx: mpsc::UnboundedReceiver<jetstream::Message>) -> AckOutcome {
    let mut outcome = AckOutcome::default();
    while let Some(m) = rx.recv().await {
        if let Err(e) = m.ack().await {
            outcome.failed += 1;
            outcome.first_error.get_or_insert(format!("nats: ack: {e}"));
        }
    }
    outcome
}

#[async_trait]
impl Consumer for JetStreamConsumer {
    async fn next(&mut self) -> Option<Result<Received, DriverError>> {
        let item = self.messages.next().await?;
        Some(match item {
            Err(e) => Err(err("pull", e)),
            Ok(m) if self.no_ack => Ok(Received {
                body: m.payload.clone(),
                queue: self.queue.clone(),
                sender: None,
                ack: None,
            }),
            Ok(m) => {
                let token = self.next_token;
                self.next_token += 1;
                let body = m.payload.clone();
                self.unacked.insert(token, m);
                Ok(Received {
                    body,
                    queue: self.queue.clone(),
                    sender: None,
                    ack: Some(token),
                })
            }
        })
    }

    fn ack(&mut self, token: AckToken) {
        if let Some(m) = self.unacked.remove(&token) {
            // Fails only when the acker is gone, which finish() reports.
            let _ = self.acks.send(m);
        }
    }

    async fn finish(self: Box<Self>) -> AckOutcome {
        let JetStreamConsumer {
            messages,
            acks,
            acker,
            ..
        } = *self;
        drop(acks);
        let outcome = acker.await.unwrap_or_else(|e| AckOutcome {
            failed: 0,
            first_error: Some(format!("nats: acker failed: {e}")),
        });
        // Unacknowledged messages are redelivered after the consumer's ack wait.
        drop(messages);
        outcome
    }
}

/// A core NATS queue-group subscription: nothing to acknowledge.
struct CoreConsumer {
    sub: async_nats::Subscriber,
    queue: Name,
}

#[async_trait]
impl Consumer for CoreConsumer {
    async fn next(&mut self) -> Option<Result<Received, DriverError>> {
        let m = self.sub.next().await?;
        Some(Ok(Received {
            body: m.payload,
            queue: self.queue.clone(),
            sender: None,
            ack: None,
        }))
    }

    fn ack(&mut self, _token: AckToken) {}

    async fn finish(mut self: Box<Self>) -> AckOutcome {
        let _ = self.sub.unsubscribe().await;
        AckOutcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(subject("bench-0"), "ferrybench.bench-0");
        assert_eq!(stream_name("bench-0"), "FERRYBENCH_bench-0");
        assert_eq!(stream_name("a.b c*"), "FERRYBENCH_a_b_c_");
    }
}
