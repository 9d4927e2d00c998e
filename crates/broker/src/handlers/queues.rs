//! create_queue, delete_queue, list_queues and waiting_queues.

use ferry_protocol::{ErrorCode, QueueOptions, Response};

use super::{store_error, validate};
use crate::session::Session;
use crate::shared::Shared;

/// create_queue: `InvalidArgument` for a bad name, `LimitExceeded` at the queue limit,
/// `QueueExists`.
pub async fn create(shared: &Shared, name: String, options: QueueOptions) -> Response {
    if let Err(e) = validate::name("queue", &name, &shared.limits) {
        return Response::Error(e);
    }
    for other in [&options.dead_letter_queue, &options.expiry_queue]
        .into_iter()
        .flatten()
    {
        if let Err(e) = validate::name("queue", other, &shared.limits) {
            return Response::Error(e);
        }
    }
    match shared.store.queues().count_queues().await {
        Ok(n) if n >= shared.limits.max_queues as usize => {
            return Response::error(
                ErrorCode::LimitExceeded,
                format!(
                    "the broker holds its limit of {} queues",
                    shared.limits.max_queues
                ),
            )
        }
        Ok(_) => {}
        Err(e) => return store_error(&e),
    }
    match shared
        .store
        .queues()
        .create_queue_with(&name, &options)
        .await
    {
        Ok(()) => Response::Ok,
        Err(e) => store_error(&e),
    }
}

/// delete_queue: `QueueNotFound`, `QueueNotEmpty` unless forced. Wakes the queue's waiters so
/// that they see it gone.
pub async fn delete(shared: &Shared, name: String, force: bool) -> Response {
    if let Err(e) = validate::name("queue", &name, &shared.limits) {
        return Response::Error(e);
    }
    match shared.store.queues().delete_queue(&name, force).await {
        Ok(()) => {
            shared.wakers.remove(&name);
            Response::Ok
        }
        Err(e) => store_error(&e),
    }
}

/// list_queues.
pub async fn list(shared: &Shared) -> Response {
    match shared.store.queues().list_queues().await {
        Ok(qs) => Response::Queues(qs),
        Err(e) => store_error(&e),
    }
}

/// waiting_queues: queues holding messages addressed to this session's client.
pub async fn waiting(shared: &Shared, session: &Session) -> Response {
    match shared
        .store
        .queues()
        .waiting_queues(&session.client, shared.now_ms())
        .await
    {
        Ok(qs) => Response::WaitingQueues(qs),
        Err(e) => store_error(&e),
    }
}
