//! Push subscriptions: one task per subscription takes messages from the store while the
//! subscription has credit and pushes them to the client as `Deliver` frames.
//!
//! Credit is the prefetch window. Each push spends one; a client-ack subscription gets it back
//! when the delivery is settled (ack, nack), an auto-ack subscription when the client sends
//! `Credit`. Deliveries are taken in batches (up to the credit, at most [`MAX_PUSH_BATCH`]) so
//! that one store call and one durability wait cover many messages. A subscription with a
//! selector takes only the messages it selects; the store passes over the others, which stay
//! for other receivers, and the task waits for the next arrival as when the queue is empty.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{
    AckMode, ErrorCode, ErrorReply, ReceiveMode, Response, Source, SubscriptionId,
};
use ferry_selector::Selector;
use ferry_store::{ReceiveSpec, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;

/// Most deliveries taken from the store in one go.
pub const MAX_PUSH_BATCH: u32 = 2048;

/// Credit of one subscription, shared by its task and the session.
#[derive(Default)]
pub struct Credit {
    available: AtomicU32,
    changed: Notify,
}

/// What the session keeps of a running subscription.
#[derive(Clone)]
pub struct SubscriptionHandle {
    /// Its id.
    pub id: SubscriptionId,
    /// Its ack mode (decides who restores credit).
    pub ack: AckMode,
    credit: Arc<Credit>,
    /// Stops the task.
    pub cancel: CancellationToken,
}

impl SubscriptionHandle {
    /// Gives the subscription `n` more credit, saturating.
    pub fn add_credit(&self, n: u32) {
        let _ = self
            .credit
            .available
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_add(n))
            });
        self.credit.changed.notify_one();
    }
}

/// Starts subscription `id` (from [`Session::next_subscription_id`]) for `sub` on `session`;
/// the caller has validated `sub` and parsed its selector (`None`: every message).
pub fn start(
    shared: Arc<Shared>,
    session: Arc<Session>,
    id: SubscriptionId,
    sub: Subscribe,
    selector: Option<Arc<Selector>>,
) -> SubscriptionHandle {
    let handle = SubscriptionHandle {
        id,
        ack: sub.ack,
        credit: Arc::new(Credit::default()),
        cancel: shared.shutdown.child_token(),
    };
    handle
        .credit
        .available
        .store(sub.prefetch, Ordering::Release);
    let task = tokio::spawn(run(shared, session.clone(), handle.clone(), sub, selector));
    session.add_subscription(handle.clone(), task);
    handle
}

async fn wait_for_credit(h: &SubscriptionHandle) -> Option<u32> {
    loop {
        let changed = h.credit.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let c = h.credit.available.load(Ordering::Acquire);
        if c > 0 {
            return Some(c);
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = h.cancel.cancelled() => return None,
        }
    }
}

fn closed(sub: SubscriptionId, e: &StoreError) -> Response {
    Response::SubscriptionClosed {
        subscription: sub,
        error: ErrorReply::new(e.code(), e.to_string()),
    }
}

async fn run(
    shared: Arc<Shared>,
    session: Arc<Session>,
    h: SubscriptionHandle,
    sub: Subscribe,
    selector: Option<Arc<Selector>>,
) {
    let notify = shared.wakers.queue(&sub.queue);
    let mut spec = ReceiveSpec {
        source: Source::Queue(sub.queue.clone()),
        order: sub.order,
        mode: ReceiveMode::Take,
        ack: sub.ack,
        client: session.client.clone(),
        session: session.id,
        lease_until_ms: 0,
        selector,
        now_ms: 0,
    };
    let lease = u64::from(shared.limits.lease_ms);
    while let Some(credit) = wait_for_credit(&h).await {
        let arrived = notify.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        spec.now_ms = shared.now_ms();
        spec.lease_until_ms = spec.now_ms + lease;
        let max = credit.min(MAX_PUSH_BATCH) as usize;
        match shared.store.receive(&spec, max).await {
            Ok(ds) if !ds.is_empty() => {
                let n = ds.len() as u32;
                // Only this task spends credit and it took at most what it saw, so this cannot underflow.
                h.credit.available.fetch_sub(n, Ordering::AcqRel);
                if h.ack == AckMode::Client {
                    session.track(ds.iter().map(|d| d.delivery_id), Some(h.id));
                }
                Stats::add(&shared.stats.deliveries, u64::from(n));
                let mut buf = BytesMut::new();
                for delivery in ds {
                    Response::Deliver {
                        subscription: h.id,
                        delivery,
                    }
                    .encode(0, &mut buf);
                }
                if session.out.send(buf.freeze()).is_err() {
                    return; // connection gone; leases are released on disconnect
                }
            }
            Ok(_) => {
                tokio::select! {
                    _ = &mut arrived => {}
                    _ = h.cancel.cancelled() => return,
                }
            }
            Err(StoreError::Unavailable(_)) => {
                // The store recovers by itself (disk space back); try again shortly.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = h.cancel.cancelled() => return,
                }
            }
            Err(e) => {
                let mut buf = BytesMut::new();
                closed(h.id, &e).encode(0, &mut buf);
                let _ = session.out.send(buf.freeze());
                session.forget_subscription(h.id);
                if let Some(consumer) = session.take_topic_consumer(h.id) {
                    shared.consumers.detach(&consumer.queue);
                }
                return;
            }
        }
    }
}

/// The error for a subscription id the session does not have.
pub fn unknown(sub: SubscriptionId) -> Response {
    Response::error(
        ErrorCode::NotFound,
        format!("subscription {sub} does not exist"),
    )
}
