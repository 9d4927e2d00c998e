//! How a session's pushes are written: the bytes a push subscription (or a direct delivery)
//! makes of each delivery it hands out. Native connections write `Deliver` frames
//! ([`Native`]); a protocol gateway over in-process sessions ([`crate::local`]) gives each of
//! its subscriptions an encoder of its own protocol's frames, so deliveries go from the store
//! to the gateway's socket in one encoding, with the store's, credit's and writer's paths
//! unchanged. The broker knows no protocol but its own: the encoder is the gateway's.

use bytes::{Bytes, BytesMut};
use ferry_protocol::batch_writer::DeliverBatchWriter;
use ferry_protocol::packed::PackedBodies;
use ferry_protocol::size::batch_entry_len;
use ferry_protocol::{
    deliver_encoded_len, encode_deliver, DeliveryView, ErrorReply, Response, SubscriptionId,
};

/// What an encoder keeps between the deliveries of one buffer (see
/// [`DeliveryEncoder::encode_in_run`]): for [`NativeBatched`], the frame being filled.
#[derive(Debug, Default)]
pub struct Run(Option<DeliverBatchWriter>);

/// Encodes one subscription's pushes. Called on the subscription's task and, for direct
/// deliveries, on the publisher's: it must be cheap and must not block.
pub trait DeliveryEncoder: Send + Sync + 'static {
    /// About how many bytes [`DeliveryEncoder::encode`] writes for `d` (to size buffers).
    fn encoded_len(&self, d: &DeliveryView<'_>) -> usize;
    /// Appends the frame(s) that deliver `d` through subscription `subscription`. `d`'s
    /// delivery id is 0 when the client settles nothing (auto ack).
    fn encode(&self, out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>);
    /// Appends `d` as the next of a run of deliveries written into `out` one after the other,
    /// which may share frames; [`DeliveryEncoder::finish_run`] ends the run before `out` is
    /// sent. By default each delivery is a frame of its own ([`DeliveryEncoder::encode`]).
    fn encode_in_run(
        &self,
        run: &mut Run,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        d: &DeliveryView<'_>,
    ) {
        let _ = run;
        self.encode(out, subscription, d);
    }
    /// Appends one delivery per body of `bodies` as the next of the run: `template`'s
    /// fields with ids from `first_id` on (see [`ferry_store::direct::DirectBatch::push_run`]).
    /// An encoder may hand large stretches of `bodies` over uncopied: it moves what `out`
    /// holds to `pieces`, then the slice, and goes on in `out`; the frames are `pieces`, then
    /// `out`. By default each delivery goes through [`DeliveryEncoder::encode_in_run`].
    #[allow(clippy::too_many_arguments)]
    fn encode_bodies_in_run(
        &self,
        run: &mut Run,
        out: &mut BytesMut,
        pieces: &mut Vec<Bytes>,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &PackedBodies,
    ) {
        let _ = pieces;
        for d in template.run(first_id, bodies.iter()) {
            self.encode_in_run(run, out, subscription, &d);
        }
    }
    /// Completes what [`DeliveryEncoder::encode_in_run`] left open in `out`.
    fn finish_run(&self, run: &mut Run, out: &mut BytesMut) {
        let _ = (run, out);
    }
    /// Appends what tells the client that the subscription ended because of `error` (its
    /// queue was deleted, the store refused).
    fn ended(&self, out: &mut BytesMut, subscription: SubscriptionId, error: &ErrorReply);
}

/// The encoder of a native session's pushes: [`NativeBatched`] for a session that speaks
/// version 5 or later (frames within `max_frame_bytes`, the client's limit; runs as
/// `DeliverRun` frames from version 7), [`Native`] otherwise.
pub fn native(version: u16, max_frame_bytes: u32) -> std::sync::Arc<dyn DeliveryEncoder> {
    if version >= ferry_protocol::DELIVER_BATCH_VERSION {
        std::sync::Arc::new(NativeBatched {
            max_frame_bytes,
            runs: version >= ferry_protocol::DELIVER_RUN_VERSION,
        })
    } else {
        std::sync::Arc::new(Native)
    }
}

/// The native protocol's `Deliver` and `SubscriptionClosed` frames.
pub struct Native;

impl DeliveryEncoder for Native {
    fn encoded_len(&self, d: &DeliveryView<'_>) -> usize {
        deliver_encoded_len(d)
    }

    fn encode(&self, out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>) {
        encode_deliver(out, subscription, d);
    }

    fn ended(&self, out: &mut BytesMut, subscription: SubscriptionId, error: &ErrorReply) {
        Response::SubscriptionClosed {
            subscription,
            error: error.clone(),
        }
        .encode(0, out);
    }
}

/// The native protocol from version 5: a run of deliveries goes out as `DeliverBatch` frames
/// (names and properties once per frame), a single delivery as `Deliver`; from version 7, a
/// publish run to an auto-ack subscription as `DeliverRun` frames (only its bodies repeated).
pub struct NativeBatched {
    /// The largest frame the client takes.
    pub max_frame_bytes: u32,
    /// Whether the client takes `DeliverRun` frames (version 7).
    pub runs: bool,
}

impl NativeBatched {
    /// A frame writer for this session.
    fn writer(&self) -> DeliverBatchWriter {
        let w = DeliverBatchWriter::new(self.max_frame_bytes);
        if self.runs {
            w.with_runs()
        } else {
            w
        }
    }
}

impl DeliveryEncoder for NativeBatched {
    fn encoded_len(&self, d: &DeliveryView<'_>) -> usize {
        // Within a batch, a delivery takes its own fields; the names come once per frame.
        batch_entry_len(d)
    }

    fn encode(&self, out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>) {
        encode_deliver(out, subscription, d);
    }

    fn encode_in_run(
        &self,
        run: &mut Run,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        d: &DeliveryView<'_>,
    ) {
        run.0
            .get_or_insert_with(|| self.writer())
            .push(out, subscription, d);
    }

    fn encode_bodies_in_run(
        &self,
        run: &mut Run,
        out: &mut BytesMut,
        pieces: &mut Vec<Bytes>,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &PackedBodies,
    ) {
        // A run's bodies go out as the publisher's frame carried them, without a copy (see
        // `DeliverBatchWriter::push_run_sharing`).
        run.0.get_or_insert_with(|| self.writer()).push_run_sharing(
            out,
            subscription,
            template,
            first_id,
            bodies,
            pieces,
        );
    }

    fn finish_run(&self, run: &mut Run, out: &mut BytesMut) {
        if let Some(w) = &mut run.0 {
            w.finish(out);
        }
    }

    fn ended(&self, out: &mut BytesMut, subscription: SubscriptionId, error: &ErrorReply) {
        Native.ended(out, subscription, error);
    }
}
