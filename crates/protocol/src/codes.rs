//! The one error-code enum of the protocol. Numbers are stable and never reused.

use std::fmt;

use crate::numbered::numbered_enum;

numbered_enum! {
    /// Every error a broker can report, with its wire number. New codes get new numbers; a number
    /// that was ever used is never given to another meaning.
    pub enum ErrorCode {
        /// A named queue does not exist.
        QueueNotFound = 1,
        /// `create_queue` for a name that exists.
        QueueExists = 2,
        /// `delete_queue` without `force` on a queue that holds messages.
        QueueNotEmpty = 3,
        /// A named client (receiver, sender) has never connected.
        ClientNotFound = 4,
        /// Another session of the same client name is live.
        AlreadyOnline = 5,
        /// The broker is at its connection limit.
        ServerFull = 6,
        /// A malformed name, an out-of-range value or a request that makes no sense.
        InvalidArgument = 7,
        /// A body, frame or batch over the configured limit.
        TooLarge = 8,
        /// Credentials refused, or a request before `connect`.
        Unauthorized = 9,
        /// An unknown or already settled delivery id, an unknown subscription.
        NotFound = 10,
        /// The client speaks a protocol version this broker does not.
        UnsupportedVersion = 11,
        /// The store cannot write (disk full, failed fsync, database gone).
        StoreUnavailable = 12,
        /// A bug in the broker; the message says what.
        Internal = 13,
        /// A request type this broker does not know.
        UnknownRequest = 14,
        /// A per-session or per-broker count limit (in-flight deliveries, prefetch, queues) is reached.
        LimitExceeded = 15,
        /// A named topic does not exist.
        TopicNotFound = 16,
        /// `create_topic` for a name that exists.
        TopicExists = 17,
        /// `delete_topic` without `force` on a topic whose subscriptions hold messages.
        TopicNotEmpty = 18,
        /// A subscription is consumed by another session and is not shared, or `unsubscribe` of a
        /// subscription that has consumers.
        SubscriptionInUse = 19,
        /// A transaction request out of order: commit or rollback without `begin`, `begin` twice.
        TransactionState = 20,
        /// The broker is short of a resource (memory over its budget, disk space kept in reserve)
        /// and refuses new work until it recovers; retry later. Nothing of the refused request took
        /// effect.
        ResourceExhausted = 21,
        /// `delete_queue` without `force` of a queue that another queue names as its dead-letter
        /// or expiry queue; the message names that queue.
        QueueInUse = 22,
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
