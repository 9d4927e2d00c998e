//! Topics and transactions on RabbitMQ: a topic is a durable topic exchange; a subscription a
//! queue bound to it by the subscription's binding keys (durable and named
//! `<topic>:<name>` when durable, exclusive and auto-deleted otherwise), consumed like any
//! queue; a transaction is a channel in `tx.select` mode.

use std::sync::atomic::Ordering;

use lapin::options::{
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::ExchangeKind;

use super::{err, AmqpConnection};
use crate::drivers::{Consumer, DriverError, TopicSubscription};

/// The queue of durable subscription `name` of `topic`.
fn durable_queue(topic: &str, name: &str) -> String {
    format!("{topic}:{name}")
}

impl AmqpConnection {
    /// Declares the topic exchange `topic`.
    pub(super) async fn declare_exchange(&self, topic: &str) -> Result<(), DriverError> {
        let ch = self
            .conn
            .create_channel()
            .await
            .map_err(|e| err("channel", e))?;
        ch.exchange_declare(
            topic.into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| err(&format!("declare exchange '{topic}'"), e))?;
        let _ = ch.close(200, "done".into()).await;
        Ok(())
    }

    /// A consumer of a queue bound to `topic` by `sub`'s binding keys.
    pub(super) async fn bound_consumer(
        &self,
        topic: &str,
        sub: &TopicSubscription,
    ) -> Result<Box<dyn Consumer>, DriverError> {
        let ch = self
            .conn
            .create_channel()
            .await
            .map_err(|e| err("channel", e))?;
        let (name, options) = match &sub.durable {
            Some(d) => (
                durable_queue(topic, d),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
            ),
            None => (
                String::new(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..Default::default()
                },
            ),
        };
        let queue = ch
            .queue_declare(name.as_str().into(), options, FieldTable::default())
            .await
            .map_err(|e| err("declare subscription queue", e))?;
        let queue = queue.name().to_string();
        let keys = if sub.bindings.is_empty() {
            vec!["#".to_string()]
        } else {
            sub.bindings.clone()
        };
        for key in keys {
            ch.queue_bind(
                queue.as_str().into(),
                topic.into(),
                key.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| err(&format!("bind '{queue}' to '{topic}' by '{key}'"), e))?;
        }
        let _ = ch.close(200, "done".into()).await;
        // The exclusive queue belongs to this connection; consuming it on another channel of
        // the same connection is allowed.
        crate::drivers::Connection::consume(self, &queue, sub.prefetch).await
    }

    /// Deletes the queue of durable subscription `name` of `topic`.
    pub(super) async fn delete_bound_queue(
        &self,
        topic: &str,
        name: &str,
    ) -> Result<(), DriverError> {
        self.delete_plain_queue(&durable_queue(topic, name)).await
    }

    /// Deletes `queue` (nothing when it does not exist).
    pub(super) async fn delete_plain_queue(&self, queue: &str) -> Result<(), DriverError> {
        let ch = self
            .conn
            .create_channel()
            .await
            .map_err(|e| err("channel", e))?;
        let _ = ch
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await;
        let _ = ch.close(200, "done".into()).await;
        Ok(())
    }

    /// Deletes the topic exchange `topic`.
    pub(super) async fn delete_exchange(&self, topic: &str) -> Result<(), DriverError> {
        let ch = self
            .conn
            .create_channel()
            .await
            .map_err(|e| err("channel", e))?;
        let _ = ch
            .exchange_delete(topic.into(), ExchangeDeleteOptions::default())
            .await;
        let _ = ch.close(200, "done".into()).await;
        Ok(())
    }

    /// Sends go to a channel in transaction mode until the commit.
    pub(super) async fn tx_begin(&self) -> Result<(), DriverError> {
        let mut tx = self.tx.lock().await;
        if tx.is_none() {
            let ch = self
                .conn
                .create_channel()
                .await
                .map_err(|e| err("channel", e))?;
            ch.tx_select().await.map_err(|e| err("tx.select", e))?;
            *tx = Some(ch);
        }
        self.in_tx.store(true, Ordering::Release);
        Ok(())
    }

    /// Commits what was sent since [`AmqpConnection::tx_begin`].
    pub(super) async fn tx_commit(&self) -> Result<(), DriverError> {
        let tx = self.tx.lock().await;
        let ch = tx
            .as_ref()
            .ok_or_else(|| err("tx.commit", "no transaction"))?;
        let r = ch.tx_commit().await.map_err(|e| err("tx.commit", e));
        self.in_tx.store(false, Ordering::Release);
        r
    }
}
