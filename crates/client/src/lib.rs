//! The async Rust client for Ferry, on tokio.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferry_client::ClientError> {
//! use ferry_client::{Client, OutgoingMessage, Receive, Source, Order, ReceiveMode, AckMode};
//!
//! let client = Client::connect("127.0.0.1:6730", "app-1").await?;
//! client.create_queue("orders").await?;
//! let id = client.send(OutgoingMessage::new("orders", "hello")).await?;
//! let got = client
//!     .receive(Receive {
//!         source: Source::Queue("orders".into()),
//!         order: Order::Priority,
//!         mode: ReceiveMode::Take,
//!         ack: AckMode::Client,
//!         wait_ms: 1000,
//!         selector: String::new(),
//!     })
//!     .await?;
//! if let Some(d) = got {
//!     assert_eq!(d.message.id, id);
//!     client.ack(&[d.delivery_id]).await?;
//! }
//! client.disconnect().await?;
//! # Ok(()) }
//! ```
//!
//! One [`Client`] is one connection and one session. It is cheap to clone, and its methods may
//! be called from many tasks at once: requests are pipelined over the connection, written in
//! batches, and replies are matched to callers by request id, in whatever order they come.
//!
//! Modules:
//! - `client`: [`Client`], one method per broker operation on queues and messages;
//! - `topics`: topics, publishing and topic subscriptions on [`Client`];
//! - `transactions`: [`Client::begin`], [`Client::commit`], [`Client::rollback`];
//! - `connection`: the reader and writer tasks, the table of waiting calls, the routing of
//!   pushes, and concurrent single sends gathered into batch requests by the writer;
//! - `subscription`: [`Client::subscribe`] and [`Subscription`], pushed deliveries as a stream,
//!   with automatic credit;
//! - `batch`: [`DeliveryBatch`], pushed deliveries as the reader decoded them, read in place;
//! - `checks`: client-side checks against the limits the broker advertised;
//! - `options`: [`ConnectOptions`];
//! - `error`: [`ClientError`].
//!
//! The protocol types used in this API are re-exported from `ferry-protocol`, which is also
//! available whole as [`protocol`].
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod auth;
mod batch;
mod checks;
mod client;
mod connection;
mod error;
mod options;
mod pushes;
mod subscription;
mod topics;
mod transactions;

pub use batch::{DeliveryBatch, IntoDeliveries};
pub use client::Client;
pub use error::ClientError;
pub use ferry_tls::ClientTls;
pub use options::{ConnectOptions, Password};
pub use subscription::Subscription;

pub use ferry_protocol as protocol;
pub use ferry_protocol::requests::{Receive, Subscribe, SubscribeTopic};
pub use ferry_protocol::{
    subscription_queue, AckMode, Delivery, DeliveryId, DeliveryView, ErrorCode, ErrorReply, Limits,
    Message, MessageId, Order, OutgoingMessage, Properties, PropertyValue, PublishBatch, QueueInfo,
    QueueOptions, ReceiveMode, Source, SubscriptionId, SubscriptionInfo, SubscriptionOptions,
    TopicInfo, WireError,
};
