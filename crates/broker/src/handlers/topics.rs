//! create_topic, delete_topic, list_topics and unsubscribe.

use ferry_protocol::{subscription_queue, ErrorCode, Response};

use super::{store_error, validate};
use crate::shared::Shared;

/// create_topic: `InvalidArgument` for a bad name, `TopicExists`.
pub async fn create(shared: &Shared, name: String) -> Response {
    if let Err(e) = validate::topic(&name, &shared.limits) {
        return Response::Error(e);
    }
    match shared.store.topics().create_topic(&name).await {
        Ok(()) => Response::Ok,
        Err(e) => store_error(&e),
    }
}

/// delete_topic: `TopicNotFound`, `TopicNotEmpty` unless forced. The subscriptions go with it;
/// their consumers are woken, find their queue gone and are closed.
pub async fn delete(shared: &Shared, name: String, force: bool) -> Response {
    if let Err(e) = validate::topic(&name, &shared.limits) {
        return Response::Error(e);
    }
    match shared.store.topics().delete_topic(&name, force).await {
        Ok(()) => {
            shared.wakers.notify_topic(&name);
            Response::Ok
        }
        Err(e) => store_error(&e),
    }
}

/// list_topics.
pub async fn list(shared: &Shared) -> Response {
    match shared.store.topics().list_topics().await {
        Ok(ts) => Response::Topics(ts),
        Err(e) => store_error(&e),
    }
}

/// unsubscribe: removes a subscription with its backlog. `SubscriptionInUse` while a session
/// consumes it (on this node, checked here first, or on another sharing the store);
/// `TopicNotFound`; `NotFound` for an unknown subscription (also of a pattern, which exists
/// only through its subscriptions).
pub async fn unsubscribe(shared: &Shared, topic: String, name: String) -> Response {
    if let Err(e) = validate::topic_or_pattern(&topic, &shared.limits) {
        return Response::Error(e);
    }
    if let Err(e) = validate::name("subscription", &name, &shared.limits) {
        return Response::Error(e);
    }
    let queue = subscription_queue(&topic, &name);
    if shared.consumers.in_use(&queue) {
        return Response::error(
            ErrorCode::SubscriptionInUse,
            format!("subscription '{queue}' has consumers; cancel them first"),
        );
    }
    match shared.store.topics().unsubscribe(&topic, &name).await {
        Ok(()) => {
            shared.wakers.remove(&queue);
            Response::Ok
        }
        Err(e) => store_error(&e),
    }
}
