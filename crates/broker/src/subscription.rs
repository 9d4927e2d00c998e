//! Push subscriptions: one task per subscription takes messages from the store while the
//! subscription has credit and pushes them to the client as `Deliver` frames.
//!
//! Credit is the prefetch window. Each push spends one; a client-ack subscription gets it back
//! when the delivery is settled (ack, nack), an auto-ack subscription when the client sends
//! `Credit`. Deliveries are taken in batches (up to the credit, at most [`MAX_PUSH_BATCH`]) so
//! that one store call and one durability wait cover many messages. A subscription with a
//! selector takes only the messages it selects; the store passes over the others, which stay
//! for other receivers, and the task waits for the next arrival as when the queue is empty.
//!
//! The task takes only while its connection's outbound queue is within its budget, and sizes
//! each batch to the room left there, and to `MAX_PUSH_BYTES` (a byte limit on the store's
//! receive, [`ReceiveSpec::max_bytes`], on top of a count estimated from the size of the
//! deliveries it took last), so that a
//! client that reads slowly holds up its own subscriptions, not the broker's memory. An
//! auto-ack batch is held by the store and settled by the connection's writer right before it
//! is written ([`crate::outbound`]), a part of about `MAX_PUSH_BYTES` at a time (a batch may be
//! bigger than its estimate), so a connection that dies takes at most that part with it. The task
//! stops as soon as its session starts ending.
//!
//! A topic subscription's task with auto ack and no selector of its own also offers itself to
//! the store for direct delivery ([`ferry_store::direct`]): non-persistent publishes that find
//! its queue empty are then encoded by the publish and sent to the connection without the
//! task, which only takes what had to be queued.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{
    AckMode, DeliveryId, DeliveryView, ErrorCode, ErrorReply, ReceiveMode, Response, Source,
    SubscriptionId,
};
use ferry_selector::Selector;
use ferry_store::{ReceiveSpec, StoreError};

use crate::credit::Credit;
use crate::direct::{Attached, DirectPush};
use crate::push::{DeliveryEncoder, Run};
use crate::session::{Session, SubscriptionHandle};
use crate::shared::Shared;
use crate::stats::Stats;

/// Most deliveries taken from the store in one go.
pub const MAX_PUSH_BATCH: u32 = 2048;
/// Most bytes reserved up front for one push batch (bigger batches grow as they are encoded).
const MAX_PUSH_BUFFER: usize = 4 << 20;
/// About the most bytes one push batch takes (by the size of the deliveries taken last): the
/// connection's writer settles held auto-ack deliveries a batch at a time right before writing
/// them, so this bounds what a connection dying in the middle of a write can lose.
const MAX_PUSH_BYTES: usize = 1 << 20;

/// Starts subscription `id` (from [`Session::next_subscription_id`]) for `sub` on `session`;
/// the caller has validated `sub` and parsed its selector (`None`: every message). Its pushes
/// are written by `encoder` (see [`crate::push`]).
pub fn start(
    shared: Arc<Shared>,
    session: Arc<Session>,
    id: SubscriptionId,
    sub: Subscribe,
    selector: Option<Arc<Selector>>,
    encoder: Arc<dyn DeliveryEncoder>,
) -> SubscriptionHandle {
    let handle = SubscriptionHandle {
        id,
        ack: sub.ack,
        credit: Arc::new(Credit::new(sub.prefetch)),
        cancel: session.closing().child_token(),
        queue: Arc::from(sub.queue.as_str()),
        selector: Arc::from(sub.selector.as_str()),
    };
    let task = tokio::spawn(run(
        shared,
        session.clone(),
        handle.clone(),
        sub,
        selector,
        encoder,
    ));
    session.add_subscription(handle.clone(), task);
    handle
}

async fn wait_for_credit(h: &SubscriptionHandle) -> Option<u32> {
    loop {
        let changed = h.credit.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let c = h.credit.available();
        if c > 0 {
            return Some(c);
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = h.cancel.cancelled() => return None,
        }
    }
}

async fn run(
    shared: Arc<Shared>,
    session: Arc<Session>,
    h: SubscriptionHandle,
    sub: Subscribe,
    selector: Option<Arc<Selector>>,
    encoder: Arc<dyn DeliveryEncoder>,
) {
    let watch = shared.wakers.queue(&sub.queue);
    let hold = sub.ack == AckMode::Auto && session.out.holds_enabled();
    let mut spec = ReceiveSpec {
        source: Source::Queue(sub.queue.clone()),
        order: sub.order,
        mode: ReceiveMode::Take,
        ack: sub.ack,
        hold,
        client: session.client.clone(),
        // Held takes under the session's hold id, settled by its writer alone.
        session: if hold { session.hold_id() } else { session.id },
        lease_until_ms: 0,
        selector,
        now_ms: 0,
        // Set for each batch, to the room left.
        max_bytes: None,
    };
    let lease = u64::from(shared.limits.lease_ms);
    if hold {
        session.out.note_held();
    }
    let direct = offer_direct(
        &shared,
        &session,
        &h,
        &sub,
        spec.selector.is_some(),
        &encoder,
    );
    let taker = direct.as_ref().map(Attached::consumer);
    // The size of a delivery, as last seen: until one is seen, the largest there can be.
    let mut delivery_bytes = shared.limits.max_body_bytes as usize;
    while let Some(credit) = wait_for_credit(&h).await {
        if !session.out.has_room() {
            tokio::select! {
                _ = session.out.wait_for_room() => {}
                _ = h.cancel.cancelled() => return,
            }
            continue;
        }
        if h.cancel.is_cancelled() {
            return;
        }
        let arrived = watch.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        spec.now_ms = shared.now_ms();
        spec.lease_until_ms = spec.now_ms + lease;
        let budget = session.out.room().min(MAX_PUSH_BYTES);
        let fit = (budget / delivery_bytes.max(1)).max(1);
        let max = (credit.min(MAX_PUSH_BATCH) as usize).min(fit);
        // The estimate above counts on the next deliveries being like the last ones; the
        // store holds the batch to the budget whatever they are (small, then big).
        spec.max_bytes = Some(budget as u64);
        // Deliveries are encoded as the store hands them out, straight into the push buffer.
        let mut ids: Vec<DeliveryId> = Vec::new();
        let track = h.ack == AckMode::Client;
        let mut buf = BytesMut::new();
        // A held batch is cut into parts of about MAX_PUSH_BYTES, each queued with its own
        // deliveries: the writer settles them a part at a time, right before writing it. A
        // batch is sized by the deliveries taken last, so it can be far bigger than the
        // estimate (small messages, then big ones); in one piece, it would all be settled
        // before its first byte was written, and a client that reads nothing would lose it all.
        let mut parts: Vec<(Bytes, Vec<DeliveryId>)> = Vec::new();
        let mut first_id = None;
        let mut encoded = 0usize;
        let mut run = Run::default();
        let mut redelivered = 0u64;
        let mut sink = |total: usize, d: DeliveryView<'_>| {
            redelivered += u64::from(d.delivery_count > 0);
            if buf.is_empty() {
                // Sized up front from the first delivery: a batch is hundreds of KiB, and
                // growing by doubling would copy it several times.
                let first = encoder.encoded_len(&d);
                buf.reserve(first.saturating_mul(total).min(MAX_PUSH_BUFFER).max(first));
            }
            first_id.get_or_insert(d.delivery_id);
            if track || hold {
                ids.push(d.delivery_id);
            }
            if hold {
                // The client settles nothing: the writer does (see crate::outbound).
                encoder.encode_in_run(
                    &mut run,
                    &mut buf,
                    h.id,
                    &DeliveryView {
                        delivery_id: 0,
                        ..d
                    },
                );
                if buf.len() >= MAX_PUSH_BYTES {
                    // A part ends its run: each part is whole frames.
                    encoder.finish_run(&mut run, &mut buf);
                    encoded += buf.len();
                    parts.push((buf.split().freeze(), std::mem::take(&mut ids)));
                }
            } else {
                encoder.encode_in_run(&mut run, &mut buf, h.id, &d);
            }
        };
        // With a taker, the store starts the take under its lock (and may pick less than
        // `max`: direct deliveries may have spent credit since); either way it ends below,
        // once the batch is on its way (see credit.rs).
        match shared
            .store
            .queues()
            .receive_with(&spec, max, taker, &mut sink)
            .await
        {
            Ok(n) if n > 0 => {
                encoder.finish_run(&mut run, &mut buf);
                encoded += buf.len();
                delivery_bytes = encoded / n;
                let n = n as u32;
                Stats::add(&shared.stats.deliveries, u64::from(n));
                if redelivered > 0 {
                    Stats::add(&shared.stats.redeliveries, redelivered);
                }
                // An engine that cannot hold took them for good (delivery id 0).
                let held = hold && first_id.is_some_and(|id| id != 0);
                if !buf.is_empty() {
                    parts.push((buf.freeze(), ids));
                }
                let mut sent = Ok(());
                for (frames, ids) in parts {
                    sent = sent.and(if held {
                        session.out.send_held_push(frames, ids)
                    } else {
                        if track {
                            session.track(ids, Some(h.id));
                        }
                        session.out.send(frames)
                    });
                }
                // It took at most the credit it saw (or that begin_take returned), and nobody
                // else spends meanwhile, so this spends no more than there is.
                h.credit.end_take(n);
                if h.ack == AckMode::Auto && session.credit_on_push() {
                    h.credit.grant(n);
                }
                if sent.is_err() {
                    return; // connection gone; what it took is handed back as it ends
                }
            }
            Ok(_) if h.credit.available() == 0 => {
                // Direct deliveries spent the credit since the wait: wait for more.
                h.credit.end_take(0);
            }
            Ok(_) => {
                h.credit.end_take(0);
                tokio::select! {
                    _ = &mut arrived => {}
                    _ = h.cancel.cancelled() => return,
                }
            }
            Err(StoreError::Unavailable(_) | StoreError::ResourceExhausted(_)) => {
                h.credit.end_take(0);
                // The store recovers by itself (a write retried, disk space back, the space
                // reserve made again by compaction); try again shortly.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = h.cancel.cancelled() => return,
                }
            }
            Err(e) => {
                h.credit.end_take(0);
                let mut buf = BytesMut::new();
                encoder.ended(&mut buf, h.id, &ErrorReply::new(e.code(), e.to_string()));
                let _ = session.out.send(buf.freeze());
                session.forget_subscription(h.id);
                if let Some(consumer) = session.take_topic_consumer(h.id) {
                    shared.consumers.detach(&consumer.queue);
                    let _ = shared
                        .store
                        .topics()
                        .detach_consumer(&consumer.topic, &consumer.name, consumer.session)
                        .await;
                }
                return;
            }
        }
    }
}

/// Offers the subscription to the store for direct delivery when it can take it: a topic
/// subscription's queue, auto ack, no selector of its own. Detached when the result drops,
/// i.e. when the task ends, before a cancel or disconnect completes.
fn offer_direct(
    shared: &Shared,
    session: &Session,
    h: &SubscriptionHandle,
    sub: &Subscribe,
    has_selector: bool,
    encoder: &Arc<dyn DeliveryEncoder>,
) -> Option<Attached> {
    let topic_subscription = sub.queue.contains(ferry_protocol::SUBSCRIPTION_SEPARATOR);
    if !topic_subscription || sub.ack != AckMode::Auto || has_selector {
        return None;
    }
    let consumer = Arc::new(DirectPush {
        subscription: h.id,
        credit: h.credit.clone(),
        out: session.out.clone(),
        stats: shared.stats.clone(),
        encoder: encoder.clone(),
        credit_on_push: session.credit_on_push(),
    });
    Attached::offer(&shared.store, &sub.queue, consumer)
}

/// The error for a subscription id the session does not have.
pub fn unknown(sub: SubscriptionId) -> Response {
    Response::error(
        ErrorCode::NotFound,
        format!("subscription {sub} does not exist"),
    )
}
