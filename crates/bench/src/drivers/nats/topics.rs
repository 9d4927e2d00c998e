//! Topics on NATS. Core mode: a topic is the subject `ferrybench.topic.<topic>`, and each
//! subscription a plain subscription to it (not a queue group), so every subscriber gets every
//! message and nothing is stored. JetStream mode: a topic is a stream on that subject with file
//! storage and interest retention (a message is kept until every consumer has acknowledged
//! it), each subscription a pull consumer of its own that starts at new messages: durable ones
//! under their name, the others ephemeral (the server drops them when they go idle).

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::stream;
use tokio::sync::mpsc;

use super::{
    acker, err, stream_name, unsupported, CoreConsumer, JetStreamConsumer, NatsConnection,
    NatsMode, MAX_BATCH,
};
use crate::drivers::{Consumer, DriverError, TopicSubscription};

/// How long an idle ephemeral consumer outlives its subscriber.
const EPHEMERAL_IDLE: Duration = Duration::from_secs(10);

/// The subject a topic's messages are published on.
pub fn topic_subject(topic: &str) -> String {
    format!("ferrybench.topic.{topic}")
}

/// The JetStream stream holding `topic`.
fn topic_stream_name(topic: &str) -> String {
    stream_name(&format!("topic_{topic}"))
}

impl NatsConnection {
    /// In JetStream mode, the topic's stream (created when missing); nothing in core mode.
    pub(super) async fn topic_stream_if_stored(&self, topic: &str) -> Result<(), DriverError> {
        if self.mode == NatsMode::JetStream {
            self.topic_stream(topic).await?;
        }
        Ok(())
    }

    async fn topic_stream(&self, topic: &str) -> Result<stream::Stream, DriverError> {
        self.js
            .get_or_create_stream(stream::Config {
                name: topic_stream_name(topic),
                subjects: vec![topic_subject(topic)],
                storage: stream::StorageType::File,
                retention: stream::RetentionPolicy::Interest,
                num_replicas: 1,
                ..Default::default()
            })
            .await
            .map_err(|e| err(&format!("stream for topic '{topic}'"), e))
    }

    /// A subscription to `topic`, live when this returns.
    pub(super) async fn topic_consumer(
        &self,
        topic: &str,
        spec: &TopicSubscription,
    ) -> Result<Box<dyn Consumer>, DriverError> {
        if !spec.selector.is_empty() {
            return Err(unsupported("a subscription with a selector"));
        }
        let label = format!(
            "{topic}:{}",
            spec.durable.as_deref().unwrap_or("(non-durable)")
        );
        match self.mode {
            NatsMode::Core => {
                let sub = self
                    .client
                    .subscribe(topic_subject(topic))
                    .await
                    .map_err(|e| err("subscribe", e))?;
                // The subscription is live once the server has seen it.
                self.client.flush().await.map_err(|e| err("flush", e))?;
                Ok(Box::new(CoreConsumer {
                    sub,
                    queue: label.into(),
                }))
            }
            NatsMode::JetStream => {
                let stream = self.topic_stream(topic).await?;
                let config = pull::Config {
                    durable_name: spec.durable.clone(),
                    deliver_policy: DeliverPolicy::New,
                    ack_policy: if spec.client_ack {
                        AckPolicy::Explicit
                    } else {
                        AckPolicy::None
                    },
                    max_ack_pending: i64::from(spec.prefetch.max(1)) * 64,
                    inactive_threshold: if spec.durable.is_some() {
                        Duration::ZERO
                    } else {
                        EPHEMERAL_IDLE
                    },
                    ..Default::default()
                };
                let consumer = match &spec.durable {
                    Some(name) => stream.get_or_create_consumer(name, config).await,
                    None => stream.create_consumer(config).await,
                }
                .map_err(|e| err(&format!("consumer for '{label}'"), e))?;
                let messages = consumer
                    .stream()
                    .max_messages_per_batch(spec.prefetch.clamp(1, MAX_BATCH) as usize)
                    .messages()
                    .await
                    .map_err(|e| err("pull", e))?;
                let (tx, rx) = mpsc::unbounded_channel();
                Ok(Box::new(JetStreamConsumer {
                    messages,
                    queue: label.into(),
                    unacked: HashMap::new(),
                    next_token: 1,
                    acks: tx,
                    acker: tokio::spawn(acker(rx)),
                    no_ack: !spec.client_ack,
                }))
            }
        }
    }

    /// Deletes the durable consumer `name` of `topic`'s stream, if both exist.
    pub(super) async fn remove_topic_consumer(
        &self,
        topic: &str,
        name: &str,
    ) -> Result<(), DriverError> {
        if self.mode != NatsMode::JetStream {
            return Ok(());
        }
        let Ok(stream) = self.js.get_stream(topic_stream_name(topic)).await else {
            // No stream: no consumer either.
            return Ok(());
        };
        // A consumer that does not exist is what was wanted.
        let _ = stream.delete_consumer(name).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            topic_subject("bench-fanout"),
            "ferrybench.topic.bench-fanout"
        );
        assert_eq!(
            topic_stream_name("bench-fanout"),
            "FERRYBENCH_topic_bench-fanout"
        );
    }
}
