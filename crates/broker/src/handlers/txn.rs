//! begin, commit and rollback, and what sends and acks do inside a transaction.
//!
//! While a transaction is open, sends and publishes are validated and held (their replies
//! carry id 0; the ids come with the commit), acks are held (the deliveries stay leased to the
//! session), and takes with auto ack become leases the commit acks. Commit hands everything to
//! the store in one atomic call; rollback drops the held messages and returns the held
//! deliveries to their queues, flagged redelivered. A failed commit rolls back. A disconnect
//! rolls back too: the session's leases return to their queues as always.

use ferry_protocol::{DeliveryId, ErrorCode, ErrorReply, OutgoingMessage, Response};
use ferry_store::StoreError;

use super::to_new;
use super::{store_error, validate};
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;
use crate::txn::Txn;

fn no_txn(what: &str) -> Response {
    Response::error(
        ErrorCode::TransactionState,
        format!("{what} without a transaction: begin one first"),
    )
}

fn full(shared: &Shared) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::LimitExceeded,
        format!(
            "a transaction holds at most {} messages and acks; commit or roll back first",
            shared.limits.max_batch
        ),
    )
}

/// begin: `TransactionState` when one is open already.
pub fn begin(session: &Session) -> Response {
    let mut txn = session.txn();
    if txn.is_some() {
        return Response::error(
            ErrorCode::TransactionState,
            "a transaction is open already: commit or roll it back first",
        );
    }
    *txn = Some(Txn::default());
    Response::Ok
}

/// Holds one message in the open transaction. `None` when no transaction is open (the caller
/// sends it at once).
pub fn hold_message(
    shared: &Shared,
    session: &Session,
    m: OutgoingMessage,
) -> Option<Result<(), ErrorReply>> {
    let mut guard = session.txn();
    let txn = guard.as_mut()?;
    if let Err(e) = validate::message(&m, &shared.limits) {
        return Some(Err(e));
    }
    if txn.size() >= shared.limits.max_batch as usize {
        return Some(Err(full(shared)));
    }
    txn.msgs.push(to_new(m, session, shared.now_ms()));
    Some(Ok(()))
}

/// Holds acks in the open transaction; `None` when none is open. Ids the session does not
/// hold are refused with `NotFound`; the others are held.
pub fn hold_acks(shared: &Shared, session: &Session, ids: &[DeliveryId]) -> Option<Response> {
    let mut guard = session.txn();
    let txn = guard.as_mut()?;
    let (known, unknown): (Vec<DeliveryId>, Vec<DeliveryId>) =
        ids.iter().partition(|id| session.holds(**id));
    if txn.size() + known.len() > shared.limits.max_batch as usize {
        return Some(Response::Error(full(shared)));
    }
    txn.ack(&known);
    if unknown.is_empty() {
        Some(Response::Ok)
    } else {
        Some(store_error(&StoreError::DeliveriesNotFound(unknown)))
    }
}

/// commit: everything held takes effect at once, or (on error) nothing does and the
/// transaction is rolled back.
pub async fn commit(shared: &Shared, session: &Session) -> Response {
    let Some(txn) = session.txn().take() else {
        return no_txn("commit");
    };
    if txn.msgs.is_empty() && txn.acks.is_empty() {
        return Response::Committed { ids: Vec::new() };
    }
    let (queues, topics) = txn.destinations();
    let delayed = txn.msgs.iter().any(|m| m.deliver_at_ms > 0);
    let sent = txn.msgs.len() as u64;
    match shared
        .store
        .transactions()
        .commit(session.id, txn.msgs, &txn.acks)
        .await
    {
        Ok(ids) => {
            session.settled(&txn.acks);
            Stats::add(&shared.stats.messages_sent, sent);
            if delayed {
                shared.delayed_sent.notify_one();
            }
            shared.wakers.notify(&queues);
            for t in &topics {
                shared.wakers.notify_topic(t);
            }
            Response::Committed { ids }
        }
        Err(e) => {
            return_deliveries(shared, session, &txn.acks).await;
            store_error(&e)
        }
    }
}

/// rollback: drops the held messages and returns the held deliveries to their queues.
pub async fn rollback(shared: &Shared, session: &Session) -> Response {
    let Some(txn) = session.txn().take() else {
        return no_txn("rollback");
    };
    return_deliveries(shared, session, &txn.acks).await;
    Response::Ok
}

async fn return_deliveries(shared: &Shared, session: &Session, ids: &[DeliveryId]) {
    if ids.is_empty() {
        return;
    }
    match shared.store.queues().nack(session.id, ids, true).await {
        Ok(queues) => shared.wakers.notify(&queues),
        // Some were returned already (lease expiry); the others are back.
        Err(StoreError::DeliveriesNotFound(_)) => shared.wakers.notify_all(),
        Err(e) => tracing::warn!(
            client = %session.client,
            error = %e,
            "could not return a rolled-back transaction's deliveries; they return when their leases end"
        ),
    }
    session.settled(ids);
}
