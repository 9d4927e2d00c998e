//! Log records: framing (length, CRC-32C, kind) and every record kind's payload.
//!
//! ```text
//! offset size field
//! 0      4    len: bytes of kind + payload, u32 LE (>= 1)
//! 4      4    CRC-32C of kind + payload, XOR the segment's mask, u32 LE
//! 8      1    kind
//! 9      n    payload (len - 1 bytes)
//! ```
//!
//! The mask ([`segment_mask`]) ties a record to the segment it was written in. Segment files
//! are reused after compaction, overwritten in place from the start; a crash can leave the
//! previous segment's records after the new segment's last one, in the very same framing. The
//! mask makes every one of them fail its check, so recovery stops at the real end. Records are
//! encoded with a plain CRC and masked where the journal knows their segment
//! ([`mask_crc`]); the records inside a `Group` keep their plain CRC, as the group's own masked
//! CRC covers them.
//!
//! Records are encoded straight into the log buffer under the state lock, so encoding writes
//! into a caller's `Vec` and allocates nothing of its own.

use bytes::Bytes;
use ferry_protocol::Properties;

use super::codec::{properties_len, put_properties, put_str, put_u16, put_u32, put_u64, Reader};
use super::subscription::{self, SubscriptionDef, SubscriptionFields};
use super::FormatError;

/// Bytes of the frame before the kind: length and CRC.
pub const FRAME_PREFIX: usize = 8;

/// Record kind numbers. Never reuse a number.
pub mod kind {
    /// A client name was registered.
    pub const CLIENT_REGISTERED: u8 = 1;
    /// A queue was created.
    pub const QUEUE_CREATED: u8 = 2;
    /// A queue was deleted.
    pub const QUEUE_DELETED: u8 = 3;
    /// A message was stored (or rewritten by compaction with its current state).
    pub const MESSAGE_ADDED: u8 = 4;
    /// A message was handed out with client ack on one queue.
    pub const DELIVERY_STARTED: u8 = 5;
    /// A message left one queue for good.
    pub const MESSAGE_REMOVED: u8 = 6;
    /// A queue's settings (maximum delivery count, dead-letter queue).
    pub const QUEUE_OPTIONS: u8 = 7;
    /// A topic was created.
    pub const TOPIC_CREATED: u8 = 8;
    /// A topic was deleted with all of its subscriptions and their messages.
    pub const TOPIC_DELETED: u8 = 9;
    /// A subscription was created (or replaced, for a non-durable one).
    pub const SUBSCRIPTION_CREATED: u8 = 10;
    /// A subscription was deleted with its messages.
    pub const SUBSCRIPTION_DELETED: u8 = 11;
    /// A transaction: records applied at recovery all together or not at all.
    pub const GROUP: u8 = 12;
    /// A client name's registration ended (it expired, holding nothing).
    pub const CLIENT_FORGOTTEN: u8 = 13;
}

/// The fields of a message as [`encode_message_added`] writes them, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub struct MessageFields<'a> {
    /// Message id.
    pub id: u64,
    /// Arrival time, ms since the Unix epoch.
    pub created_at: u64,
    /// Application context.
    pub context: u64,
    /// 1 to 10.
    pub priority: u8,
    /// Sending client.
    pub sender: &'a str,
    /// Addressed client.
    pub receiver: Option<&'a str>,
    /// Properties.
    pub properties: &'a Properties,
    /// Payload.
    pub body: &'a [u8],
    /// Not visible before this time, ms since the Unix epoch; 0 = at once.
    pub deliver_at: u64,
    /// Never delivered at or after this time, ms since the Unix epoch; 0 = never expires.
    pub expires_at: u64,
}

impl MessageFields<'_> {
    /// Whether the record carries the time trailer (delivery and expiry times): only when
    /// one of them is set, so messages without them keep the original layout.
    fn timed(&self) -> bool {
        self.deliver_at != 0 || self.expires_at != 0
    }
}

/// A `MessageAdded` record, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct AddedMessage {
    /// Message id.
    pub id: u64,
    /// Arrival time.
    pub created_at: u64,
    /// Application context.
    pub context: u64,
    /// Priority.
    pub priority: u8,
    /// Sending client.
    pub sender: String,
    /// Addressed client.
    pub receiver: Option<String>,
    /// Queues the message is on, each with its delivery count.
    pub queues: Vec<(String, u32)>,
    /// Properties.
    pub properties: Properties,
    /// Payload (empty when decoded by [`decode_skipping_bodies`]).
    pub body: Bytes,
    /// Bytes of the payload, decoded or skipped.
    pub body_len: u32,
    /// Not visible before this time (0 = at once); 0 in records without the time trailer.
    pub deliver_at: u64,
    /// Never delivered at or after this time (0 = never); 0 in records without the trailer.
    pub expires_at: u64,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A client name was registered.
    ClientRegistered(String),
    /// A client name's registration ended.
    ClientForgotten(String),
    /// A queue was created.
    QueueCreated(String),
    /// A queue was deleted (its messages were removed from it by earlier records).
    QueueDeleted(String),
    /// A message and its current queues; replaces any earlier state of the same id.
    MessageAdded(AddedMessage),
    /// A client-ack delivery began: the message's delivery count on that queue is now `count`.
    DeliveryStarted {
        /// Message id.
        id: u64,
        /// The queue it was taken from.
        queue: String,
        /// Delivery count after this delivery.
        count: u32,
    },
    /// A queue's settings, written after its `QueueCreated`.
    QueueOptions {
        /// The queue.
        name: String,
        /// Maximum client-ack deliveries (0 = unlimited).
        max_deliveries: u32,
        /// Where messages over it go.
        dead_letter_queue: Option<String>,
        /// Where expired messages go (an optional field at the end of the record).
        expiry_queue: Option<String>,
    },
    /// The message left this queue (auto-ack take, ack, nack without requeue, forced delete).
    MessageRemoved {
        /// Message id.
        id: u64,
        /// The queue it left.
        queue: String,
    },
    /// A topic was created.
    TopicCreated(String),
    /// A topic was deleted, with every subscription it still had and their messages.
    TopicDeleted(String),
    /// A subscription was created; one of the same name on the same topic is replaced.
    SubscriptionCreated(SubscriptionDef),
    /// A subscription was deleted with the messages still on its queue.
    SubscriptionDeleted {
        /// Its topic.
        topic: String,
        /// Its name.
        name: String,
    },
    /// A transaction's records, each with its size, to apply all together.
    Group(Vec<(Record, u32)>),
}

/// The CRC mask of segment `segment`'s records: nonzero, and different for any two segments
/// whose numbers differ by less than 2^32 (an odd multiplier is a bijection of `u32`). Version
/// 1 segments used no mask, which is mask 0.
pub fn segment_mask(segment: u64) -> u32 {
    let folded = (segment as u32) ^ ((segment >> 32) as u32);
    match folded.wrapping_mul(0x9E37_79B1) {
        0 => 0x9E37_79B1,
        m => m,
    }
}

/// Masks the CRC of the record frame at the start of `frame` with `mask` (the frame is
/// encoded with a plain CRC; masking twice with the same mask unmasks).
pub fn mask_crc(frame: &mut [u8], mask: u32) {
    if let Some(field) = frame.get_mut(4..FRAME_PREFIX) {
        let mut crc = [0u8; 4];
        crc.copy_from_slice(field);
        field.copy_from_slice(&(u32::from_le_bytes(crc) ^ mask).to_le_bytes());
    }
}

/// Writes a record: the prefix and kind, then `payload` writes the rest, then the length and
/// CRC are patched in. Returns the record's total size in bytes.
fn frame(out: &mut Vec<u8>, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) -> u32 {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_PREFIX]);
    out.push(kind);
    payload(out);
    let covered = out.get(start + FRAME_PREFIX..).unwrap_or_default();
    let len = (covered.len() as u32).to_le_bytes();
    let crc = crc32c::crc32c(covered).to_le_bytes();
    if let Some(prefix) = out.get_mut(start..start + FRAME_PREFIX) {
        let (l, c) = prefix.split_at_mut(4);
        l.copy_from_slice(&len);
        c.copy_from_slice(&crc);
    }
    (out.len() - start) as u32
}

/// Writes a `ClientRegistered`, `ClientForgotten`, `QueueCreated`, `QueueDeleted`,
/// `TopicCreated` or `TopicDeleted` record.
pub fn encode_name(out: &mut Vec<u8>, kind: u8, name: &str) -> u32 {
    frame(out, kind, |out| put_str(out, name))
}

/// Writes a `MessageAdded` record for `m` on `queues` (name, delivery count).
pub fn encode_message_added<'q>(
    out: &mut Vec<u8>,
    m: &MessageFields<'_>,
    queues: impl ExactSizeIterator<Item = (&'q str, u32)>,
) -> u32 {
    frame(out, kind::MESSAGE_ADDED, |out| {
        put_u64(out, m.id);
        put_u64(out, m.created_at);
        put_u64(out, m.context);
        out.push(m.priority);
        put_str(out, m.sender);
        match m.receiver {
            Some(r) => {
                out.push(1);
                put_str(out, r);
            }
            None => out.push(0),
        }
        put_u16(out, queues.len() as u16);
        for (q, count) in queues {
            put_str(out, q);
            put_u32(out, count);
        }
        put_properties(out, m.properties);
        put_u32(out, m.body.len() as u32);
        out.extend_from_slice(m.body);
        if m.timed() {
            put_u64(out, m.deliver_at);
            put_u64(out, m.expires_at);
        }
    })
}

/// Size in bytes of the `MessageAdded` record [`encode_message_added`] would write.
pub fn message_added_len<'q>(
    m: &MessageFields<'_>,
    queues: impl Iterator<Item = &'q str>,
) -> usize {
    FRAME_PREFIX
        + 1
        + 8 * 3
        + 1
        + 2
        + m.sender.len()
        + 1
        + m.receiver.map_or(0, |r| 2 + r.len())
        + 2
        + queues.map(|q| 2 + q.len() + 4).sum::<usize>()
        + properties_len(m.properties)
        + 4
        + m.body.len()
        + if m.timed() { 16 } else { 0 }
}

/// Writes a `QueueOptions` record.
pub fn encode_queue_options(
    out: &mut Vec<u8>,
    name: &str,
    max_deliveries: u32,
    dead_letter_queue: Option<&str>,
    expiry_queue: Option<&str>,
) -> u32 {
    frame(out, kind::QUEUE_OPTIONS, |out| {
        put_str(out, name);
        put_u32(out, max_deliveries);
        match dead_letter_queue {
            Some(d) => {
                out.push(1);
                put_str(out, d);
            }
            None => out.push(0),
        }
        // Optional: written only when set.
        if let Some(x) = expiry_queue {
            put_str(out, x);
        }
    })
}

/// Writes a `SubscriptionCreated` record.
pub fn encode_subscription_created(out: &mut Vec<u8>, s: &SubscriptionFields<'_>) -> u32 {
    frame(out, kind::SUBSCRIPTION_CREATED, |out| {
        subscription::put(out, s)
    })
}

/// Writes a `SubscriptionDeleted` record.
pub fn encode_subscription_deleted(out: &mut Vec<u8>, topic: &str, name: &str) -> u32 {
    frame(out, kind::SUBSCRIPTION_DELETED, |out| {
        put_str(out, topic);
        put_str(out, name);
    })
}

/// Writes a `Group` record around `records`, complete records encoded back to back. Its CRC
/// covers every one of them, so recovery sees the group whole or torn.
pub fn encode_group(out: &mut Vec<u8>, records: &[u8]) -> u32 {
    frame(out, kind::GROUP, |out| out.extend_from_slice(records))
}

/// Size of the record [`encode_name`] writes for `name`.
pub fn name_len(name: &str) -> usize {
    FRAME_PREFIX + 1 + 2 + name.len()
}

/// Size of the `MessageRemoved` record [`encode_message_removed`] writes for `queue`.
pub fn message_removed_len(queue: &str) -> usize {
    FRAME_PREFIX + 1 + 8 + 2 + queue.len()
}

/// Writes a `DeliveryStarted` record.
pub fn encode_started_delivery(out: &mut Vec<u8>, id: u64, queue: &str, count: u32) -> u32 {
    frame(out, kind::DELIVERY_STARTED, |out| {
        put_u64(out, id);
        put_u32(out, count);
        put_str(out, queue);
    })
}

/// Writes a `MessageRemoved` record.
pub fn encode_message_removed(out: &mut Vec<u8>, id: u64, queue: &str) -> u32 {
    frame(out, kind::MESSAGE_REMOVED, |out| {
        put_u64(out, id);
        put_str(out, queue);
    })
}

/// What [`next_frame`] found at the start of a buffer: a record, the end, or a torn tail.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan<'a> {
    /// No bytes left: a clean end.
    End,
    /// A complete record whose CRC matches.
    Record {
        /// Its kind.
        kind: u8,
        /// Its payload.
        payload: &'a [u8],
        /// Its total size, prefix included.
        size: usize,
    },
    /// Bytes that are not a complete, intact record: a torn or corrupt tail.
    Torn(&'static str),
}

/// Reads the record frame at the start of `buf`, checking length and CRC, the CRC masked with
/// `mask` (the segment's [`segment_mask`], or 0 for version 1 segments and records in a group).
pub fn next_frame(buf: &[u8], mask: u32) -> Scan<'_> {
    if buf.is_empty() {
        return Scan::End;
    }
    let mut r = Reader::new(buf);
    let (Ok(len), Ok(crc)) = (r.u32("length"), r.u32("crc")) else {
        return Scan::Torn("incomplete record prefix");
    };
    if len == 0 {
        return Scan::Torn("zero record length");
    }
    let Ok(covered) = r.take(len as usize, "record") else {
        return Scan::Torn("record runs past the end of the file");
    };
    if crc32c::crc32c(covered) ^ mask != crc {
        return Scan::Torn("record checksum mismatch");
    }
    match covered.split_first() {
        Some((kind, payload)) => Scan::Record {
            kind: *kind,
            payload,
            size: FRAME_PREFIX + len as usize,
        },
        None => Scan::Torn("zero record length"),
    }
}

/// Decodes the payload of an intact record, message bodies included (the engine itself never
/// needs them decoded: recovery skips them, deliveries find them with [`added_body`]).
#[cfg(test)]
pub fn decode(kind: u8, payload: &[u8]) -> Result<Record, FormatError> {
    decode_with(kind, payload, Bodies::Copy)
}

/// [`decode`], except that message bodies are skipped, not copied: each `MessageAdded` comes
/// with an empty `body` and its `body_len`. Recovery rebuilds the state this way (the state
/// keeps where a body is, never the body), so that it costs no copy of every body in the log.
pub fn decode_skipping_bodies(kind: u8, payload: &[u8]) -> Result<Record, FormatError> {
    decode_with(kind, payload, Bodies::Skip)
}

/// Whether decoding copies message bodies out (tests only) or skips them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bodies {
    #[cfg(test)]
    Copy,
    Skip,
}

fn decode_with(kind: u8, payload: &[u8], bodies: Bodies) -> Result<Record, FormatError> {
    let mut r = Reader::new(payload);
    let record = match kind {
        kind::CLIENT_REGISTERED => Record::ClientRegistered(r.str("client name")?),
        kind::CLIENT_FORGOTTEN => Record::ClientForgotten(r.str("client name")?),
        kind::QUEUE_CREATED => Record::QueueCreated(r.str("queue name")?),
        kind::QUEUE_DELETED => Record::QueueDeleted(r.str("queue name")?),
        kind::MESSAGE_ADDED => Record::MessageAdded(decode_added(&mut r, bodies)?),
        kind::TOPIC_CREATED => Record::TopicCreated(r.str("topic name")?),
        kind::TOPIC_DELETED => Record::TopicDeleted(r.str("topic name")?),
        kind::SUBSCRIPTION_CREATED => Record::SubscriptionCreated(subscription::read(&mut r)?),
        kind::SUBSCRIPTION_DELETED => Record::SubscriptionDeleted {
            topic: r.str("topic name")?,
            name: r.str("subscription name")?,
        },
        kind::GROUP => Record::Group(decode_group(r.take(r.remaining(), "group")?, bodies)?),
        kind::DELIVERY_STARTED => Record::DeliveryStarted {
            id: r.u64("message id")?,
            count: r.u32("delivery count")?,
            queue: r.str("queue name")?,
        },
        kind::MESSAGE_REMOVED => Record::MessageRemoved {
            id: r.u64("message id")?,
            queue: r.str("queue name")?,
        },
        kind::QUEUE_OPTIONS => Record::QueueOptions {
            name: r.str("queue name")?,
            max_deliveries: r.u32("max deliveries")?,
            dead_letter_queue: match r.u8("dead-letter presence")? {
                0 => None,
                1 => Some(r.str("dead-letter queue")?),
                v => {
                    return Err(FormatError::Invalid {
                        field: "dead-letter presence",
                        value: u64::from(v),
                    })
                }
            },
            expiry_queue: if r.remaining() > 0 {
                Some(r.str("expiry queue")?)
            } else {
                None
            },
        },
        other => {
            return Err(FormatError::Invalid {
                field: "record kind",
                value: u64::from(other),
            })
        }
    };
    r.finish()?;
    Ok(record)
}

/// The records of a group. Its own CRC matched, so an inner record that is not intact, or a
/// group inside a group, is a bug, not a torn write.
fn decode_group(mut buf: &[u8], bodies: Bodies) -> Result<Vec<(Record, u32)>, FormatError> {
    let mut records = Vec::new();
    loop {
        match next_frame(buf, 0) {
            Scan::End => return Ok(records),
            Scan::Record {
                kind: kind::GROUP, ..
            } => {
                return Err(FormatError::Invalid {
                    field: "record kind inside a group",
                    value: u64::from(kind::GROUP),
                })
            }
            Scan::Record {
                kind,
                payload,
                size,
            } => {
                records.push((decode_with(kind, payload, bodies)?, size as u32));
                buf = buf.get(size..).unwrap_or_default();
            }
            Scan::Torn(_) => return Err(FormatError::Truncated("record inside a group")),
        }
    }
}

/// The message id and the body of a `MessageAdded` payload, the body borrowed from it: what a
/// delivery reads from the log. Skips the other fields without decoding them (no allocation),
/// checking only that they are there.
pub fn added_body(payload: &[u8]) -> Result<(u64, &[u8]), FormatError> {
    let mut r = Reader::new(payload);
    let id = r.u64("message id")?;
    r.take(8 + 8 + 1, "times, context and priority")?;
    skip_str(&mut r, "sender")?;
    if r.u8("receiver presence")? != 0 {
        skip_str(&mut r, "receiver")?;
    }
    for _ in 0..r.u16("queue count")? {
        skip_str(&mut r, "queue name")?;
        r.take(4, "delivery count")?;
    }
    for _ in 0..r.u16("property count")? {
        skip_str(&mut r, "property name")?;
        match r.u8("property type")? {
            0 => r.take(1, "property value")?,
            1 | 2 => r.take(8, "property value")?,
            _ => {
                skip_str(&mut r, "property value")?;
                &[]
            }
        };
    }
    let len = r.u32("body")? as usize;
    Ok((id, r.take(len, "body")?))
}

fn skip_str(r: &mut Reader<'_>, field: &'static str) -> Result<(), FormatError> {
    let len = r.u16(field)?;
    r.take(usize::from(len), field).map(|_| ())
}

fn decode_added(r: &mut Reader<'_>, bodies: Bodies) -> Result<AddedMessage, FormatError> {
    let id = r.u64("message id")?;
    let created_at = r.u64("created_at")?;
    let context = r.u64("context")?;
    let priority = r.u8("priority")?;
    let sender = r.str("sender")?;
    let receiver = match r.u8("receiver presence")? {
        0 => None,
        1 => Some(r.str("receiver")?),
        v => {
            return Err(FormatError::Invalid {
                field: "receiver presence",
                value: u64::from(v),
            })
        }
    };
    let n = u64::from(r.u16("queue count")?);
    let n = r.count(n, 6, "queue count")?;
    let mut queues = Vec::with_capacity(n);
    for _ in 0..n {
        let q = r.str("queue name")?;
        queues.push((q, r.u32("delivery count")?));
    }
    let properties = r.properties()?;
    let (body, body_len) = match bodies {
        #[cfg(test)]
        Bodies::Copy => {
            let len = r.u32("body")?;
            (Bytes::copy_from_slice(r.take(len as usize, "body")?), len)
        }
        Bodies::Skip => {
            let len = r.u32("body")?;
            r.take(len as usize, "body")?;
            (Bytes::new(), len)
        }
    };
    // The optional time trailer (records written before it existed, and messages without a
    // delay or time to live, end after the body).
    let (deliver_at, expires_at) = if r.remaining() > 0 {
        (r.u64("deliver_at")?, r.u64("expires_at")?)
    } else {
        (0, 0)
    };
    Ok(AddedMessage {
        id,
        created_at,
        context,
        priority,
        sender,
        receiver,
        queues,
        properties,
        body,
        body_len,
        deliver_at,
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::PropertyValue;

    fn sample(out: &mut Vec<u8>) -> (u32, MessageFields<'static>) {
        static PROPS: std::sync::OnceLock<Properties> = std::sync::OnceLock::new();
        let props = PROPS.get_or_init(|| vec![("k".into(), PropertyValue::Int(3))].into());
        let m = MessageFields {
            id: 9,
            created_at: 1234,
            context: 77,
            priority: 7,
            sender: "alice",
            receiver: Some("bob"),
            properties: props,
            body: b"hello",
            deliver_at: 0,
            expires_at: 0,
        };
        let n = encode_message_added(out, &m, [("q1", 0u32), ("q2", 2)].into_iter());
        (n, m)
    }

    #[test]
    fn every_kind_roundtrips() {
        let mut out = Vec::new();
        let (n, m) = sample(&mut out);
        assert_eq!(n as usize, out.len());
        assert_eq!(out.len(), message_added_len(&m, ["q1", "q2"].into_iter()));
        encode_name(&mut out, kind::QUEUE_CREATED, "orders");
        encode_name(&mut out, kind::QUEUE_DELETED, "orders");
        let at = out.len();
        encode_name(&mut out, kind::CLIENT_REGISTERED, "carol");
        assert_eq!(out.len() - at, name_len("carol"));
        encode_name(&mut out, kind::CLIENT_FORGOTTEN, "carol");
        encode_started_delivery(&mut out, 9, "q2", 3);
        encode_message_removed(&mut out, 9, "q1");
        encode_queue_options(&mut out, "q1", 3, Some("dlq"), None);
        encode_queue_options(&mut out, "q2", 0, None, Some("exp"));
        let mut pos = 0;
        let mut got = Vec::new();
        loop {
            match next_frame(&out[pos..], 0) {
                Scan::End => break,
                Scan::Record {
                    kind,
                    payload,
                    size,
                } => {
                    got.push(decode(kind, payload).unwrap());
                    pos += size;
                }
                Scan::Torn(why) => panic!("{why}"),
            }
        }
        assert_eq!(got.len(), 9);
        assert_eq!(got[3], Record::ClientRegistered("carol".into()));
        assert_eq!(got[4], Record::ClientForgotten("carol".into()));
        got.remove(4);
        assert_eq!(
            got[6],
            Record::QueueOptions {
                name: "q1".into(),
                max_deliveries: 3,
                dead_letter_queue: Some("dlq".into()),
                expiry_queue: None,
            }
        );
        assert_eq!(
            got[7],
            Record::QueueOptions {
                name: "q2".into(),
                max_deliveries: 0,
                dead_letter_queue: None,
                expiry_queue: Some("exp".into()),
            }
        );
        let Record::MessageAdded(a) = &got[0] else {
            panic!()
        };
        assert_eq!(a.queues, vec![("q1".into(), 0), ("q2".into(), 2)]);
        assert_eq!(a.receiver.as_deref(), Some("bob"));
        assert_eq!(&a.body[..], b"hello");
        assert_eq!(
            got[4],
            Record::DeliveryStarted {
                id: 9,
                queue: "q2".into(),
                count: 3
            }
        );
        assert_eq!(
            got[5],
            Record::MessageRemoved {
                id: 9,
                queue: "q1".into()
            }
        );
    }

    #[test]
    fn skipping_bodies_decodes_everything_else_alike() {
        let mut out = Vec::new();
        sample(&mut out);
        let Scan::Record { kind, payload, .. } = next_frame(&out, 0) else {
            panic!("not intact");
        };
        let (Record::MessageAdded(full), Record::MessageAdded(skipped)) = (
            decode(kind, payload).unwrap(),
            decode_skipping_bodies(kind, payload).unwrap(),
        ) else {
            panic!("not a message");
        };
        assert_eq!((&full.body[..], full.body_len), (&b"hello"[..], 5));
        assert!(skipped.body.is_empty());
        assert_eq!(
            AddedMessage {
                body: full.body.clone(),
                ..skipped
            },
            full,
            "only the body is left out; its length is kept"
        );
    }

    #[test]
    fn a_body_is_found_past_every_kind_of_field() {
        let props: Properties = vec![
            ("b".into(), PropertyValue::Bool(true)),
            ("i".into(), PropertyValue::Int(-5)),
            ("f".into(), PropertyValue::Float(1.5)),
            ("s".into(), PropertyValue::Str("text".into())),
        ]
        .into();
        for (receiver, props, timed) in [
            (None, Properties::new(), false),
            (Some("bob"), props.clone(), true),
        ] {
            let mut out = Vec::new();
            let m = MessageFields {
                id: 42,
                created_at: 1,
                context: 2,
                priority: 3,
                sender: "alice",
                receiver,
                properties: &props,
                body: b"the body",
                deliver_at: u64::from(timed),
                expires_at: 0,
            };
            encode_message_added(&mut out, &m, [("q1", 0u32), ("q2", 2)].into_iter());
            let Scan::Record { payload, .. } = next_frame(&out, 0) else {
                panic!("not intact");
            };
            assert_eq!(added_body(payload).unwrap(), (42, &b"the body"[..]));
            assert!(added_body(&payload[..payload.len() - 20]).is_err());
        }
    }

    #[test]
    fn every_truncation_and_bit_flip_is_torn() {
        let mut out = Vec::new();
        sample(&mut out);
        for cut in 1..out.len() {
            assert!(
                matches!(next_frame(&out[..cut], 0), Scan::Torn(_)),
                "cut {cut}"
            );
        }
        for byte in 0..out.len() {
            for bit in 0..8 {
                let mut b = out.clone();
                b[byte] ^= 1 << bit;
                match next_frame(&b, 0) {
                    Scan::Torn(_) => {}
                    Scan::Record { .. } | Scan::End => panic!("flip {byte}.{bit} undetected"),
                }
            }
        }
    }

    #[test]
    fn the_time_trailer_roundtrips_and_is_absent_without_times() {
        let props = Properties::new();
        let plain = MessageFields {
            id: 1,
            created_at: 10,
            context: 0,
            priority: 5,
            sender: "s",
            receiver: None,
            properties: &props,
            body: b"x",
            deliver_at: 0,
            expires_at: 0,
        };
        let timed = MessageFields {
            deliver_at: 500,
            expires_at: 30_010,
            ..plain
        };
        for (m, extra) in [(plain, 0), (timed, 16)] {
            let mut out = Vec::new();
            let n = encode_message_added(&mut out, &m, [("q", 0u32)].into_iter());
            assert_eq!(n as usize, message_added_len(&m, ["q"].into_iter()));
            let Scan::Record { kind, payload, .. } = next_frame(&out, 0) else {
                panic!("torn")
            };
            assert_eq!(payload.len(), 8 * 3 + 1 + 3 + 1 + 2 + 7 + 2 + 5 + extra);
            let Record::MessageAdded(a) = decode(kind, payload).unwrap() else {
                panic!()
            };
            assert_eq!((a.deliver_at, a.expires_at), (m.deliver_at, m.expires_at));
        }
    }

    #[test]
    fn a_masked_record_passes_only_in_its_own_segment() {
        let mut out = Vec::new();
        sample(&mut out);
        let plain = out.clone();
        mask_crc(&mut out, segment_mask(7));
        assert!(matches!(
            next_frame(&out, segment_mask(7)),
            Scan::Record { .. }
        ));
        // A stale record of segment 7 left in a file reused for any later segment, or read
        // as a version 1 (unmasked) record, fails its check.
        for other in [0, segment_mask(6), segment_mask(8), segment_mask(7 + 1000)] {
            assert!(matches!(next_frame(&out, other), Scan::Torn(_)), "{other}");
        }
        assert!(matches!(next_frame(&plain, segment_mask(7)), Scan::Torn(_)));
        mask_crc(&mut out, segment_mask(7));
        assert_eq!(out, plain, "masking twice unmasks");
    }

    #[test]
    fn segment_masks_are_nonzero_and_distinct_over_a_long_run() {
        let mut seen = std::collections::HashSet::new();
        // Segment numbers start at 1.
        for n in (1..100_000u64).chain([u32::MAX as u64, 1 << 32, u64::MAX]) {
            let m = segment_mask(n);
            assert_ne!(m, 0, "segment {n}");
            if n < 100_000 {
                assert!(seen.insert(m), "segment {n} repeats a mask");
            }
        }
    }

    #[test]
    fn pinned_removed_layout() {
        let mut out = Vec::new();
        encode_message_removed(&mut out, 0x0102, "q");
        let payload_len = 1 + 8 + 2 + 1;
        assert_eq!(&out[0..4], &(payload_len as u32).to_le_bytes());
        assert_eq!(&out[4..8], &crc32c::crc32c(&out[8..]).to_le_bytes());
        assert_eq!(out[8], kind::MESSAGE_REMOVED);
        assert_eq!(&out[9..17], &0x0102u64.to_le_bytes());
        assert_eq!(&out[17..19], &1u16.to_le_bytes());
        assert_eq!(out[19], b'q');
    }
}
