//! ack and nack of client-ack deliveries.

use ferry_protocol::{DeliveryId, ErrorCode, Response};
use ferry_store::StoreError;

use super::store_error;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;

fn empty() -> Response {
    Response::error(ErrorCode::InvalidArgument, "no delivery ids given")
}

/// ack: settles deliveries. Known ids are settled even when some are unknown; then the reply is
/// `NotFound` naming the unknown ones.
pub async fn ack(shared: &Shared, session: &Session, ids: Vec<DeliveryId>) -> Response {
    if ids.is_empty() {
        return empty();
    }
    if let Some(held) = super::txn::hold_acks(shared, session, &ids) {
        return held;
    }
    let result = shared.store.queues().ack(session.id, &ids).await;
    let unknown = match &result {
        Err(StoreError::DeliveriesNotFound(u)) => u.len(),
        Err(_) => ids.len(),
        Ok(()) => 0,
    };
    Stats::add(
        &shared.stats.acks,
        (ids.len() - unknown.min(ids.len())) as u64,
    );
    settle_result(session, &ids, result.map(|()| Vec::new()), shared)
}

/// nack: returns deliveries to their queues (flagged redelivered) or drops them.
pub async fn nack(
    shared: &Shared,
    session: &Session,
    ids: Vec<DeliveryId>,
    requeue: bool,
) -> Response {
    if ids.is_empty() {
        return empty();
    }
    let result = shared.store.queues().nack(session.id, &ids, requeue).await;
    if result.is_ok() {
        let counter = if requeue {
            &shared.stats.nacks_requeued
        } else {
            &shared.stats.nacks_dropped
        };
        Stats::add(counter, ids.len() as u64);
    }
    settle_result(session, &ids, result, shared)
}

fn settle_result(
    session: &Session,
    ids: &[DeliveryId],
    result: Result<Vec<String>, StoreError>,
    shared: &Shared,
) -> Response {
    match result {
        Ok(queues) => {
            session.settled(ids);
            shared.wakers.notify(&queues);
            Response::Ok
        }
        Err(e @ StoreError::DeliveriesNotFound(_)) => {
            // The known ids were settled; unknown ones are gone too (expired, never ours).
            session.settled(ids);
            store_error(&e)
        }
        Err(e) => store_error(&e),
    }
}
