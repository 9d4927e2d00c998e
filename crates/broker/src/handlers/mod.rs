//! One handler per operation. Each takes the shared state, the session and the decoded request
//! and returns the response; none touches sockets or bytes.
//!
//! Handlers call the store without awaiting anything first, so a store whose call takes effect
//! on its first poll (the embedded engine) sees a connection's requests in the order they came.

pub mod queues;
pub mod receive;
pub mod send;
pub mod settle;
pub mod subscribe;
pub mod topics;
pub mod txn;
pub mod validate;

use ferry_protocol::{OutgoingMessage, Response};
use ferry_store::{NewMessage, StoreError};

use crate::session::Session;

/// The error response for a store error.
pub fn store_error(e: &StoreError) -> Response {
    Response::error(e.code(), e.to_string())
}

/// `properties` with the topic of a publish in [`TOPIC_PROPERTY`] (replacing a sender's own),
/// so that receivers of pattern subscriptions, and selectors, know the concrete topic.
///
/// [`TOPIC_PROPERTY`]: ferry_protocol::topic::TOPIC_PROPERTY
pub fn with_topic(
    mut properties: ferry_protocol::Properties,
    topic: Option<&str>,
) -> ferry_protocol::Properties {
    use ferry_protocol::topic::TOPIC_PROPERTY;
    if let Some(topic) = topic {
        let named = (
            TOPIC_PROPERTY.to_owned(),
            ferry_protocol::PropertyValue::Str(topic.to_owned()),
        );
        if properties.is_empty() {
            // Most publishes carry no properties of their own: one allocation of one slot,
            // not a vector grown to four (this runs once per message published).
            return vec![named].into();
        }
        let own = properties.to_mut();
        own.retain(|(name, _)| name != TOPIC_PROPERTY);
        own.push(named);
    }
    properties
}

/// The message to store for `m` from `session`, arriving at `created_at`.
pub fn to_new(m: OutgoingMessage, session: &Session, created_at: u64) -> NewMessage {
    let properties = with_topic(m.properties, m.topic.as_deref());
    NewMessage {
        queues: m.queues,
        topic: m.topic,
        persistent: m.persistent,
        sender: session.sender.clone(),
        receiver: m.receiver,
        priority: m.priority,
        context: m.context,
        properties,
        body: m.body,
        created_at,
        deliver_at_ms: if m.delay_ms == 0 {
            0
        } else {
            created_at.saturating_add(m.delay_ms)
        },
        expires_at_ms: if m.ttl_ms == 0 {
            0
        } else {
            created_at.saturating_add(m.ttl_ms)
        },
    }
}
