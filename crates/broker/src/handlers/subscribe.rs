//! subscribe, credit and cancel.

use std::sync::Arc;

use bytes::BytesMut;

use ferry_protocol::requests::Subscribe;
use ferry_protocol::{ErrorCode, Response, SubscriptionId};
use ferry_selector::Selector;

use super::{store_error, validate};
use crate::session::Session;
use crate::shared::Shared;
use crate::subscription;

/// subscribe: checks the queue exists, the prefetch is within limits and the selector parses,
/// then starts pushing.
/// On success it queues the `Subscribed` reply itself, before the task can push, so that a
/// client always learns the subscription id before its first delivery; it then returns `None`.
pub async fn subscribe(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    request_id: u32,
    sub: Subscribe,
) -> Option<Response> {
    let selector = match check(shared, &sub).await {
        Ok(selector) => selector,
        Err(reply) => return Some(reply),
    };
    let id = session.next_subscription_id();
    let mut reply = BytesMut::new();
    Response::Subscribed { subscription: id }.encode(request_id, &mut reply);
    if session.out.send(reply.freeze()).is_err() {
        return None; // the connection is gone
    }
    subscription::start(shared.clone(), session.clone(), id, sub, selector);
    None
}

/// The subscription's parsed selector if it can start, otherwise the error response.
async fn check(shared: &Shared, sub: &Subscribe) -> Result<Option<Arc<Selector>>, Response> {
    let fail = Err;
    if let Err(e) = validate::name("queue", &sub.queue, &shared.limits) {
        return fail(Response::Error(e));
    }
    let selector = validate::selector(&sub.selector).map_err(Response::Error)?;
    if sub.prefetch == 0 {
        return fail(Response::error(
            ErrorCode::InvalidArgument,
            "prefetch must be at least 1",
        ));
    }
    if sub.prefetch > shared.limits.max_prefetch {
        return fail(Response::error(
            ErrorCode::LimitExceeded,
            format!(
                "prefetch {} exceeds the limit of {}",
                sub.prefetch, shared.limits.max_prefetch
            ),
        ));
    }
    match shared.store.list_queues().await {
        Ok(qs) if qs.iter().any(|q| q.name == sub.queue) => Ok(selector),
        Ok(_) => fail(store_error(&ferry_store::StoreError::QueueNotFound(
            sub.queue.clone(),
        ))),
        Err(e) => fail(store_error(&e)),
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
