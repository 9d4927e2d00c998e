//! Property tests: arbitrary generated values roundtrip, and arbitrary bytes never panic the
//! decoders nor make them allocate beyond the bytes that are really there.
//!
//! # How these tests bound allocation
//!
//! The frame size is bounded first: `split_frame` checks the length prefix against the limit
//! before it reserves anything, and only ever reserves room for the one frame it announced
//! (`split_never_reserves_beyond_the_limit` checks the buffer after every call).
//!
//! Inside a frame, the decoders allocate in exactly three ways:
//! 1. strings: `to_owned` of bytes that are present in the payload;
//! 2. byte fields (bodies): zero-copy slices of the payload, no allocation at all;
//! 3. lists: `Vec::with_capacity(n)` where `n` is a count read from the peer.
//!
//! Only (3) could be driven by a hostile number, so every count goes through
//! `Reader::count16`/`count32`, which refuse `n` unless `n * min_elem_bytes <= remaining`,
//! where `min_elem_bytes` is the smallest encoding of one element.
//! - `counts_never_exceed_remaining_bytes` checks that property of the readers for arbitrary
//!   bytes and element sizes, so it also holds on the error paths, where the half-built value
//!   cannot be inspected;
//! - `every_with_capacity_is_fed_by_a_checked_count` reads the decoder sources and fails if a
//!   `with_capacity` appears whose argument is not the result of such a count;
//! - on every successful decode (of arbitrary bytes, mutated frames and generated values),
//!   [`Tally`] walks the decoded value and adds up, for each list, `capacity * min_elem_bytes`
//!   and, for each string, its capacity; it asserts the sum is at most the payload length and
//!   that every non-empty body points into the payload. The elements' minimal encodings and the
//!   string contents are disjoint byte ranges of the payload, so the sum can only exceed the
//!   payload if some list or string was allocated larger than the bytes that describe it.
//!
//! Together: a list holds at most `payload / min_elem_bytes` elements, strings at most the
//! payload, and the payload at most the frame limit. The memory of a decoded value is therefore
//! at most a fixed multiple of the frame limit, the multiple being the largest ratio of an
//! element's in-memory size to its smallest encoding, whatever the counts in the frame say. On
//! 64-bit targets that ratio is 12 (a string in a list, 24 bytes for 2 on the wire; a property,
//! 48 for 4); a batch item is 160 for 37, a topic listing entry 48 for 6.
//! `memory_per_minimal_encoded_byte_is_bounded_for_every_list_element` holds every list element
//! type to it.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use ferry_protocol::wire::Reader;
use ferry_protocol::{
    split_frame, Delivery, ErrorCode, FrameKind, Name, OutgoingMessage, Properties, RawFrame,
    Request, Response, Source, HEADER_LEN,
};
use proptest::prelude::*;

/// Smallest encodings, from the layouts in `docs/protocol.md`: only the fixed-size parts and
/// length prefixes of one element, never its variable-length contents.
mod min {
    /// A string in a list: its u16 length.
    pub const STRING: usize = 2;
    /// A property: name length (2), type tag (1), smallest value (a bool, 1).
    pub const PROPERTY: usize = 4;
    /// A delivery id.
    pub const U64: usize = 8;
    /// A batch item: queue count (2), receiver tag (1), priority (1), context (8), property
    /// count (2), body length (4), time to live (8), delay (8), flags (1), topic length (2).
    pub const OUTGOING: usize = 37;
    /// A `DeliverBatch` entry: two ids (16), receiver tag (1), fixed fields (21), body length
    /// (4), expiry (8).
    pub const BATCH_ENTRY: usize = 50;
    /// A body of a `DeliverRun`: its length (4).
    pub const RUN_BODY: usize = 4;
    /// A queue listing entry: name length (2), ready (8), in flight (8).
    pub const QUEUE_INFO: usize = 18;
    /// A batch result: tag (1) and the smaller of an id (8) and an error's code (2) + text
    /// length (2).
    pub const BATCH_RESULT: usize = 5;
    /// A topic listing entry: name length (2), subscription count (4).
    pub const TOPIC_INFO: usize = 6;
    /// A subscription in a topic listing: name length (2), durable (1), shared (1), selector
    /// length (2), ready (8), in flight (8).
    pub const SUBSCRIPTION_INFO: usize = 22;
}

/// Adds up what a decoded value allocated, against the payload it came from.
struct Tally {
    payload: Range<usize>,
    payload_len: usize,
    accounted: usize,
    /// The names counted so far, by address: messages that share a name share its allocation.
    names: Vec<usize>,
}

impl Tally {
    fn new(payload: &Bytes) -> Self {
        let start = payload.as_ptr() as usize;
        Tally {
            payload: start..start + payload.len(),
            payload_len: payload.len(),
            accounted: 0,
            names: Vec::new(),
        }
    }

    fn list<T>(&mut self, v: &[T], capacity: usize, min_elem: usize) {
        assert!(capacity >= v.len());
        self.accounted += capacity * min_elem;
    }

    fn string(&mut self, s: &String) {
        self.accounted += s.capacity();
    }

    /// A name's text, once per allocation (a decoded batch shares a repeated name).
    fn name(&mut self, n: &Name) {
        let at = n.as_ptr() as usize;
        if !self.names.contains(&at) {
            self.names.push(at);
            self.accounted += n.len();
        }
    }

    fn body(&mut self, b: &Bytes) {
        if b.is_empty() {
            return;
        }
        let start = b.as_ptr() as usize;
        assert!(
            self.payload.contains(&start) && start + b.len() <= self.payload.end,
            "a body was copied instead of sliced from the frame"
        );
    }

    /// Properties, once per allocation (a decoded batch's messages share them).
    fn properties(&mut self, p: &Properties) {
        let at = p.as_ptr() as usize;
        if p.is_empty() || self.names.contains(&at) {
            return;
        }
        self.names.push(at);
        // Decoded into a vector of exactly their count.
        self.list(p, p.len(), min::PROPERTY);
        for (name, value) in p {
            self.string(name);
            if let ferry_protocol::PropertyValue::Str(s) = value {
                self.string(s);
            }
        }
    }

    fn strings(&mut self, v: &Vec<String>) {
        self.list(v, v.capacity(), min::STRING);
        v.iter().for_each(|s| self.string(s));
    }

    fn outgoing(&mut self, m: &OutgoingMessage) {
        self.strings(&m.queues);
        if let Some(r) = &m.receiver {
            self.string(r);
        }
        if let Some(t) = &m.topic {
            self.name(t);
        }
        self.properties(&m.properties);
        self.body(&m.body);
    }

    fn delivery(&mut self, d: &Delivery) {
        let m = &d.message;
        self.name(&m.queue);
        self.name(&m.sender);
        if let Some(r) = &m.receiver {
            self.string(r);
        }
        self.properties(&m.properties);
        self.body(&m.body);
    }

    fn queue_options(&mut self, o: &ferry_protocol::QueueOptions) {
        if let Some(d) = &o.dead_letter_queue {
            self.string(d);
        }
        if let Some(x) = &o.expiry_queue {
            self.string(x);
        }
    }

    fn request(mut self, r: &Request) {
        match r {
            Request::Connect(c) => {
                self.string(&c.client);
                self.string(&c.mechanism);
                self.string(&c.credentials);
            }
            Request::AuthResponse { data } => self.string(data),
            Request::CreateQueue { name, options } => {
                self.string(name);
                self.queue_options(options);
            }
            Request::DeleteQueue { name, .. } => self.string(name),
            Request::Send(m) => self.outgoing(m),
            Request::SendBatch(items) => {
                self.list(items, items.capacity(), min::OUTGOING);
                items.iter().for_each(|m| self.outgoing(m));
            }
            Request::PublishBatch(b) => {
                self.name(&b.topic);
                self.properties(&b.properties);
                // Packed: one slice of the frame for all the bodies, nothing per body.
                self.body(b.bodies.packed());
            }
            Request::Receive(rc) => {
                match &rc.source {
                    Source::Queue(s) | Source::Sender(s) => self.string(s),
                }
                self.string(&rc.selector);
            }
            Request::Ack { ids } | Request::Nack { ids, .. } => {
                self.list(ids, ids.capacity(), min::U64)
            }
            Request::Subscribe(s) => {
                self.string(&s.queue);
                self.string(&s.selector);
            }
            Request::CreateTopic { name } | Request::DeleteTopic { name, .. } => self.string(name),
            Request::SubscribeTopic(s) => {
                self.string(&s.topic);
                self.string(&s.name);
                self.string(&s.options.selector);
                self.queue_options(&s.options.queue);
            }
            Request::Unsubscribe { topic, name } => {
                self.string(topic);
                self.string(name);
            }
            Request::ListTopics | Request::TxnBegin | Request::TxnCommit | Request::TxnRollback => {
            }
            Request::Disconnect
            | Request::Ping
            | Request::ListQueues
            | Request::WaitingQueues
            | Request::Credit { .. }
            | Request::Cancel { .. } => {}
        }
        self.check();
    }

    fn response(mut self, r: &Response) {
        match r {
            Response::Connected(c) => {
                self.string(&c.client);
                self.string(&c.auth);
            }
            Response::AuthChallenge { data } => self.string(data),
            Response::Error(e) | Response::SubscriptionClosed { error: e, .. } => {
                self.string(&e.message)
            }
            Response::Queues(qs) => {
                self.list(qs, qs.capacity(), min::QUEUE_INFO);
                qs.iter().for_each(|q| self.string(&q.name));
            }
            Response::BatchSent(results) => {
                self.list(results, results.capacity(), min::BATCH_RESULT);
                for e in results.iter().filter_map(|r| r.as_ref().err()) {
                    self.string(&e.message);
                }
            }
            Response::Received(Some(d)) | Response::Deliver { delivery: d, .. } => self.delivery(d),
            Response::DeliverBatch { deliveries, .. } | Response::DeliverRun { deliveries, .. } => {
                let min_entry = match r {
                    Response::DeliverRun { .. } => min::RUN_BODY,
                    _ => min::BATCH_ENTRY,
                };
                self.list(deliveries, deliveries.capacity(), min_entry);
                // The batch's properties are on the wire once and copied into each delivery,
                // within a bound of their own (checked here, outside the payload's count).
                let shared = deliveries.first().map(|d| d.message.properties.clone());
                for d in deliveries {
                    let m = &d.message;
                    self.name(&m.queue);
                    self.name(&m.sender);
                    if let Some(r) = &m.receiver {
                        self.string(r);
                    }
                    self.body(&m.body);
                }
                if let Some(p) = shared {
                    self.properties(&p);
                    let wire = ferry_protocol::size::properties_len(&p) - 2;
                    assert!(
                        wire * deliveries.len()
                            <= ferry_protocol::deliver_batch::MAX_REPEATED_PROPERTY_BYTES
                    );
                }
            }
            Response::WaitingQueues(names) => self.strings(names),
            Response::Topics(ts) => {
                self.list(ts, ts.capacity(), min::TOPIC_INFO);
                for t in ts {
                    self.string(&t.name);
                    let subs = &t.subscriptions;
                    self.list(subs, subs.capacity(), min::SUBSCRIPTION_INFO);
                    for sub in subs {
                        self.string(&sub.name);
                        self.string(&sub.selector);
                    }
                }
            }
            Response::TopicSubscribed { queue, .. } => self.string(queue),
            Response::Committed { ids } => self.list(ids, ids.capacity(), min::U64),
            Response::Ok
            | Response::Pong
            | Response::Sent { .. }
            | Response::PublishedRun { .. }
            | Response::Received(None)
            | Response::Subscribed { .. } => {}
        }
        self.check();
    }

    fn check(&self) {
        assert!(
            self.accounted <= self.payload_len,
            "decoded value accounts for {} bytes but its payload has only {}",
            self.accounted,
            self.payload_len
        );
    }
}

/// Decodes a frame both ways; whatever decodes must respect the allocation bound.
fn decode_both(frame: &RawFrame) {
    if let Ok(r) = Request::decode(frame) {
        Tally::new(&frame.payload).request(&r);
    }
    if let Ok(r) = Response::decode(frame) {
        Tally::new(&frame.payload).response(&r);
    }
}

/// Cuts every frame out of `input` with `limit` and decodes each both ways.
fn split_and_decode_all(input: &[u8], limit: u32) {
    let mut buf = BytesMut::from(input);
    loop {
        match split_frame(&mut buf, limit) {
            Ok(Some(frame)) => {
                assert!(frame.payload.len() + HEADER_LEN <= limit as usize);
                decode_both(&frame);
            }
            Ok(None) => {
                // Room is reserved for one announced frame, which is within the limit: the
                // buffer may grow to the frame (or double what it held), never beyond.
                let bound = 2 * input.len().max(limit as usize);
                assert!(
                    buf.capacity() <= bound,
                    "capacity {} > {bound}",
                    buf.capacity()
                );
                return;
            }
            Err(_) => return,
        }
    }
}

/// A frame with the given kind and payload, as it would arrive.
fn frame_bytes(kind: u16, request_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_u32_le((payload.len() + 6) as u32);
    out.put_u16_le(kind);
    out.put_u32_le(request_id);
    out.put_slice(payload);
    out.to_vec()
}

/// A kind number: mostly known ones, so that the decoders get past the kind check.
fn kind() -> impl Strategy<Value = u16> {
    prop_oneof![
        9 => prop::sample::select(FrameKind::ALL.iter().map(|k| k.as_u16()).collect::<Vec<_>>()),
        1 => any::<u16>(),
    ]
}

/// Payload bytes biased towards small numbers, so that counts and lengths are often plausible.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop_oneof![3 => 0u8..4, 1 => any::<u8>()], 0..160)
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Cut(usize),
    Insert(usize, u8),
    Remove(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
    ]
}

/// Applies mutations to the payload of a valid frame (its header kept consistent, so that the
/// decoders, not `split_frame`, see the damage).
fn mutate(payload: &[u8], muts: &[Mutation]) -> Vec<u8> {
    let mut p = payload.to_vec();
    for m in muts {
        let len = p.len();
        match *m {
            Mutation::Set(i, b) if len > 0 => p[i % len] = b,
            Mutation::Cut(i) => p.truncate(i % (len + 1)),
            Mutation::Insert(i, b) => p.insert(i % (len + 1), b),
            Mutation::Remove(i) if len > 0 => {
                p.remove(i % len);
            }
            _ => {}
        }
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..400), limit in 0u32..600) {
        split_and_decode_all(&input, limit);
    }

    #[test]
    fn arbitrary_payloads_of_known_kinds_never_panic(
        frames in prop::collection::vec((kind(), any::<u32>(), payload()), 1..4),
        limit in 0u32..600,
    ) {
        let mut input = Vec::new();
        for (k, id, p) in &frames {
            input.extend(frame_bytes(*k, *id, p));
        }
        split_and_decode_all(&input, limit);
    }

    #[test]
    fn split_never_reserves_beyond_the_limit(
        len in any::<u32>(),
        rest in prop::collection::vec(any::<u8>(), 0..64),
        limit in 0u32..(1 << 16),
    ) {
        let mut input = len.to_le_bytes().to_vec();
        input.extend(rest);
        split_and_decode_all(&input, limit);
    }

    #[test]
    fn mutated_requests_never_panic(req in request(), muts in prop::collection::vec(mutation(), 1..4)) {
        let frame = one_frame(&req_bytes(&req, 1));
        let payload = mutate(&frame.payload, &muts);
        split_and_decode_all(&frame_bytes(frame.kind, 1, &payload), LIMIT);
    }

    #[test]
    fn mutated_responses_never_panic(resp in response(), muts in prop::collection::vec(mutation(), 1..4)) {
        let frame = one_frame(&resp_bytes(&resp, 1));
        let payload = mutate(&frame.payload, &muts);
        split_and_decode_all(&frame_bytes(frame.kind, 1, &payload), LIMIT);
    }

    #[test]
    fn counts_never_exceed_remaining_bytes(
        input in prop::collection::vec(any::<u8>(), 0..300),
        min_elem in 0usize..40,
    ) {
        let bytes = Bytes::from(input);
        let mut r = Reader::new(&bytes);
        if let Ok(n) = r.count16("x", min_elem) {
            prop_assert!(n * min_elem.max(1) <= r.remaining());
        }
        let mut r = Reader::new(&bytes);
        if let Ok(n) = r.count32("x", min_elem) {
            prop_assert!(n * min_elem.max(1) <= r.remaining());
        }
    }

    #[test]
    fn outgoing_encoded_len_is_exact(m in outgoing()) {
        let mut out = BytesMut::new();
        ferry_protocol::requests::put_outgoing(&mut out, &m);
        prop_assert_eq!(ferry_protocol::requests::outgoing_encoded_len(&m), out.len());
    }

    #[test]
    fn encoded_len_is_exact_for_generated_frames(req in request(), resp in response()) {
        prop_assert_eq!(req.encoded_len(), req_bytes(&req, 1).len());
        prop_assert_eq!(resp.encoded_len(), resp_bytes(&resp, 1).len());
        if let Response::Deliver { subscription, delivery } = &resp {
            let mut out = BytesMut::new();
            ferry_protocol::encode_deliver(&mut out, *subscription, &delivery.view());
            prop_assert_eq!(ferry_protocol::deliver_encoded_len(&delivery.view()), out.len());
        }
    }

    #[test]
    fn generated_requests_roundtrip(req in request(), id in any::<u32>()) {
        let frame = one_frame(&req_bytes(&req, id));
        prop_assert_eq!(frame.request_id, id);
        let decoded = Request::decode(&frame).unwrap();
        Tally::new(&frame.payload).request(&decoded);
        prop_assert_eq!(decoded, req);
    }

    #[test]
    fn generated_responses_roundtrip(resp in response(), id in any::<u32>()) {
        let frame = one_frame(&resp_bytes(&resp, id));
        prop_assert_eq!(frame.request_id, id);
        let decoded = Response::decode(&frame).unwrap();
        Tally::new(&frame.payload).response(&decoded);
        prop_assert_eq!(decoded, resp);
    }

    #[test]
    fn streams_of_generated_frames_split_at_any_chunking(
        reqs in prop::collection::vec(request(), 1..6),
        chunk in 1usize..40,
    ) {
        // Bytes arrive in arbitrary pieces, as from a socket.
        let mut all = BytesMut::new();
        for (i, r) in reqs.iter().enumerate() {
            r.encode(i as u32, &mut all);
        }
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in all.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(f) = split_frame(&mut buf, LIMIT).unwrap() {
                out.push(Request::decode(&f).unwrap());
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(out, reqs);
    }
}

/// A `PublishBatch` to 't', priority 5, persistent, up to its body count, which follows.
const PUBLISH_BATCH_HEAD: &str =
    "01 00 74 | 05 | 00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 | 00 00";
/// [`PUBLISH_BATCH_HEAD`] with a count of 4 billion and no bodies.
const PUBLISH_BATCH_HEAD_NO_COUNT: &str =
    "01 00 74 | 05 | 00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 | 00 00 | ff ff ff ff";

/// Decodes a `PublishBatch` payload.
fn publish_batch(payload: Vec<u8>) -> Result<Request, ferry_protocol::WireError> {
    Request::decode(&RawFrame {
        kind: FrameKind::PublishBatch.as_u16(),
        request_id: 1,
        payload: Bytes::from(payload),
    })
}

#[test]
fn a_publish_batch_of_no_bodies_or_too_many_is_refused() {
    let invalid = |r: Result<Request, ferry_protocol::WireError>, what: &str| match r {
        Err(ferry_protocol::WireError::InvalidValue { field, .. }) => {
            assert!(field.contains(what), "{field}")
        }
        other => panic!("{what}: {other:?}"),
    };
    // Count 0.
    let mut p = hex(PUBLISH_BATCH_HEAD);
    p.extend_from_slice(&0u32.to_le_bytes());
    invalid(publish_batch(p), "body count");
    // One more than the cap, every body empty: the bytes are there, the count is refused.
    let n = ferry_protocol::publish_batch::MAX_PUBLISH_BATCH_BODIES + 1;
    let mut p = hex(PUBLISH_BATCH_HEAD);
    p.extend_from_slice(&(n as u32).to_le_bytes());
    p.resize(p.len() + 4 * n, 0);
    invalid(publish_batch(p.clone()), "body count");
    // At the cap it decodes, into no more than the cap's handles.
    let at_cap = n - 1;
    p.truncate(p.len() - 4);
    let count_at = hex(PUBLISH_BATCH_HEAD).len();
    p[count_at..count_at + 4].copy_from_slice(&(at_cap as u32).to_le_bytes());
    let Request::PublishBatch(b) = publish_batch(p).unwrap() else {
        panic!("not a publish batch")
    };
    assert_eq!(b.bodies.len(), at_cap);
    // Properties that every message copies: 1,000 bodies of a 100-byte string property are
    // 100 KB decoded from a 4 KB frame, beyond the 64 KiB allowed.
    let mut p = hex(
        "01 00 74 | 05 | 00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 | 01 00 | 01 00 70 | 03",
    );
    p.extend_from_slice(&96u16.to_le_bytes());
    p.resize(p.len() + 96, b'x');
    p.extend_from_slice(&1000u32.to_le_bytes());
    p.resize(p.len() + 4 * 1000, 0);
    invalid(publish_batch(p.clone()), "repeated per body");
    // The same with 600 bodies (60 KB) decodes.
    let count_at = p.len() - 4 * 1000 - 4;
    p[count_at..count_at + 4].copy_from_slice(&600u32.to_le_bytes());
    p.truncate(count_at + 4 + 4 * 600);
    assert!(publish_batch(p).is_ok());
    // Flags other than non-persistent.
    let mut p = hex(PUBLISH_BATCH_HEAD);
    p[3 + 17] = 0x02;
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    invalid(publish_batch(p), "message flags");
}

#[test]
fn hostile_counts_are_refused_before_allocating() {
    // A batch announcing 4 billion items in a 4-byte payload, and the same for every counted
    // list: refused as CountTooLarge, not attempted.
    let cases: &[(u16, &str)] = &[
        (0x0021, "ff ff ff ff"),    // SendBatch items
        (0x0031, "ff ff ff ff"),    // Ack ids
        (0x0032, "ff ff ff ff 00"), // Nack ids
        (0x0020, "ff ff"),          // Send queues
        (0x0020, "00 00 | 00 | 05 | 00 00 00 00 00 00 00 00 | ff ff"), // Send properties
        (0x0022, PUBLISH_BATCH_HEAD_NO_COUNT), // PublishBatch bodies
    ];
    for (kind, payload) in cases {
        let frame = RawFrame {
            kind: *kind,
            request_id: 1,
            payload: Bytes::from(hex(payload)),
        };
        let err = Request::decode(&frame).unwrap_err();
        assert!(
            matches!(err, ferry_protocol::WireError::CountTooLarge { .. }),
            "{kind:#06x}: {err:?}"
        );
    }
    let cases: &[(u16, &str)] = &[
        (0x8012, "ff ff ff ff"),                          // Queues
        (0x8021, "ff ff ff ff"),                          // BatchSent
        (0x8033, "ff ff"),                                // WaitingQueues
        (0x8052, "ff ff ff ff"),                          // Topics
        (0x8052, "01 00 00 00 | 01 00 74 | ff ff ff ff"), // a topic's subscriptions
        (0x8061, "ff ff ff ff"),                          // Committed ids
    ];
    for (kind, payload) in cases {
        let frame = RawFrame {
            kind: *kind,
            request_id: 1,
            payload: Bytes::from(hex(payload)),
        };
        let err = Response::decode(&frame).unwrap_err();
        assert!(
            matches!(err, ferry_protocol::WireError::CountTooLarge { .. }),
            "{kind:#06x}: {err:?}"
        );
    }
}

#[test]
fn a_body_length_beyond_the_payload_is_truncated_not_allocated() {
    // Send with a body announcing 4 GiB.
    let payload = hex("00 00 | 00 | 05 | 00 00 00 00 00 00 00 00 | 00 00 | ff ff ff ff | 01 02");
    let frame = RawFrame {
        kind: 0x0020,
        request_id: 1,
        payload: Bytes::from(payload),
    };
    assert!(matches!(
        Request::decode(&frame),
        Err(ferry_protocol::WireError::Truncated { .. })
    ));
}

#[test]
fn every_with_capacity_is_fed_by_a_checked_count() {
    // Structural guard for the argument at the top of this file: in the decoder sources, each
    // `with_capacity(x)` must be preceded (within three lines) by `let x = ...count16(` or
    // `...count32(`.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(pos) = line.find("with_capacity(") else {
                continue;
            };
            seen += 1;
            let arg: String = line[pos + "with_capacity(".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let binding = format!("let {arg} = ");
            let fed = lines[i.saturating_sub(3)..i].iter().any(|l| {
                l.contains(&binding) && (l.contains(".count16(") || l.contains(".count32("))
            });
            assert!(
                fed,
                "{}:{}: `{}` is not fed by a checked count",
                path.display(),
                i + 1,
                line.trim()
            );
        }
    }
    assert!(
        seen >= 6,
        "expected the list decoders' with_capacity calls, saw {seen}"
    );
}

#[test]
fn a_full_frame_of_smallest_elements_stays_within_the_bound() {
    // The most elements a frame can carry: a batch of empty messages filling 64 KiB (each one
    // exactly min::OUTGOING bytes, so the bound is met with equality).
    let n = (64 * 1024 - 4) / min::OUTGOING;
    let req = Request::SendBatch(vec![
        OutgoingMessage {
            queues: vec![],
            topic: None,
            persistent: true,
            receiver: None,
            priority: 0,
            context: 0,
            properties: vec![].into(),
            body: Bytes::new(),
            ttl_ms: 0,
            delay_ms: 0,
        };
        n
    ]);
    let bytes = req_bytes(&req, 1);
    assert_eq!(bytes.len(), HEADER_LEN + 4 + n * min::OUTGOING);
    assert!(bytes.len() <= 64 * 1024 + HEADER_LEN);
    let frame = one_frame(&bytes);
    let decoded = Request::decode(&frame).unwrap();
    Tally::new(&frame.payload).request(&decoded);
    assert_eq!(decoded, req);
    // And for the error codes too: one BatchSent of minimal errors.
    let resp = Response::BatchSent(vec![
        Err(ferry_protocol::ErrorReply::new(
            ErrorCode::Internal,
            ""
        ));
        1000
    ]);
    let frame = one_frame(&resp_bytes(&resp, 1));
    let decoded = Response::decode(&frame).unwrap();
    Tally::new(&frame.payload).response(&decoded);
    // And a topic listing of empty-named topics with minimal subscriptions.
    let sub = ferry_protocol::SubscriptionInfo {
        name: String::new(),
        durable: false,
        shared: false,
        selector: String::new(),
        ready: 0,
        in_flight: 0,
    };
    let resp = Response::Topics(vec![
        ferry_protocol::TopicInfo {
            name: String::new(),
            subscriptions: vec![sub; 3],
        };
        500
    ]);
    let bytes = resp_bytes(&resp, 1);
    assert_eq!(
        bytes.len(),
        HEADER_LEN + 4 + 500 * (min::TOPIC_INFO + 3 * min::SUBSCRIPTION_INFO)
    );
    let frame = one_frame(&bytes);
    let decoded = Response::decode(&frame).unwrap();
    Tally::new(&frame.payload).response(&decoded);
    assert_eq!(decoded, resp);
}

#[test]
fn memory_per_minimal_encoded_byte_is_bounded_for_every_list_element() {
    // The multiple of the frame limit that a decoded value may occupy (see the top of this
    // file): for each list element type, its in-memory size over its smallest encoding.
    use std::mem::size_of;
    let ratios = [
        ("string", size_of::<String>(), min::STRING),
        (
            "property",
            size_of::<(String, ferry_protocol::PropertyValue)>(),
            min::PROPERTY,
        ),
        ("id", size_of::<u64>(), min::U64),
        ("batch item", size_of::<OutgoingMessage>(), min::OUTGOING),
        ("batched delivery", size_of::<Delivery>(), min::BATCH_ENTRY),
        (
            "queue info",
            size_of::<ferry_protocol::QueueInfo>(),
            min::QUEUE_INFO,
        ),
        (
            "batch result",
            size_of::<Result<u64, ferry_protocol::ErrorReply>>(),
            min::BATCH_RESULT,
        ),
        (
            "topic info",
            size_of::<ferry_protocol::TopicInfo>(),
            min::TOPIC_INFO,
        ),
        (
            "subscription info",
            size_of::<ferry_protocol::SubscriptionInfo>(),
            min::SUBSCRIPTION_INFO,
        ),
    ];
    for (what, size, min) in ratios {
        assert!(
            size <= 12 * min,
            "{what}: {size} bytes in memory for {min} encoded"
        );
    }
    // A run's body may be empty (4 bytes) while its delivery takes far more: its count is
    // capped instead, so that a run frame decodes into no more than 12 times a 64 KiB frame
    // (the most a batch or run frame grows to).
    let run = ferry_protocol::deliver_run::MAX_RUN_DELIVERIES * size_of::<Delivery>();
    assert!(run <= 12 * 64 * 1024, "a full run decodes into {run} bytes");
}
