//! [`DeliverBatchWriter`]: how a broker writes a run of deliveries as `DeliverBatch` frames
//! ([`crate::deliver_batch`] has the frame's layout and readers) or, to a version 7 receiver,
//! `DeliverRun` frames ([`crate::deliver_run`]).

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::deliver_batch::{put_entry, MAX_BATCH_FRAME_BYTES, MAX_REPEATED_PROPERTY_BYTES};
use crate::deliver_run::{put_run_head, MAX_RUN_DELIVERIES};
use crate::frame::{begin_frame, end_frame, end_frame_before, FrameKind, HEADER_LEN};
use crate::packed::PackedBodies;
use crate::responses::encode_deliver;
use crate::size::{batch_entry_len, properties_len, run_head_len};
use crate::types::{DeliveryView, Properties, SubscriptionId};
use crate::wire::{fitting, put_properties, put_string};

/// A run frame's packed bodies of at least this many bytes are handed over as they are by
/// [`DeliverBatchWriter::push_run_sharing`]; fewer are cheaper to copy than to write as a
/// slice of their own.
pub const SHARE_AT_LEAST: usize = 16 * 1024;

/// The frame being filled: where it and its fields lie in the output buffer.
#[derive(Debug)]
struct Open {
    start: usize,
    subscription: SubscriptionId,
    queue: Range<usize>,
    sender: Range<usize>,
    properties: Properties,
    count_at: usize,
    count: u32,
    /// Bytes of the properties beyond their count (see [`MAX_REPEATED_PROPERTY_BYTES`]).
    property_bytes: usize,
}

/// Writes a run of deliveries as `DeliverBatch` frames into one buffer: consecutive
/// deliveries with the same subscription, queue, sender and properties share a frame. Call
/// [`DeliverBatchWriter::finish`] before the buffer is sent (or written to otherwise).
#[derive(Debug)]
pub struct DeliverBatchWriter {
    open: Option<Open>,
    max_frame: usize,
    /// Whether auto-ack runs go out as `DeliverRun` frames (the receiver speaks version 7).
    runs: bool,
}

impl DeliverBatchWriter {
    /// A writer whose frames stay within `max_frame_bytes` (the receiver's frame limit) and
    /// [`MAX_BATCH_FRAME_BYTES`].
    pub fn new(max_frame_bytes: u32) -> DeliverBatchWriter {
        DeliverBatchWriter {
            open: None,
            max_frame: (max_frame_bytes as usize).min(MAX_BATCH_FRAME_BYTES),
            runs: false,
        }
    }

    /// This writer, writing the runs of [`DeliverBatchWriter::push_run`] whose deliveries
    /// settle nothing (delivery id 0) as `DeliverRun` frames: for a receiver of version 7 or
    /// later ([`crate::DELIVER_RUN_VERSION`]).
    pub fn with_runs(mut self) -> DeliverBatchWriter {
        self.runs = true;
        self
    }

    /// Appends `d` on `subscription` to the open frame if it shares its fields and fits,
    /// else to a new frame (or, too large for any batch, as a `Deliver` frame of its own).
    pub fn push(&mut self, out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>) {
        let entry = batch_entry_len(d);
        if let Some(open) = &self.open {
            let fits = out.len() - open.start + entry <= self.max_frame
                && (open.count as usize + 1) * open.property_bytes <= MAX_REPEATED_PROPERTY_BYTES;
            let same = open.subscription == subscription
                && out.get(open.queue.clone()) == Some(d.queue.as_bytes())
                && out.get(open.sender.clone()) == Some(d.sender.as_bytes())
                && open.properties == *d.properties;
            if !(fits && same) {
                self.finish(out);
            }
        }
        if self.open.is_none() {
            let head = HEADER_LEN
                + 8
                + 2
                + d.queue.len()
                + 2
                + d.sender.len()
                + properties_len(d.properties)
                + 4;
            if head + entry > self.max_frame
                || properties_len(d.properties) - 2 > MAX_REPEATED_PROPERTY_BYTES
            {
                // Too large for a batch: a frame of its own.
                encode_deliver(out, subscription, d);
                return;
            }
            self.open = Some(open_frame(out, subscription, d));
        }
        put_entry(out, d);
        if let Some(open) = &mut self.open {
            open.count += 1;
        }
    }

    /// Appends one delivery per body of `bodies`: `template`'s fields, with ids from
    /// `first_id` on and each body in turn.
    ///
    /// Written [`DeliverBatchWriter::with_runs`], a run that settles nothing (delivery id 0)
    /// goes out as `DeliverRun` frames. Otherwise the first is pushed as
    /// [`DeliverBatchWriter::push`] does; the others share its fields, so while they fit the
    /// open frame they go in without comparing names and properties again.
    pub fn push_run(
        &mut self,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &PackedBodies,
    ) {
        self.write_run(out, subscription, template, first_id, bodies, None);
    }

    /// As [`DeliverBatchWriter::push_run`], except that the bodies of a `DeliverRun` frame,
    /// when they take at least [`SHARE_AT_LEAST`] bytes, are not copied: what `out` holds (up
    /// to the frame's head) moves to `pieces`, then the bodies (a handle on `bodies`' buffer),
    /// and `out` goes on empty. The frames are `pieces`, then `out`, in that order.
    pub fn push_run_sharing(
        &mut self,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &PackedBodies,
        pieces: &mut Vec<Bytes>,
    ) {
        self.write_run(out, subscription, template, first_id, bodies, Some(pieces));
    }

    /// [`DeliverBatchWriter::push_run`], run frames' bodies handed to `pieces` when given.
    fn write_run(
        &mut self,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &PackedBodies,
        pieces: Option<&mut Vec<Bytes>>,
    ) {
        if self.runs && template.delivery_id == 0 {
            self.finish(out);
            self.put_runs(out, subscription, template, first_id, bodies, pieces);
            return;
        }
        for d in template.run(first_id, bodies.iter()) {
            let open_fits = self.open.as_ref().is_some_and(|open| {
                open.subscription == subscription
                    && d.id != first_id
                    && out.len() - open.start + batch_entry_len(&d) <= self.max_frame
                    && (open.count as usize + 1) * open.property_bytes
                        <= MAX_REPEATED_PROPERTY_BYTES
            });
            if !open_fits {
                self.push(out, subscription, &d);
                continue;
            }
            put_entry(out, &d);
            if let Some(open) = &mut self.open {
                open.count += 1;
            }
        }
    }

    /// Writes `bodies` as `DeliverRun` frames of `template`'s fields, ids from `first_id` on,
    /// each frame within [`MAX_RUN_DELIVERIES`] and the size and repeated-property bounds of a
    /// batch; a body too large
    /// for any run frame goes out as a `Deliver` of its own.
    fn put_runs(
        &self,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &PackedBodies,
        mut pieces: Option<&mut Vec<Bytes>>,
    ) {
        let head = HEADER_LEN + run_head_len(template);
        let property_bytes = properties_len(template.properties) - 2;
        let max_count = MAX_REPEATED_PROPERTY_BYTES
            .checked_div(property_bytes)
            .unwrap_or(usize::MAX)
            .min(MAX_RUN_DELIVERIES);
        let alone = |out: &mut BytesMut, index: usize, body: &[u8]| {
            let d = DeliveryView {
                id: first_id + index as u64,
                body,
                ..*template
            };
            encode_deliver(out, subscription, &d);
        };
        if max_count == 0 {
            for (i, body) in bodies.iter().enumerate() {
                alone(out, i, body);
            }
            return;
        }
        let room = self.max_frame.saturating_sub(head);
        for group in bodies.groups(max_count, room) {
            if group.packed.len() > room {
                // One body too large for a run frame.
                for body in PackedBodies::read_all(&group.packed, group.count).iter() {
                    alone(out, group.first, body);
                }
                continue;
            }
            let start = begin_frame(out, FrameKind::DeliverRun, 0);
            let d = DeliveryView {
                id: first_id + group.first as u64,
                ..*template
            };
            put_run_head(out, subscription, &d, group.count as u32);
            // The bodies are laid out as the frame carries them: one copy for the group, or
            // none, as a slice of their own after the frame's head.
            match pieces.as_deref_mut() {
                Some(pieces) if group.packed.len() >= SHARE_AT_LEAST => {
                    end_frame_before(out, start, group.packed.len());
                    pieces.push(out.split().freeze());
                    pieces.push(group.packed);
                }
                _ => {
                    out.extend_from_slice(&group.packed);
                    end_frame(out, start);
                }
            }
        }
    }

    /// Closes the open frame, if any: patches its count and length.
    pub fn finish(&mut self, out: &mut BytesMut) {
        if let Some(open) = self.open.take() {
            if let Some(slot) = out.get_mut(open.count_at..open.count_at + 4) {
                slot.copy_from_slice(&open.count.to_le_bytes());
            }
            end_frame(out, open.start);
        }
    }
}

/// Begins a frame for deliveries like `d`: header and shared fields, the count left to patch.
fn open_frame(out: &mut BytesMut, subscription: SubscriptionId, d: &DeliveryView<'_>) -> Open {
    let start = begin_frame(out, FrameKind::DeliverBatch, 0);
    out.extend_from_slice(&subscription.to_le_bytes());
    let queue = out.len() + 2..out.len() + 2 + fitting(d.queue).len();
    put_string(out, d.queue);
    let sender = out.len() + 2..out.len() + 2 + fitting(d.sender).len();
    put_string(out, d.sender);
    put_properties(out, d.properties);
    let count_at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    Open {
        start,
        subscription,
        queue,
        sender,
        properties: d.properties.clone(),
        count_at,
        count: 0,
        property_bytes: properties_len(d.properties) - 2,
    }
}
