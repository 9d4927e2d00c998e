//! The `PublishBatch` request (protocol version 6): many bodies published to one topic in one
//! frame, with everything but the body written once.
//!
//! ```text
//! topic string | priority u8 | ttl u64 | delay u64 | flags u8 | properties |
//! count u32 (1 to MAX_PUBLISH_BATCH_BODIES) | count x body bytes
//! ```
//!
//! The mirror of [`crate::deliver_batch`] on the way in. A `SendBatch` of small publishes
//! repeats each message's queue list, receiver, fixed fields, properties and topic name: for a
//! 150-byte body that is a quarter of the bytes, and the broker decodes, checks and allocates
//! them once per message. Here every body is a message of its own (its own id, its own result)
//! with exactly the batch's topic, priority, time to live, delay, persistence and properties;
//! no receiver and context 0 (addressed or paired messages go in a `SendBatch`).
//!
//! A body takes 4 bytes of the frame at least and a decoded body handle more, so the count is
//! held to [`MAX_PUBLISH_BATCH_BODIES`] whatever the frame's size; the broker then applies its
//! `max_batch`. A broker may give each message its own copy of the properties (Ferry's share
//! one, see [`crate::properties`]), so they are held to [`MAX_REPEATED_PROPERTY_BYTES`]
//! repeated over the batch, as a `DeliverBatch`'s are.

use bytes::{BufMut, Bytes, BytesMut};

use crate::deliver_batch::MAX_REPEATED_PROPERTY_BYTES;
use crate::name::Name;
use crate::packed::PackedBodies;
use crate::types::{OutgoingMessage, Properties, DEFAULT_PRIORITY};
use crate::wire::{put_properties, put_string, Reader, WireError};

/// The most bodies one `PublishBatch` carries: a frame at the default 16 MiB limit could hold
/// four million empty bodies, and this keeps what one frame decodes into (a handle of 32 bytes
/// a body) within 2 MiB.
pub const MAX_PUBLISH_BATCH_BODIES: usize = 65_536;

/// Outgoing message flag: kept in memory only (as in an outgoing message).
const FLAG_NON_PERSISTENT: u8 = 0x01;

/// Many messages to one topic sharing everything but their bodies.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishBatch {
    /// The topic every body is published to.
    pub topic: Name,
    /// 1 (lowest) to 10 (highest).
    pub priority: u8,
    /// Time to live of each message in ms from when the broker accepts it; 0 = forever.
    pub ttl_ms: u64,
    /// Delayed delivery of each message in ms; 0 = at once.
    pub delay_ms: u64,
    /// `false`: kept in memory only. Default `true`.
    pub persistent: bool,
    /// Every message's properties.
    pub properties: Properties,
    /// One message each, in order.
    pub bodies: PackedBodies,
}

impl PublishBatch {
    /// Persistent messages of default priority with no properties, one per body, to `topic`.
    /// `bodies`: a `Vec<Bytes>` (packed here, each body copied once) or [`PackedBodies`]
    /// built in place.
    pub fn new(topic: impl Into<Name>, bodies: impl Into<PackedBodies>) -> PublishBatch {
        PublishBatch {
            topic: topic.into(),
            priority: DEFAULT_PRIORITY,
            ttl_ms: 0,
            delay_ms: 0,
            persistent: true,
            properties: Properties::new(),
            bodies: bodies.into(),
        }
    }

    /// The same batch, kept in memory only.
    pub fn non_persistent(mut self) -> PublishBatch {
        self.persistent = false;
        self
    }

    /// The message `body` of this batch stands for, as a `SendBatch` item would carry it.
    pub fn message(&self, body: Bytes) -> OutgoingMessage {
        OutgoingMessage {
            queues: Vec::new(),
            topic: Some(self.topic.clone()),
            persistent: self.persistent,
            receiver: None,
            priority: self.priority,
            context: 0,
            properties: self.properties.clone(),
            body,
            ttl_ms: self.ttl_ms,
            delay_ms: self.delay_ms,
        }
    }
}

/// Writes the payload of `batch`.
pub fn put_publish_batch(out: &mut BytesMut, batch: &PublishBatch) {
    put_publish_batch_head(out, batch);
    // The bodies are already laid out as the frame carries them.
    out.extend_from_slice(batch.bodies.packed());
}

/// Writes `batch` as a `PublishBatch` frame of request `request_id`, all but its packed
/// bodies, which end the frame: they are returned (a handle on the batch's own buffer, not a
/// copy) to be written right after `out`'s bytes, and the frame's length counts them. For a
/// writer that sends both with one vectored write: a batch's bodies are most of its bytes.
pub fn encode_publish_batch_head(
    request_id: u32,
    batch: &PublishBatch,
    out: &mut BytesMut,
) -> Bytes {
    let start = crate::frame::begin_frame(out, crate::frame::FrameKind::PublishBatch, request_id);
    put_publish_batch_head(out, batch);
    let bodies = batch.bodies.packed().clone();
    crate::frame::end_frame_before(out, start, bodies.len());
    bodies
}

/// Writes the payload of `batch` up to its packed bodies.
fn put_publish_batch_head(out: &mut BytesMut, batch: &PublishBatch) {
    put_string(out, &batch.topic);
    let mut fixed = [0u8; 18];
    fixed[0] = batch.priority;
    fixed[1..9].copy_from_slice(&batch.ttl_ms.to_le_bytes());
    fixed[9..17].copy_from_slice(&batch.delay_ms.to_le_bytes());
    fixed[17] = if batch.persistent {
        0
    } else {
        FLAG_NON_PERSISTENT
    };
    out.put_slice(&fixed);
    put_properties(out, &batch.properties);
    out.put_u32_le(batch.bodies.len() as u32);
}

/// Reads a whole `PublishBatch` payload: bodies are slices of the frame, not copies.
pub fn read_publish_batch(r: &mut Reader<'_>) -> Result<PublishBatch, WireError> {
    let topic = r.name_like("topic name", None)?;
    let mut fixed = r.fixed::<18>()?;
    let (priority, ttl_ms, delay_ms) = (fixed.u8(), fixed.u64(), fixed.u64());
    let persistent = match fixed.u8() {
        0 => true,
        FLAG_NON_PERSISTENT => false,
        v => {
            return Err(WireError::InvalidValue {
                field: "message flags",
                value: u64::from(v),
            })
        }
    };
    let before = r.remaining();
    let properties = r.properties()?;
    let property_bytes = before - r.remaining() - 2;
    let count = r.count32("bodies", 4)?;
    if count == 0 || count > MAX_PUBLISH_BATCH_BODIES {
        return Err(WireError::InvalidValue {
            field: "body count of a publish batch",
            value: count as u64,
        });
    }
    let repeated = property_bytes.saturating_mul(count);
    if repeated > MAX_REPEATED_PROPERTY_BYTES {
        return Err(WireError::InvalidValue {
            field: "bytes of a publish batch's properties repeated per body",
            value: repeated as u64,
        });
    }
    // One slice of the frame for every body: nothing allocated per body.
    let bodies = PackedBodies::read(r, count)?;
    Ok(PublishBatch {
        topic,
        priority,
        ttl_ms,
        delay_ms,
        persistent,
        properties,
        bodies,
    })
}
