//! The `DeliverRun` push (protocol version 7): deliveries on an auto-ack subscription that
//! differ only in their message ids (consecutive) and bodies, every other field written once.
//!
//! ```text
//! subscription u64 | queue string | sender string | properties | receiver opt string |
//! priority u8 | context u64 | created at u64 | delivery count u32 | expires at u64 |
//! first message id u64 | count u32 (>= 1) | count x { body bytes }
//! ```
//!
//! The messages are `first`, `first + 1`, ... in order; every delivery id is 0 (auto ack:
//! nothing to settle). A publish batch handed straight to a subscriber is such a run: its
//! messages took consecutive ids and share everything but their bodies. In a `DeliverBatch`
//! each delivery still carried its own ids and fixed fields, 50 bytes beside a 150-byte body
//! and most of a reader's work per delivery; here it carries only its body's length.
//!
//! A broker writes runs only to sessions of version 7 or later
//! ([`crate::DELIVER_RUN_VERSION`]), with [`crate::batch_writer::DeliverBatchWriter`], and
//! keeps each frame within [`MAX_RUN_DELIVERIES`] and the size and property bounds of a
//! `DeliverBatch`
//! ([`crate::deliver_batch::MAX_BATCH_FRAME_BYTES`],
//! [`crate::deliver_batch::MAX_REPEATED_PROPERTY_BYTES`]).

use std::ops::Range;

use bytes::{BufMut, BytesMut};

use crate::deliver_batch::{check_repeated, read_shared_head, BatchEntry};
use crate::name::Name;
use crate::types::{Delivery, DeliveryView, Properties, SubscriptionId};
use crate::wire::{put_opt_string, put_properties, put_string, Reader, WireError};

/// Bytes of the fields after the receiver and before the bodies: priority, context, created
/// at, delivery count, expires at, first id, count.
pub const RUN_FIXED: usize = 1 + 8 + 8 + 4 + 8 + 8 + 4;

/// The most deliveries one run frame carries. A body may be empty, 4 bytes on the wire, while
/// a decoded delivery takes well over a hundred in memory: the cap keeps a frame's decoded
/// deliveries within what the densest frame of any other kind decodes into (see the
/// protocol's property tests), whatever its count says.
pub const MAX_RUN_DELIVERIES: usize = 1024;

/// The shared part of a run: everything but the ids and bodies of its deliveries.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    /// The subscription.
    pub subscription: SubscriptionId,
    /// Every delivery's queue.
    pub queue: Name,
    /// Every delivery's sender.
    pub sender: Name,
    /// Every delivery's properties.
    pub properties: Properties,
    /// Every delivery's addressed client, if any.
    pub receiver: Option<String>,
    /// 1 to 10.
    pub priority: u8,
    /// As set by the sender.
    pub context: u64,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// Deliveries of each message before this one.
    pub delivery_count: u32,
    /// When each expires, ms since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// The first delivery's message id; the others follow it one by one.
    pub first_id: u64,
    /// Deliveries in the frame (at least 1).
    pub count: usize,
}

impl RunHead {
    /// The fields of the run's `index`th delivery (from 0), its body at `body` in the buffer
    /// read: what a `DeliverBatch` entry would carry for it.
    pub fn entry(&self, index: usize, body: Range<usize>) -> BatchEntry {
        BatchEntry {
            delivery_id: 0,
            id: self.first_id.wrapping_add(index as u64),
            receiver: self.receiver.clone(),
            priority: self.priority,
            context: self.context,
            created_at: self.created_at,
            delivery_count: self.delivery_count,
            body,
            expires_at: self.expires_at,
        }
    }
}

/// Reads a run's head. `queue`, `sender`: the names it likely repeats (then shared, not
/// allocated again), as for [`crate::deliver_batch::read_batch_head_like`].
pub fn read_run_head_like(
    r: &mut Reader<'_>,
    queue: Option<&Name>,
    sender: Option<&Name>,
) -> Result<RunHead, WireError> {
    let shared = read_shared_head(r, queue, sender)?;
    let receiver = r.opt_string("receiver")?;
    let mut fixed = r.fixed::<{ RUN_FIXED - 4 }>()?;
    let (priority, context, created_at, delivery_count, expires_at, first_id) = (
        fixed.u8(),
        fixed.u64(),
        fixed.u64(),
        fixed.u32(),
        fixed.u64(),
        fixed.u64(),
    );
    // Each body takes at least its length.
    let count = r.count32("deliveries", 4)?;
    if count == 0 || count > MAX_RUN_DELIVERIES {
        return Err(WireError::InvalidValue {
            field: "delivery count of a run",
            value: count as u64,
        });
    }
    if first_id.checked_add(count as u64 - 1).is_none() {
        return Err(WireError::InvalidValue {
            field: "first message id of a run",
            value: first_id,
        });
    }
    check_repeated(
        shared.property_bytes,
        count,
        "bytes of a run's properties repeated per delivery",
    )?;
    Ok(RunHead {
        subscription: shared.subscription,
        queue: shared.queue,
        sender: shared.sender,
        properties: shared.properties,
        receiver,
        priority,
        context,
        created_at,
        delivery_count,
        expires_at,
        first_id,
        count,
    })
}

/// Reads a whole `DeliverRun` payload (as [`crate::Response::decode`] does).
pub fn read_deliver_run(r: &mut Reader<'_>) -> Result<(SubscriptionId, Vec<Delivery>), WireError> {
    let head = read_run_head_like(r, None, None)?;
    // `head.count` passed `count32` against the bytes left: room for exactly that many.
    let mut deliveries = Vec::new();
    deliveries.reserve_exact(head.count);
    for i in 0..head.count {
        let at = r.bytes_range()?;
        let body = r.slice(at.clone());
        deliveries.push(head.entry(i, at).into_delivery(
            head.queue.clone(),
            head.sender.clone(),
            head.properties.clone(),
            body,
        ));
    }
    Ok((head.subscription, deliveries))
}

/// Whether `deliveries` can travel as one run: at least one, each alike the first but for
/// its id (the first's plus its place) and body, every delivery id 0.
pub fn is_run(deliveries: &[Delivery]) -> bool {
    let Some(first) = deliveries.first() else {
        return false;
    };
    let f = &first.message;
    deliveries.iter().zip(0u64..).all(|(d, i)| {
        let m = &d.message;
        d.delivery_id == 0
            && Some(m.id) == f.id.checked_add(i)
            && m.queue == f.queue
            && m.sender == f.sender
            && m.properties == f.properties
            && m.receiver == f.receiver
            && m.priority == f.priority
            && m.context == f.context
            && m.created_at == f.created_at
            && m.delivery_count == f.delivery_count
            && m.expires_at == f.expires_at
    })
}

/// Writes the payload of a `DeliverRun` of `deliveries` on `subscription`: every field but
/// the bodies taken from the first (they must be a run, [`is_run`]). Empty `deliveries`
/// write a count of 0, which no reader accepts. A broker writes its runs with
/// [`crate::batch_writer::DeliverBatchWriter::push_run`].
pub fn put_deliver_run(out: &mut BytesMut, subscription: SubscriptionId, deliveries: &[Delivery]) {
    match deliveries.first() {
        Some(first) => put_run_head(out, subscription, &first.view(), deliveries.len() as u32),
        None => {
            let none = Properties::new();
            let empty = DeliveryView {
                delivery_id: 0,
                id: 0,
                queue: "",
                sender: "",
                receiver: None,
                priority: 0,
                context: 0,
                created_at: 0,
                delivery_count: 0,
                properties: &none,
                body: &[],
                expires_at: 0,
            };
            put_run_head(out, subscription, &empty, 0);
        }
    }
    for d in deliveries {
        put_run_body(out, &d.message.body);
    }
}

/// Writes a run's head: `d`'s fields (its id first), and `count`.
pub(crate) fn put_run_head(
    out: &mut BytesMut,
    subscription: SubscriptionId,
    d: &DeliveryView<'_>,
    count: u32,
) {
    out.put_u64_le(subscription);
    put_string(out, d.queue);
    put_string(out, d.sender);
    put_properties(out, d.properties);
    put_opt_string(out, d.receiver);
    out.put_u8(d.priority);
    out.put_u64_le(d.context);
    out.put_u64_le(d.created_at);
    out.put_u32_le(d.delivery_count);
    out.put_u64_le(d.expires_at);
    out.put_u64_le(d.id);
    out.put_u32_le(count);
}

/// Writes one body of a run.
pub(crate) fn put_run_body(out: &mut BytesMut, body: &[u8]) {
    out.reserve(4 + body.len());
    out.put_u32_le(body.len() as u32);
    out.extend_from_slice(body);
}
