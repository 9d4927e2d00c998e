//! receive: one message by queue or by sender, optionally waiting for one to arrive.
//!
//! A waiting receive is a long poll woken by arrivals: it registers with the queue's notifier
//! (or the any-queue notifier for by-sender receives) before it looks at the store, and looks
//! again each time it is woken, until a message is there, the wait ends or the broker stops.
//! With a selector, a look that finds only messages the selector passes over finds nothing,
//! so the receive goes on waiting.

use std::time::Duration;

use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, ErrorCode, ReceiveMode, Response, Source};
use ferry_store::ReceiveSpec;
use tokio::time::Instant;

use super::{store_error, validate};
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;

/// receive.
pub async fn receive(shared: &Shared, session: &Session, r: Receive) -> Response {
    let checked = match &r.source {
        Source::Queue(q) => validate::queue_or_subscription(q, &shared.limits),
        Source::Sender(s) => validate::name("sender", s, &shared.limits),
    };
    if let Err(e) = checked {
        return Response::Error(e);
    }
    // Parsed once; every look at the store (one per wake-up) tests messages against it.
    let selector = match validate::selector(&r.selector) {
        Ok(selector) => selector,
        Err(e) => return Response::Error(e),
    };
    // In a transaction a take is settled at commit: an auto-ack take becomes a lease that the
    // transaction acks, so a rollback returns it.
    let in_txn = r.mode == ReceiveMode::Take && session.in_txn();
    let ack = if in_txn { AckMode::Client } else { r.ack };
    let leases = r.mode == ReceiveMode::Take && ack == AckMode::Client;
    if leases && session.in_flight() >= shared.limits.max_in_flight_per_session as usize {
        return Response::error(
            ErrorCode::LimitExceeded,
            format!(
                "the session holds {} unsettled deliveries, the limit; ack or nack some first",
                shared.limits.max_in_flight_per_session
            ),
        );
    }
    // A receive that does not wait needs no notifier: one look at the store answers it.
    let watch = if r.wait_ms == 0 {
        None
    } else {
        Some(match &r.source {
            Source::Queue(q) => shared.wakers.queue(q),
            Source::Sender(_) => shared.wakers.any(),
        })
    };
    let deadline = Instant::now() + Duration::from_millis(u64::from(r.wait_ms));
    // An operator's disconnect ends a wait at once, as a shutdown does.
    let closed = if r.wait_ms == 0 {
        None
    } else {
        Some(shared.sessions.closed_token(session.id))
    };
    let mut spec = ReceiveSpec {
        source: r.source,
        order: r.order,
        mode: r.mode,
        ack,
        hold: false,
        client: session.client.clone(),
        session: session.id,
        lease_until_ms: 0,
        selector,
        now_ms: 0,
    };
    loop {
        let arrived = watch.as_ref().map(|w| w.notified());
        tokio::pin!(arrived);
        if let Some(a) = arrived.as_mut().as_pin_mut() {
            a.enable();
        }
        spec.now_ms = shared.now_ms();
        spec.lease_until_ms = spec.now_ms + u64::from(shared.limits.lease_ms);
        match shared.store.receive(&spec, 1).await {
            Ok(mut ds) => {
                if let Some(mut d) = ds.pop() {
                    if leases {
                        session.track([d.delivery_id], None);
                    }
                    if in_txn && r.ack == AckMode::Auto {
                        let held = match session.txn().as_mut() {
                            Some(txn) => {
                                txn.ack(&[d.delivery_id]);
                                true
                            }
                            None => false,
                        };
                        if !held {
                            // The transaction ended while this receive waited: settle the
                            // take as the auto ack it was asked as.
                            if let Err(e) = shared.store.ack(session.id, &[d.delivery_id]).await {
                                return store_error(&e);
                            }
                            session.settled(&[d.delivery_id]);
                            d.delivery_id = 0;
                        }
                    }
                    Stats::add(&shared.stats.deliveries, 1);
                    if d.message.delivery_count > 0 {
                        Stats::add(&shared.stats.redeliveries, 1);
                    }
                    return Response::Received(Some(d));
                }
            }
            Err(e) => return store_error(&e),
        }
        let Some(arrived) = arrived.as_mut().as_pin_mut() else {
            return Response::Received(None);
        };
        tokio::select! {
            _ = arrived => {}
            _ = tokio::time::sleep_until(deadline) => return Response::Received(None),
            _ = shared.shutdown.cancelled() => return Response::Received(None),
            _ = async {
                match &closed {
                    Some(c) => c.cancelled().await,
                    None => std::future::pending().await,
                }
            } => {
                return Response::Received(None)
            }
        }
    }
}
