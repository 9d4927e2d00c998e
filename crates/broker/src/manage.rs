//! The management facade: what the HTTP API (its own crate, so the broker does not depend on
//! a web stack) reads and does, through the same handlers and wakers as the native protocol.
//!
//! A [`Management`] is a cheap clone around the broker's shared state. Reads: the node, its
//! counters, its live sessions. Changes go through the broker's handlers (names validated,
//! limits enforced, waiters woken) or, for the operator's store operations, through
//! [`ferry_store::Admin`] followed by waking the queues they filled.

use std::sync::Arc;
use std::time::Instant;

use ferry_protocol::{
    AckMode, ErrorCode, ErrorReply, MessageId, OutgoingMessage, QueueOptions, Response,
};
use ferry_store::{MoveReport, MoveTarget, NewMessage, Store, StoreError};

use crate::config::{BrokerConfig, StoreSetting};
use crate::handlers::{queues, topics, validate};
use crate::shared::Shared;
use crate::stats::Stats;

mod users;
pub use users::{HttpAccess, UserView};

/// One subscription of a live session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionView {
    /// The queue it consumes (`topic:name` for a topic subscription).
    pub queue: String,
    /// Its selector; empty when none.
    pub selector: String,
    /// Client or auto acknowledgement.
    pub client_ack: bool,
}

/// One live session on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    /// The client name.
    pub client: String,
    /// The protocol its client speaks: `ferry` (native) or `stomp` (the STOMP gateway, over
    /// TCP or WebSocket).
    pub protocol: &'static str,
    /// The peer address.
    pub peer: String,
    /// When it connected, ms since the Unix epoch.
    pub connected_at_ms: u64,
    /// Unsettled client-ack deliveries it holds.
    pub in_flight: usize,
    /// Its push subscriptions.
    pub subscriptions: Vec<SubscriptionView>,
}

/// The management facade (see the module docs).
#[derive(Clone)]
pub struct Management {
    shared: Arc<Shared>,
    started: Instant,
    started_at_ms: u64,
    node: String,
    engine: &'static str,
    metrics_per_object: bool,
    http_allow_remote: bool,
    settings: Arc<str>,
    tls: Option<ferry_tls::Acceptor>,
}

fn reply(r: Response) -> Result<(), ErrorReply> {
    match r {
        Response::Error(e) => Err(e),
        _ => Ok(()),
    }
}

fn store_reply(e: &StoreError) -> ErrorReply {
    ErrorReply::new(e.code(), e.to_string())
}

impl Management {
    /// The facade over a started broker's shared state.
    pub fn new(
        shared: Arc<Shared>,
        config: &BrokerConfig,
        tls: Option<ferry_tls::Acceptor>,
    ) -> Management {
        let started_at_ms = shared.now_ms();
        Management {
            shared,
            started: Instant::now(),
            started_at_ms,
            node: config.node.clone().unwrap_or_else(|| "local".to_owned()),
            engine: match config.store {
                StoreSetting::Embedded => "embedded",
                StoreSetting::Postgres(_) => "postgres",
            },
            metrics_per_object: config.metrics_per_object,
            http_allow_remote: config.http_allow_remote,
            settings: Arc::from(config.to_toml().as_str()),
            tls,
        }
    }

    /// The listeners' TLS acceptor when they speak TLS: the HTTP server wraps its
    /// connections with it (a reload of the broker's reaches it too).
    pub fn tls(&self) -> Option<&ferry_tls::Acceptor> {
        self.tls.as_ref()
    }

    /// The store (read its figures with [`ferry_store::Admin`]).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// The broker's counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// `embedded` or `postgres`.
    pub fn engine(&self) -> &'static str {
        self.engine
    }

    /// Ferry's version.
    pub fn version(&self) -> &'static str {
        env!("CARGO_PKG_VERSION")
    }

    /// Seconds since the broker started.
    pub fn uptime_secs(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// When the broker started, ms since the Unix epoch.
    pub fn started_at_ms(&self) -> u64 {
        self.started_at_ms
    }

    /// The broker clock's time, ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.shared.now_ms()
    }

    /// Whether `/metrics` carries per-queue and per-subscription series.
    pub fn metrics_per_object(&self) -> bool {
        self.metrics_per_object
    }

    /// Whether the HTTP listener may serve other hosts than loopback (`http_allow_remote`).
    pub fn http_allow_remote(&self) -> bool {
        self.http_allow_remote
    }

    /// The resolved settings as TOML (secrets masked).
    pub fn settings(&self) -> &str {
        &self.settings
    }

    /// The limits enforced.
    pub fn limits(&self) -> ferry_protocol::Limits {
        self.shared.limits
    }

    /// Whether the broker is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.shared.shutdown.is_cancelled()
    }

    /// Cancelled when the broker starts shutting down.
    pub fn shutdown_token(&self) -> tokio_util::sync::CancellationToken {
        self.shared.shutdown.clone()
    }

    /// The live sessions on this node, by client name.
    pub fn sessions(&self) -> Vec<SessionView> {
        self.shared
            .sessions
            .list()
            .into_iter()
            .map(|e| {
                let session = e.session();
                SessionView {
                    subscriptions: session
                        .as_ref()
                        .map(|s| {
                            s.subscription_summaries()
                                .into_iter()
                                .map(|(_, queue, selector, ack)| SubscriptionView {
                                    queue: queue.to_string(),
                                    selector: selector.to_string(),
                                    client_ack: ack == AckMode::Client,
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    in_flight: session.as_ref().map_or(0, |s| s.in_flight()),
                    client: e.client,
                    protocol: e.protocol,
                    peer: e.peer,
                    connected_at_ms: e.connected_at_ms,
                }
            })
            .collect()
    }

    /// Number of live sessions on this node.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.len()
    }

    /// Closes the live session of `client` on this node (its unsettled deliveries return to
    /// their queues); whether there was one.
    pub fn disconnect(&self, client: &str) -> bool {
        self.shared.sessions.close(client)
    }

    /// Creates a queue (as the protocol's create_queue).
    pub async fn create_queue(&self, name: &str, options: QueueOptions) -> Result<(), ErrorReply> {
        reply(queues::create(&self.shared, name.to_owned(), options).await)
    }

    /// Deletes a queue (as the protocol's delete_queue).
    pub async fn delete_queue(&self, name: &str, force: bool) -> Result<(), ErrorReply> {
        reply(queues::delete(&self.shared, name.to_owned(), force).await)
    }

    /// Creates a topic.
    pub async fn create_topic(&self, name: &str) -> Result<(), ErrorReply> {
        reply(topics::create(&self.shared, name.to_owned()).await)
    }

    /// Deletes a topic.
    pub async fn delete_topic(&self, name: &str, force: bool) -> Result<(), ErrorReply> {
        reply(topics::delete(&self.shared, name.to_owned(), force).await)
    }

    /// Removes a subscription (refused while it has consumers).
    pub async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), ErrorReply> {
        reply(topics::unsubscribe(&self.shared, topic.to_owned(), name.to_owned()).await)
    }

    /// Changes a queue's settings.
    pub async fn set_queue_options(
        &self,
        name: &str,
        options: &QueueOptions,
    ) -> Result<(), ErrorReply> {
        validate::queue_or_subscription(name, &self.shared.limits)?;
        for other in [&options.dead_letter_queue, &options.expiry_queue]
            .into_iter()
            .flatten()
        {
            validate::name("queue", other, &self.shared.limits)?;
        }
        self.shared
            .store
            .admin()
            .set_queue_options(name, options)
            .await
            .map_err(|e| store_reply(&e))
    }

    /// Moves messages, then wakes the waiters of the queues that got them.
    pub async fn move_messages(
        &self,
        from: &str,
        target: &MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<MoveReport, ErrorReply> {
        validate::queue_or_subscription(from, &self.shared.limits)?;
        let report = self
            .shared
            .store
            .admin()
            .move_messages(from, target, ids, limit)
            .await
            .map_err(|e| store_reply(&e))?;
        let mut queues: Vec<String> = report.moved.iter().map(|(_, q)| q.clone()).collect();
        queues.sort_unstable();
        queues.dedup();
        self.shared.wakers.notify(&queues);
        for q in &queues {
            if let Some((topic, _)) = ferry_protocol::split_subscription_queue(q) {
                self.shared.wakers.notify_topic(topic);
            }
        }
        Ok(report)
    }

    /// Sends (or publishes) a message from client `sender` (registered if new), as the
    /// protocol's send: validated, stored, waiters woken.
    pub async fn send(&self, sender: &str, m: OutgoingMessage) -> Result<MessageId, ErrorReply> {
        validate::name("client", sender, &self.shared.limits)?;
        validate::message(&m, &self.shared.limits)?;
        if m.queues.is_empty() && m.topic.is_none() {
            return Err(ErrorReply::new(
                ErrorCode::InvalidArgument,
                "name at least one queue, or a topic",
            ));
        }
        let store = &self.shared.store;
        store
            .sessions()
            .register_client(sender)
            .await
            .map_err(|e| store_reply(&e))?;
        let now = self.shared.now_ms();
        let after = |ms: u64| if ms == 0 { 0 } else { now.saturating_add(ms) };
        let queues = m.queues.clone();
        let topic = m.topic.clone();
        let delayed = m.delay_ms > 0;
        let properties = crate::handlers::with_topic(m.properties, m.topic.as_deref());
        let id = store
            .queues()
            .send(NewMessage {
                queues: m.queues,
                topic: m.topic,
                persistent: m.persistent,
                sender: Arc::from(sender),
                receiver: m.receiver,
                priority: m.priority,
                context: m.context,
                properties,
                body: m.body,
                created_at: now,
                deliver_at_ms: after(m.delay_ms),
                expires_at_ms: after(m.ttl_ms),
            })
            .await
            .map_err(|e| store_reply(&e))?;
        Stats::add(&self.shared.stats.messages_sent, 1);
        if delayed {
            self.shared.delayed_sent.notify_one();
        }
        self.shared.wakers.notify(&queues);
        if let Some(t) = topic {
            Stats::add(&self.shared.stats.messages_published, 1);
            self.shared.wakers.notify_topic(&t);
        }
        Ok(id)
    }
}
