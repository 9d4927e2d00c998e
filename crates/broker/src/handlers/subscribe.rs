//! subscribe, credit and cancel.

use std::sync::Arc;

use ferry_protocol::requests::Subscribe;
use ferry_protocol::{ErrorCode, Response, SubscriptionId};

use super::{store_error, validate};
use crate::session::Session;
use crate::shared::Shared;
use crate::subscription;

/// subscribe: checks the queue exists and the prefetch is within limits, then starts pushing.
pub async fn subscribe(shared: &Arc<Shared>, session: &Arc<Session>, sub: Subscribe) -> Response {
    if let Err(e) = validate::name("queue", &sub.queue, &shared.limits) {
        return Response::Error(e);
    }
    if sub.prefetch == 0 {
        return Response::error(ErrorCode::InvalidArgument, "prefetch must be at least 1");
    }
    if sub.prefetch > shared.limits.max_prefetch {
        return Response::error(
            ErrorCode::LimitExceeded,
            format!(
                "prefetch {} exceeds the limit of {}",
                sub.prefetch, shared.limits.max_prefetch
            ),
        );
    }
    match shared.store.list_queues().await {
        Ok(qs) if qs.iter().any(|q| q.name == sub.queue) => {}
        Ok(_) => {
            return store_error(&ferry_store::StoreError::QueueNotFound(sub.queue));
        }
        Err(e) => return store_error(&e),
    }
    let handle = subscription::start(shared.clone(), session.clone(), sub);
    Response::Subscribed {
        subscription: handle.id,
    }
}

/// credit: more deliveries for an auto-ack subscription.
pub fn credit(session: &Session, sub: SubscriptionId, n: u32) -> Response {
    if n == 0 {
        return Response::error(ErrorCode::InvalidArgument, "credit must be at least 1");
    }
    if session.credit(sub, n) {
        Response::Ok
    } else {
        subscription::unknown(sub)
    }
}

/// cancel: stops the subscription; its unsettled deliveries stay with the session.
pub async fn cancel(session: &Session, sub: SubscriptionId) -> Response {
    if session.cancel(sub).await {
        Response::Ok
    } else {
        subscription::unknown(sub)
    }
}
