//! Store errors and how they map to the wire's error codes.

use ferry_protocol::{DeliveryId, ErrorCode};
use thiserror::Error;

/// Why a store operation failed. Each variant names the thing at fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// A named queue does not exist.
    #[error("queue '{0}' does not exist")]
    QueueNotFound(String),
    /// The queue exists already.
    #[error("queue '{0}' already exists")]
    QueueExists(String),
    /// The queue holds messages and the delete was not forced.
    #[error("queue '{name}' is not empty ({depth} messages)")]
    QueueNotEmpty {
        /// The queue.
        name: String,
        /// Messages ready plus in flight.
        depth: u64,
    },
    /// A named topic does not exist.
    #[error("topic '{0}' does not exist")]
    TopicNotFound(String),
    /// The topic exists already.
    #[error("topic '{0}' already exists")]
    TopicExists(String),
    /// The topic's subscriptions hold messages and the delete was not forced.
    #[error("topic '{name}' is not empty ({depth} messages on its subscriptions)")]
    TopicNotEmpty {
        /// The topic.
        name: String,
        /// Messages ready plus in flight, over all its subscriptions.
        depth: u64,
    },
    /// A named subscription does not exist (`topic:name`).
    #[error("subscription '{0}' does not exist")]
    SubscriptionNotFound(String),
    /// The subscription (`topic:name`) has a consumer that excludes the one asked for (it is not
    /// shared), or consumers that forbid removing it; on any node sharing the store.
    #[error("subscription '{0}' is in use")]
    SubscriptionInUse(String),
    /// A named client has never connected.
    #[error("client '{0}' does not exist")]
    ClientNotFound(String),
    /// Unknown or already settled delivery ids (the others in the same request were settled).
    #[error("unknown or already settled delivery ids: {0:?}")]
    DeliveriesNotFound(Vec<DeliveryId>),
    /// A message is not ready (or delayed) on a queue: gone, in flight, never there.
    #[error("message {id} is not waiting on queue '{queue}'")]
    MessageNotFound {
        /// The queue.
        queue: String,
        /// The message id.
        id: ferry_protocol::MessageId,
    },
    /// The queue is the dead-letter or expiry queue of another queue, which names it.
    #[error("queue '{name}' is the {role} queue of '{used_by}'; change that queue's settings first, or force the delete")]
    QueueInUse {
        /// The queue.
        name: String,
        /// `dead-letter` or `expiry`.
        role: &'static str,
        /// The queue that names it.
        used_by: String,
    },
    /// An argument the store cannot accept.
    #[error("{0}")]
    InvalidArgument(String),
    /// A named user does not exist.
    #[error("user '{0}' does not exist")]
    UserNotFound(String),
    /// The user exists already.
    #[error("user '{0}' already exists")]
    UserExists(String),
    /// The client name has a live session (on this node or another one sharing the store).
    #[error("client '{0}' is already online")]
    AlreadyOnline(String),
    /// A count limit of the store (e.g. number of queues) is reached.
    #[error("{0}")]
    LimitExceeded(String),
    /// The store could not complete a write (an I/O error, a failed fsync that poisoned it, a
    /// database out of reach): the operation's outcome is unknown, it may still take effect
    /// (as after a timeout).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store refuses the operation for lack of a resource (disk space kept in reserve for
    /// operations that free space, a database out of disk): nothing of it took effect; retry
    /// later.
    #[error("{0}")]
    ResourceExhausted(String),
    /// A bug or an impossible state.
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// The wire error code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            StoreError::QueueNotFound(_) => ErrorCode::QueueNotFound,
            StoreError::QueueExists(_) => ErrorCode::QueueExists,
            StoreError::QueueNotEmpty { .. } => ErrorCode::QueueNotEmpty,
            StoreError::ClientNotFound(_) => ErrorCode::ClientNotFound,
            StoreError::TopicNotFound(_) => ErrorCode::TopicNotFound,
            StoreError::TopicExists(_) => ErrorCode::TopicExists,
            StoreError::TopicNotEmpty { .. } => ErrorCode::TopicNotEmpty,
            StoreError::SubscriptionNotFound(_) => ErrorCode::NotFound,
            StoreError::SubscriptionInUse(_) => ErrorCode::SubscriptionInUse,
            StoreError::DeliveriesNotFound(_) => ErrorCode::NotFound,
            StoreError::MessageNotFound { .. } => ErrorCode::NotFound,
            StoreError::QueueInUse { .. } => ErrorCode::QueueInUse,
            StoreError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            StoreError::UserNotFound(_) => ErrorCode::NotFound,
            StoreError::UserExists(_) => ErrorCode::InvalidArgument,
            StoreError::AlreadyOnline(_) => ErrorCode::AlreadyOnline,
            StoreError::LimitExceeded(_) => ErrorCode::LimitExceeded,
            StoreError::Unavailable(_) => ErrorCode::StoreUnavailable,
            StoreError::ResourceExhausted(_) => ErrorCode::ResourceExhausted,
            StoreError::Internal(_) => ErrorCode::Internal,
        }
    }
}
