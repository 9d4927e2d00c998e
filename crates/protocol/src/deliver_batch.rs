//! The `DeliverBatch` push (protocol version 5): many deliveries on one subscription in one
//! frame, their queue name, sender name and properties written once.
//!
//! ```text
//! subscription u64 | queue string | sender string | properties | count u32 (>= 1)
//! count x { delivery id u64 | message id u64 | receiver opt string | priority u8 |
//!           context u64 | created at u64 | delivery count u32 | body bytes | expires at u64 }
//! ```
//!
//! A stream of small messages from one publisher to one subscription repeats the same names
//! and (for a publish, the topic) property in every `Deliver` frame: for a 150-byte body they
//! were about 40% of the bytes, and decoding them a good part of a receiver's work. Every
//! delivery of a batch has exactly the batch's queue, sender and properties; the writer
//! starts a new frame when one of them changes, and keeps every frame within a size
//! ([`crate::batch_writer::DeliverBatchWriter::new`]). A delivery too large for a batch frame goes out as a plain
//! `Deliver`, so no delivery needs a larger frame than before.
//!
//! The broker sends `DeliverBatch` only to sessions that connected with version 5 or later;
//! a version 4 session gets the same deliveries as `Deliver` frames.

use bytes::{BufMut, Bytes, BytesMut};

use crate::name::Name;
use crate::types::{Delivery, DeliveryView, Message, Properties, SubscriptionId};
use crate::wire::{put_opt_string, put_properties, put_string, Reader, WireError};

/// Bytes of a batch entry besides its receiver and body: two ids, the receiver's presence
/// byte, the fixed fields (21), the body's length and the expiry.
const ENTRY_FIXED: usize = 16 + 1 + 21 + 4 + 8;

/// The largest frame a batch grows to (header included) unless the peer's frame limit is
/// smaller: large enough that a frame's header is noise beside its deliveries, small enough
/// that a subscription's deliveries are not held back behind one another for long.
pub const MAX_BATCH_FRAME_BYTES: usize = 64 * 1024;

/// The most bytes a batch's properties (beyond their count) may take repeated once per
/// delivery: a reader may give every decoded delivery its own copy of them (this crate's
/// readers share one, see [`crate::properties`]), and this keeps a small frame
/// from decoding into much more memory than a frame of `Deliver`s could (the writer keeps to
/// it, the readers refuse batches beyond it).
pub const MAX_REPEATED_PROPERTY_BYTES: usize = 64 * 1024;

/// The shared part of a batch: subscription, names and properties, and how many deliveries
/// follow.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchHead {
    /// The subscription.
    pub subscription: SubscriptionId,
    /// Every delivery's queue.
    pub queue: Name,
    /// Every delivery's sender.
    pub sender: Name,
    /// Every delivery's properties.
    pub properties: Properties,
    /// Deliveries in the frame (at least 1).
    pub count: usize,
}

/// Reads a batch's head. `prev` is the last message decoded on the same connection, whose
/// names a batch likely repeats (then they are shared, not allocated again).
pub fn read_batch_head(r: &mut Reader<'_>, prev: Option<&Message>) -> Result<BatchHead, WireError> {
    read_batch_head_like(r, prev.map(|p| &p.queue), prev.map(|p| &p.sender))
}

/// Reads a batch's head as [`read_batch_head`] does, given the names it likely repeats
/// (`queue`, `sender`: then they are shared, not allocated again) rather than a message.
pub fn read_batch_head_like(
    r: &mut Reader<'_>,
    queue: Option<&Name>,
    sender: Option<&Name>,
) -> Result<BatchHead, WireError> {
    let shared = read_shared_head(r, queue, sender)?;
    let count = r.count32("deliveries", ENTRY_FIXED)?;
    if count == 0 {
        return Err(WireError::InvalidValue {
            field: "delivery count of a batch",
            value: 0,
        });
    }
    check_repeated(
        shared.property_bytes,
        count,
        "bytes of a batch's properties repeated per delivery",
    )?;
    Ok(BatchHead {
        subscription: shared.subscription,
        queue: shared.queue,
        sender: shared.sender,
        properties: shared.properties,
        count,
    })
}

/// What every push of several deliveries (`DeliverBatch`, `DeliverRun`) begins with.
pub(crate) struct SharedHead {
    pub(crate) subscription: SubscriptionId,
    pub(crate) queue: Name,
    pub(crate) sender: Name,
    pub(crate) properties: Properties,
    /// Bytes the properties take beyond their count.
    pub(crate) property_bytes: usize,
}

/// Reads a [`SharedHead`]; `queue`, `sender`: the names it likely repeats.
pub(crate) fn read_shared_head(
    r: &mut Reader<'_>,
    queue: Option<&Name>,
    sender: Option<&Name>,
) -> Result<SharedHead, WireError> {
    let subscription = r.u64()?;
    let queue = r.name_like("queue name", queue)?;
    let sender = r.name_like("sender", sender)?;
    let before = r.remaining();
    let properties = r.properties()?;
    Ok(SharedHead {
        subscription,
        queue,
        sender,
        properties,
        property_bytes: before - r.remaining() - 2,
    })
}

/// Refuses properties of `property_bytes` repeated `count` times beyond
/// [`MAX_REPEATED_PROPERTY_BYTES`], naming `field`.
pub(crate) fn check_repeated(
    property_bytes: usize,
    count: usize,
    field: &'static str,
) -> Result<(), WireError> {
    let repeated = property_bytes.saturating_mul(count);
    if repeated > MAX_REPEATED_PROPERTY_BYTES {
        return Err(WireError::InvalidValue {
            field,
            value: repeated as u64,
        });
    }
    Ok(())
}

/// Reads the next delivery of the batch `head` began.
pub fn read_batch_entry(r: &mut Reader<'_>, head: &BatchHead) -> Result<Delivery, WireError> {
    let entry = read_batch_entry_fields(r)?;
    let body = r.slice(entry.body.clone());
    Ok(entry.into_delivery(
        head.queue.clone(),
        head.sender.clone(),
        head.properties.clone(),
        body,
    ))
}

/// A batch entry's own fields as [`read_batch_entry_fields`] reads them: its body as a range
/// of the buffer read, the rest as [`Delivery`] has them.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchEntry {
    /// The id to ack or nack; 0 for auto-ack deliveries.
    pub delivery_id: u64,
    /// The message's id.
    pub id: u64,
    /// The addressed client, if any.
    pub receiver: Option<String>,
    /// 1 to 10.
    pub priority: u8,
    /// As set by the sender.
    pub context: u64,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// How often it was handed out before.
    pub delivery_count: u32,
    /// Where the body is in the buffer read ([`Reader::bytes_range`]).
    pub body: std::ops::Range<usize>,
    /// When it expires, ms since the Unix epoch; 0 = never.
    pub expires_at: u64,
}

impl BatchEntry {
    /// The entry as an owned delivery, with the names and properties of its batch's head and
    /// its body.
    pub fn into_delivery(
        self,
        queue: Name,
        sender: Name,
        properties: Properties,
        body: Bytes,
    ) -> Delivery {
        Delivery {
            delivery_id: self.delivery_id,
            message: Message {
                id: self.id,
                queue,
                sender,
                receiver: self.receiver,
                priority: self.priority,
                context: self.context,
                properties,
                body,
                created_at: self.created_at,
                delivery_count: self.delivery_count,
                expires_at: self.expires_at,
            },
        }
    }
}

/// Reads the next entry of a batch as [`read_batch_entry`] does, without building a
/// [`Delivery`]: for a reader that keeps the buffer and a batch's head itself, and so takes
/// no reference to them per delivery.
pub fn read_batch_entry_fields(r: &mut Reader<'_>) -> Result<BatchEntry, WireError> {
    let mut ids = r.fixed::<16>()?;
    let (delivery_id, id) = (ids.u64(), ids.u64());
    let receiver = r.opt_string("receiver")?;
    let mut fixed = r.fixed::<21>()?;
    Ok(BatchEntry {
        delivery_id,
        id,
        receiver,
        priority: fixed.u8(),
        context: fixed.u64(),
        created_at: fixed.u64(),
        delivery_count: fixed.u32(),
        body: r.bytes_range()?,
        expires_at: r.u64()?,
    })
}

/// Reads a whole `DeliverBatch` payload (as [`crate::Response::decode`] does).
pub fn read_deliver_batch(
    r: &mut Reader<'_>,
) -> Result<(SubscriptionId, Vec<Delivery>), WireError> {
    let head = read_batch_head(r, None)?;
    // `head.count` passed `count32` against the bytes left: room for exactly that many.
    let mut deliveries = Vec::new();
    deliveries.reserve_exact(head.count);
    for _ in 0..head.count {
        deliveries.push(read_batch_entry(r, &head)?);
    }
    Ok((head.subscription, deliveries))
}

/// Writes the payload of a `DeliverBatch` of `deliveries` on `subscription`, their queue,
/// sender and properties taken from the first (all must share them): what
/// [`crate::Response`]'s encoder writes after the frame header. Empty `deliveries` write a
/// count of 0, which no reader accepts. A broker writes its batches with
/// [`crate::batch_writer::DeliverBatchWriter`].
pub fn put_deliver_batch(
    out: &mut BytesMut,
    subscription: SubscriptionId,
    deliveries: &[Delivery],
) {
    out.extend_from_slice(&subscription.to_le_bytes());
    let first = deliveries.first().map(|d| &d.message);
    put_string(out, first.map_or("", |m| &m.queue));
    put_string(out, first.map_or("", |m| &m.sender));
    put_properties(out, first.map_or(&Properties::new(), |m| &m.properties));
    out.extend_from_slice(&(deliveries.len() as u32).to_le_bytes());
    for d in deliveries {
        put_entry(out, &d.view());
    }
}

/// One entry: the delivery's own fields. Each field is written straight into `out` (room for
/// the whole entry reserved once): assembling the fixed fields in a stack array first and
/// copying it made the copy's loads wait on the array's smaller stores.
pub(crate) fn put_entry(out: &mut BytesMut, d: &DeliveryView<'_>) {
    // What `size::batch_entry_len` counts (not called: `size` reads this module's frames).
    out.reserve(16 + d.receiver.map_or(1, |r| 3 + r.len()) + 21 + 4 + d.body.len() + 8);
    out.put_u64_le(d.delivery_id);
    out.put_u64_le(d.id);
    put_opt_string(out, d.receiver);
    out.put_u8(d.priority);
    out.put_u64_le(d.context);
    out.put_u64_le(d.created_at);
    out.put_u32_le(d.delivery_count);
    out.put_u32_le(d.body.len() as u32);
    out.extend_from_slice(d.body);
    out.put_u64_le(d.expires_at);
}
