//! A plain `match` from a decoded request to its handler.

use std::sync::Arc;

use ferry_protocol::{ErrorCode, Request, Response};

use crate::authorize;
use crate::handlers::{queues, receive, send, settle, subscribe, topics, txn};
use crate::session::Session;
use crate::shared::Shared;

/// Runs one request of a connected session (`request_id` is the frame's). `Connect` and
/// `Disconnect` are handled by the connection itself and never reach here. Returns `None` when
/// the handler has queued its reply itself (subscribe, whose reply must precede its pushes; a
/// receive whose delivery the connection's writer settles, see [`crate::outbound`]).
pub async fn dispatch(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    request_id: u32,
    request: Request,
) -> Option<Response> {
    if let Err(refused) = authorize::check(shared, session, &request) {
        // A commit refused for a destination fails, and a failed commit rolls back.
        if let Request::TxnCommit = request {
            txn::rollback(shared, session).await;
        }
        return Some(Response::Error(refused));
    }
    if let Request::Subscribe(s) = request {
        return subscribe::subscribe(shared, session, request_id, s).await;
    }
    if let Request::SubscribeTopic(s) = request {
        return subscribe::subscribe_topic(shared, session, request_id, s).await;
    }
    if let Request::Receive(r) = request {
        return receive::receive(shared, session, request_id, r).await;
    }
    Some(match request {
        Request::Ping => Response::Pong,
        Request::CreateQueue { name, options } => queues::create(shared, name, options).await,
        Request::DeleteQueue { name, force } => queues::delete(shared, name, force).await,
        Request::ListQueues => queues::list(shared).await,
        Request::WaitingQueues => queues::waiting(shared, session).await,
        Request::Send(m) => send::send(shared, session, m).await,
        Request::SendBatch(items) => send::send_batch(shared, session, items).await,
        Request::PublishBatch(batch) => send::publish_batch(shared, session, batch).await,
        Request::Ack { ids } => settle::ack(shared, session, ids).await,
        Request::Nack { ids, requeue } => settle::nack(shared, session, ids, requeue).await,
        Request::Credit {
            subscription,
            credit,
        } => subscribe::credit(session, subscription, credit),
        Request::Cancel { subscription } => subscribe::cancel(shared, session, subscription).await,
        Request::CreateTopic { name } => topics::create(shared, name).await,
        Request::DeleteTopic { name, force } => topics::delete(shared, name, force).await,
        Request::ListTopics => topics::list(shared).await,
        Request::Unsubscribe { topic, name } => topics::unsubscribe(shared, topic, name).await,
        Request::TxnBegin => txn::begin(session),
        Request::TxnCommit => txn::commit(shared, session).await,
        Request::TxnRollback => txn::rollback(shared, session).await,
        Request::Connect(_) => Response::error(
            ErrorCode::InvalidArgument,
            "the session is already connected",
        ),
        Request::AuthResponse { .. } => Response::error(
            ErrorCode::InvalidArgument,
            "the session is already authenticated",
        ),
        Request::Disconnect
        | Request::Subscribe(_)
        | Request::SubscribeTopic(_)
        | Request::Receive(_) => Response::Ok,
    })
}
