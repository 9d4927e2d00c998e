//! The broker's side of direct delivery (see [`ferry_store::direct`]): a push subscription that
//! can take non-persistent publishes straight from the store offers itself as a
//! [`DirectConsumer`] while its task runs, and encodes what the store hands it with the
//! subscription's encoder (`Deliver` frames, or a gateway's, see [`crate::push`]).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferry_protocol::packed::PackedBodies;
use ferry_protocol::{DeliveryView, MessageId, SubscriptionId};
use ferry_store::{DirectBatch, DirectConsumer, Store};

use crate::credit::Credit;
use crate::outbound::Outbound;
use crate::push::{DeliveryEncoder, Run};
use crate::stats::Stats;

/// A push subscription as a direct consumer: frames go to its connection's writer, each
/// delivery spends a unit of its credit.
pub struct DirectPush {
    /// The subscription.
    pub subscription: SubscriptionId,
    /// Its credit.
    pub credit: Arc<Credit>,
    /// Its connection's frames.
    pub out: Outbound,
    /// Counts the deliveries.
    pub stats: Arc<Stats>,
    /// Writes the deliveries (the subscription's, see [`crate::push`]).
    pub encoder: Arc<dyn DeliveryEncoder>,
    /// The credit comes back as the batch is queued (see [`crate::session::Session::credit_on_push`]).
    pub credit_on_push: bool,
}

impl DirectConsumer for DirectPush {
    fn try_reserve(&self, n: u32) -> bool {
        // A closing connection takes nothing, nor one whose client is behind on reading: the
        // message stays queued for the subscription.
        !self.out.is_closed() && self.out.has_room() && self.credit.try_spend(n)
    }

    fn unreserve(&self, n: u32) {
        self.credit.grant(n);
    }

    fn begin_take(&self) -> u32 {
        self.credit.begin_take()
    }

    fn end_take(&self, n: u32) {
        self.credit.end_take(n);
    }

    fn open_batch(&self, expected: usize) -> Box<dyn DirectBatch> {
        Box::new(PushBatch {
            subscription: self.subscription,
            out: self.out.clone(),
            stats: self.stats.clone(),
            encoder: self.encoder.clone(),
            credit: self.credit_on_push.then(|| self.credit.clone()),
            expected,
            frames: BytesMut::new(),
            pieces: Vec::new(),
            run: Run::default(),
            count: 0,
        })
    }
}

/// Most bytes reserved up front for one batch's frames.
const MAX_RESERVE: usize = 4 << 20;

/// The `Deliver` frames of one batch of direct deliveries, sent to the connection's writer in
/// one piece.
struct PushBatch {
    subscription: SubscriptionId,
    out: Outbound,
    stats: Arc<Stats>,
    encoder: Arc<dyn DeliveryEncoder>,
    /// The credit to give back as the batch is queued, if any.
    credit: Option<Arc<Credit>>,
    /// Deliveries the store expects in this batch: the buffer is sized for them at the first.
    expected: usize,
    frames: BytesMut,
    /// What goes out before `frames`: frames moved out of it, and runs' bodies handed over
    /// uncopied (see [`DeliveryEncoder::encode_bodies_in_run`]).
    pieces: Vec<Bytes>,
    /// The frame being filled (a batch's deliveries share frames where the encoder can).
    run: Run,
    count: u32,
}

impl PushBatch {
    /// Sizes the buffer at the batch's first delivery.
    fn reserve_for(&mut self, delivery: &DeliveryView<'_>) {
        if self.count == 0 {
            // Publishes of one batch are mostly alike: size the buffer for all of them once
            // instead of growing it by copies. The slack covers the heads of the frames a
            // run shares (names and properties once a frame), which `encoded_len` leaves out:
            // without it the last delivery regrew (and copied) the whole buffer.
            let reserve = self
                .encoder
                .encoded_len(delivery)
                .saturating_mul(self.expected);
            let slack = reserve / 32 + 1024;
            self.frames
                .reserve(reserve.saturating_add(slack).min(MAX_RESERVE));
        }
    }
}

impl DirectBatch for PushBatch {
    fn push(&mut self, delivery: &DeliveryView<'_>) {
        self.reserve_for(delivery);
        self.encoder
            .encode_in_run(&mut self.run, &mut self.frames, self.subscription, delivery);
        self.count += 1;
    }

    fn push_run(
        &mut self,
        template: &DeliveryView<'_>,
        first_id: MessageId,
        bodies: &PackedBodies,
    ) {
        let Some(first) = bodies.iter().next() else {
            return;
        };
        self.reserve_for(&DeliveryView {
            body: first,
            ..*template
        });
        self.encoder.encode_bodies_in_run(
            &mut self.run,
            &mut self.frames,
            &mut self.pieces,
            self.subscription,
            template,
            first_id,
            bodies,
        );
        self.count = self
            .count
            .saturating_add(u32::try_from(bodies.len()).unwrap_or(u32::MAX));
    }

    fn hand_over(mut self: Box<Self>) {
        self.encoder.finish_run(&mut self.run, &mut self.frames);
        Stats::add(&self.stats.deliveries, u64::from(self.count));
        // Direct deliveries are final here (non-persistent, never queued): the writer is gone
        // only with the connection, and they are lost with it.
        if self.pieces.is_empty() {
            let _ = self.out.send(self.frames.freeze());
        } else {
            if !self.frames.is_empty() {
                self.pieces.push(self.frames.split().freeze());
            }
            let _ = self.out.send_pieces(std::mem::take(&mut self.pieces));
        }
        if let Some(credit) = &self.credit {
            credit.grant(self.count);
        }
    }
}

/// A consumer attached to the store for as long as this lives.
pub struct Attached {
    store: Arc<dyn Store>,
    consumer: Arc<dyn DirectConsumer>,
}

impl Attached {
    /// Offers `consumer` for subscription queue `queue`; `None` when the store declines.
    pub fn offer(
        store: &Arc<dyn Store>,
        queue: &str,
        consumer: Arc<dyn DirectConsumer>,
    ) -> Option<Attached> {
        store
            .topics()
            .attach_direct(queue, consumer.clone())
            .then(|| Attached {
                store: store.clone(),
                consumer,
            })
    }
}

impl Attached {
    /// The attached consumer, to pass to [`Queues::receive_with`](ferry_store::Queues::receive_with) as its taker.
    pub fn consumer(&self) -> &dyn DirectConsumer {
        &*self.consumer
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.store.topics().detach_direct(&self.consumer);
    }
}
