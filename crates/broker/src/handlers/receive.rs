//! receive: one message by queue or by sender, optionally waiting for one to arrive.
//!
//! A waiting receive is a long poll woken by arrivals: it registers with the queue's notifier
//! (or the any-queue notifier for by-sender receives) before it looks at the store, and looks
//! again each time it is woken, until a message is there, the wait ends or the broker stops.
//! With a selector, a look that finds only messages the selector passes over finds nothing,
//! so the receive goes on waiting. A wait ends, without taking anything, as soon as the
//! session starts ending. At most [`crate::session::MAX_STORE_RECEIVES`] of a session's
//! receives look at the store at once, so that what they found and could not hand over yet
//! (their connection's replies have no room) is bounded.
//!
//! An auto-ack take is held by the store, not removed, and its reply is handed to the
//! connection's writer, which settles it right before writing it ([`crate::outbound`]): a
//! receive whose connection dies before that takes nothing.

use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, ErrorCode, ReceiveMode, Response, Source};
use ferry_store::ReceiveSpec;
use tokio::time::Instant;

use super::{store_error, validate};
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;

/// receive. Returns `None` when it handed its reply to the writer itself (a held auto-ack
/// take).
pub async fn receive(
    shared: &Shared,
    session: &Session,
    request_id: u32,
    r: Receive,
) -> Option<Response> {
    let checked = match &r.source {
        Source::Queue(q) => validate::queue_or_subscription(q, &shared.limits),
        Source::Sender(s) => validate::name("sender", s, &shared.limits),
    };
    if let Err(e) = checked {
        return Some(Response::Error(e));
    }
    // Parsed once; every look at the store (one per wake-up) tests messages against it.
    let selector = match validate::selector(&r.selector) {
        Ok(selector) => selector,
        Err(e) => return Some(Response::Error(e)),
    };
    // In a transaction a take is settled at commit: an auto-ack take becomes a lease that the
    // transaction acks, so a rollback returns it.
    let in_txn = r.mode == ReceiveMode::Take && session.in_txn();
    let ack = if in_txn { AckMode::Client } else { r.ack };
    let leases = r.mode == ReceiveMode::Take && ack == AckMode::Client;
    if leases && session.in_flight() >= shared.limits.max_in_flight_per_session as usize {
        return Some(Response::error(
            ErrorCode::LimitExceeded,
            format!(
                "the session holds {} unsettled deliveries, the limit; ack or nack some first",
                shared.limits.max_in_flight_per_session
            ),
        ));
    }
    let hold = r.mode == ReceiveMode::Take && ack == AckMode::Auto && session.out.holds_enabled();
    if hold {
        session.out.note_held();
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
    let mut spec = ReceiveSpec {
        source: r.source,
        order: r.order,
        mode: r.mode,
        ack,
        hold,
        client: session.client.clone(),
        // Held takes under the session's hold id, settled by its writer alone.
        session: if hold { session.hold_id() } else { session.id },
        lease_until_ms: 0,
        selector,
        now_ms: 0,
        max_bytes: None,
    };
    loop {
        if session.is_closing() {
            return Some(Response::Received(None));
        }
        let arrived = watch.as_ref().map(|w| w.notified());
        tokio::pin!(arrived);
        if let Some(a) = arrived.as_mut().as_pin_mut() {
            a.enable();
        }
        // Held until this receive returns or waits: what it found stays in memory until its
        // reply is encoded (see `Session::store_receives`). Never closed.
        let Ok(slot) = session.store_receives.acquire().await else {
            return Some(Response::Received(None));
        };
        // The session may have started ending while this receive waited for its slot.
        if session.is_closing() {
            return Some(Response::Received(None));
        }
        spec.now_ms = shared.now_ms();
        spec.lease_until_ms = spec.now_ms + u64::from(shared.limits.lease_ms);
        match shared.store.queues().receive(&spec, 1).await {
            Ok(mut ds) => {
                if let Some(mut d) = ds.pop() {
                    if hold && d.delivery_id != 0 {
                        Stats::add(&shared.stats.deliveries, 1);
                        if d.message.delivery_count > 0 {
                            Stats::add(&shared.stats.redeliveries, 1);
                        }
                        let held = std::mem::take(&mut d.delivery_id);
                        let reply = Response::Received(Some(d));
                        let mut buf = BytesMut::with_capacity(reply_len(&reply));
                        reply.encode(request_id, &mut buf);
                        // A connection gone meanwhile leaves the take held: its end hands it
                        // back.
                        let _ = session.out.send_held_reply(buf.freeze(), held, request_id);
                        return None;
                    }
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
                            if let Err(e) = shared
                                .store
                                .queues()
                                .ack(session.id, &[d.delivery_id])
                                .await
                            {
                                return Some(store_error(&e));
                            }
                            session.settled(&[d.delivery_id]);
                            d.delivery_id = 0;
                        }
                    }
                    Stats::add(&shared.stats.deliveries, 1);
                    if d.message.delivery_count > 0 {
                        Stats::add(&shared.stats.redeliveries, 1);
                    }
                    return Some(Response::Received(Some(d)));
                }
            }
            Err(e) => return Some(store_error(&e)),
        }
        drop(slot);
        let Some(arrived) = arrived.as_mut().as_pin_mut() else {
            return Some(Response::Received(None));
        };
        tokio::select! {
            _ = arrived => {}
            _ = tokio::time::sleep_until(deadline) => return Some(Response::Received(None)),
            // The session is ending (which the broker's shutdown also does): nothing more is
            // taken for it.
            _ = session.closing().cancelled() => return Some(Response::Received(None)),
        }
    }
}

/// About the encoded size of `reply`, to size its buffer once.
fn reply_len(reply: &Response) -> usize {
    match reply {
        Response::Received(Some(d)) => {
            let m = &d.message;
            128 + m.queue.len() + m.sender.len() + m.body.len() + 64 * m.properties.len()
        }
        _ => 64,
    }
}
