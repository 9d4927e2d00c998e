//! [`DeliverBatchWriter`]: how a broker writes a run of deliveries as `DeliverBatch` frames
//! ([`crate::deliver_batch`] has the frame's layout and readers).

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::deliver_batch::{put_entry, MAX_BATCH_FRAME_BYTES, MAX_REPEATED_PROPERTY_BYTES};
use crate::frame::{begin_frame, end_frame, FrameKind, HEADER_LEN};
use crate::responses::encode_deliver;
use crate::size::{batch_entry_len, properties_len};
use crate::types::{DeliveryView, Properties, SubscriptionId};
use crate::wire::{fitting, put_properties, put_string};

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
}

impl DeliverBatchWriter {
    /// A writer whose frames stay within `max_frame_bytes` (the receiver's frame limit) and
    /// [`MAX_BATCH_FRAME_BYTES`].
    pub fn new(max_frame_bytes: u32) -> DeliverBatchWriter {
        DeliverBatchWriter {
            open: None,
            max_frame: (max_frame_bytes as usize).min(MAX_BATCH_FRAME_BYTES),
        }
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
    /// `first_id` on and each body in turn. The first is pushed as [`DeliverBatchWriter::push`]
    /// does; the others share its fields, so while they fit the open frame they go in without
    /// comparing names and properties again.
    pub fn push_run(
        &mut self,
        out: &mut BytesMut,
        subscription: SubscriptionId,
        template: &DeliveryView<'_>,
        first_id: u64,
        bodies: &[Bytes],
    ) {
        for d in template.run(first_id, bodies) {
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
