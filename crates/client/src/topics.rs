//! Topics on [`Client`]: creating, deleting and listing them, publishing, and subscribing to
//! them (push consumers, and durable subscriptions created without consuming).

use ferry_protocol::deliver_batch::MAX_REPEATED_PROPERTY_BYTES;
use ferry_protocol::publish_batch::MAX_PUBLISH_BATCH_BODIES;
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::size::properties_len;
use ferry_protocol::{
    ErrorCode, ErrorReply, MessageId, OutgoingMessage, PublishBatch, Request, Response, TopicInfo,
    WireError, HEADER_LEN,
};
use tokio::sync::mpsc;

use crate::checks::{check_batch_len, check_message, check_str, check_subscribe_topic};
use crate::client::{batch_results, expect_reply, Client};
use crate::error::ClientError;
use crate::subscription::Subscription;

impl Client {
    /// Creates a topic. `TopicExists` if it exists, `InvalidArgument` for a bad name (topics
    /// follow the queue-name rules, in a namespace of their own).
    pub async fn create_topic(&self, name: &str) -> Result<(), ClientError> {
        check_str("topic name", name)?;
        self.call_ok(Request::CreateTopic { name: name.into() })
            .await
    }

    /// Deletes a topic with all its subscriptions. `TopicNotEmpty` if a subscription holds
    /// messages and `force` is false; `TopicNotFound` if it does not exist.
    pub async fn delete_topic(&self, name: &str, force: bool) -> Result<(), ClientError> {
        check_str("topic name", name)?;
        self.call_ok(Request::DeleteTopic {
            name: name.into(),
            force,
        })
        .await
    }

    /// Every topic (sorted by name) with its subscriptions and their depths.
    pub async fn list_topics(&self) -> Result<Vec<TopicInfo>, ClientError> {
        let reply = self.call(Request::ListTopics).await?;
        expect_reply!(reply, Response::Topics(t) => t)
    }

    /// Publishes a message to its topic ([`OutgoingMessage::to_topic`]): a copy goes to every
    /// subscription whose selector matches; returns its id once the broker has stored it (an
    /// id is returned even when no subscription matched). `TopicNotFound` if the topic does
    /// not exist.
    ///
    /// The same as [`Client::send`] (a publish is a message with a topic and no queues), and
    /// coalesced with concurrent sends and publishes the same way. Inside a transaction the id
    /// is 0: [`Client::commit`] returns the ids.
    ///
    /// ```no_run
    /// # async fn demo(client: ferry_client::Client) -> Result<(), ferry_client::ClientError> {
    /// use ferry_client::OutgoingMessage;
    ///
    /// client.create_topic("prices").await?;
    /// client.publish(OutgoingMessage::to_topic("prices", "EUR 1.08")).await?;
    /// // Fast, but lost if the broker stops before it is consumed.
    /// client
    ///     .publish(OutgoingMessage::to_topic("prices", "EUR 1.09").non_persistent())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish(&self, msg: OutgoingMessage) -> Result<MessageId, ClientError> {
        self.send(msg).await
    }

    /// Publishes every body of `batch` as a message of its own to its topic, with the batch's
    /// priority, time to live, delay, persistence and properties; each succeeds or fails on its
    /// own, and the results come back in order, as from [`Client::send_batch`].
    ///
    /// The batch travels as one `PublishBatch` request, its shared fields written once (a
    /// quarter of the bytes of a `SendBatch` of 150-byte bodies, and less work for both
    /// ends). A batch that cannot go as one (larger than the frame limit, a body over the
    /// broker's limit) goes as a [`Client::send_batch`] instead, split as that splits. More
    /// bodies than the broker's `max_batch`, or shared fields that no message may carry,
    /// fail the whole call without a round trip.
    ///
    /// ```no_run
    /// # async fn demo(client: ferry_client::Client) -> Result<(), ferry_client::ClientError> {
    /// use ferry_client::PublishBatch;
    ///
    /// let bodies = vec!["r1".into(), "r2".into(), "r3".into()];
    /// let results = client
    ///     .publish_batch(PublishBatch::new("monitoring", bodies).non_persistent())
    ///     .await?;
    /// assert_eq!(results.len(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn publish_batch(
        &self,
        batch: PublishBatch,
    ) -> Result<Vec<Result<MessageId, ClientError>>, ClientError> {
        let limits = &self.limits();
        check_batch_len(batch.bodies.len(), limits)?;
        check_str("topic name", &batch.topic)?;
        check_message(&batch.message(bytes::Bytes::new()), limits)?;
        let n = batch.bodies.len();
        let len = HEADER_LEN + batch.encoded_len();
        let fits = n > 0
            && n <= MAX_PUBLISH_BATCH_BODIES
            && len <= limits.max_frame_bytes as usize
            && (properties_len(&batch.properties) - 2).saturating_mul(n)
                <= MAX_REPEATED_PROPERTY_BYTES
            && batch
                .bodies
                .iter()
                .all(|b| b.len() <= limits.max_body_bytes as usize);
        if !fits {
            let items = batch.bodies.handles().map(|b| batch.message(b)).collect();
            return self.send_batch(items).await;
        }
        let reply = self.shared().submit_publish_batch(&batch)?.reply().await?;
        batch_results(reply, n)
    }

    /// Subscribes to a topic with push delivery; read the deliveries from the returned
    /// [`Subscription`], whose [`Subscription::queue`] is the subscription's queue
    /// (`topic:name`).
    ///
    /// A non-durable subscription is created for this consumer and removed when it ends
    /// (cancel, drop, disconnect). A durable one is created, or attached to if it exists (its
    /// durable, shared and selector settings must then be the same, else `InvalidArgument`);
    /// cancelling keeps it and its backlog. `SubscriptionInUse` when a durable subscription
    /// that is not shared is consumed by another session; `TopicNotFound`.
    ///
    /// The prefetch must be at least 1: a prefetch of 0 fails with `InvalidArgument` without a
    /// round trip (to create or check a subscription without consuming, use
    /// [`Client::ensure_subscription`]).
    ///
    /// ```no_run
    /// # async fn demo(client: ferry_client::Client) -> Result<(), ferry_client::ClientError> {
    /// use ferry_client::SubscribeTopic;
    ///
    /// let mut sub = client
    ///     .subscribe_topic(SubscribeTopic::new("prices").durable("audit").with_selector("region = 'eu'"))
    ///     .await?;
    /// assert_eq!(sub.queue(), "prices:audit");
    /// while let Some(d) = sub.next().await {
    ///     let d = d?;
    ///     sub.ack(&[d.delivery_id]).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn subscribe_topic(&self, sub: SubscribeTopic) -> Result<Subscription, ClientError> {
        check_subscribe_topic(&sub)?;
        if sub.prefetch == 0 {
            return Err(ClientError::Server(ErrorReply::new(
                ErrorCode::InvalidArgument,
                "a topic subscription to consume needs a prefetch of at least 1 \
                 (ensure_subscription creates one without consuming)",
            )));
        }
        let (events_tx, events) = mpsc::unbounded_channel();
        let ack = sub.ack;
        let prefetch = sub.prefetch;
        let reply = self
            .shared()
            .submit_subscribe(&Request::SubscribeTopic(sub), events_tx)?
            .reply()
            .await?;
        let (id, queue) = match reply {
            Response::TopicSubscribed {
                subscription,
                queue,
            } if subscription != 0 => (subscription, queue),
            // Id 0 names no subscription: nothing would ever be pushed to it.
            Response::TopicSubscribed { .. } => {
                return Err(ClientError::Protocol(WireError::InvalidValue {
                    field: "subscription id",
                    value: 0,
                }))
            }
            other => return Err(ClientError::unexpected(other.kind())),
        };
        Ok(Subscription::new(
            id,
            queue,
            self.clone(),
            events,
            ack,
            prefetch,
        ))
    }

    /// Creates a topic subscription without consuming it, or checks that the existing one has
    /// the same durable, shared and selector settings (`InvalidArgument` naming the
    /// difference); returns the name of its queue (`topic:name`), from which receives may
    /// pull. `sub`'s prefetch is ignored (the request carries 0).
    ///
    /// Meant for durable subscriptions: a non-durable one is removed by the broker as soon as
    /// it has no consumer.
    pub async fn ensure_subscription(&self, sub: SubscribeTopic) -> Result<String, ClientError> {
        check_subscribe_topic(&sub)?;
        let reply = self.call(Request::SubscribeTopic(sub.prefetch(0))).await?;
        expect_reply!(reply, Response::TopicSubscribed { queue, .. } => queue)
    }

    /// Removes a subscription with every message it holds. `TopicNotFound`, `NotFound` (no
    /// such subscription), `SubscriptionInUse` (it is being consumed).
    pub async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), ClientError> {
        check_str("topic name", topic)?;
        check_str("subscription name", name)?;
        self.call_ok(Request::Unsubscribe {
            topic: topic.into(),
            name: name.into(),
        })
        .await
    }
}
