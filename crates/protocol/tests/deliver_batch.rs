//! The `DeliverBatch` writer and readers: what a broker writes for a run of deliveries decodes
//! to exactly those deliveries, in order, whatever frames it cut them into; frames stay
//! within their limits; malformed batches are refused with a precise error.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use bytes::{Bytes, BytesMut};
use common::pushes::{decode_all, flatten, record};
use common::*;
use ferry_protocol::batch_writer::DeliverBatchWriter;
use ferry_protocol::deliver_batch::{
    put_deliver_batch, MAX_BATCH_FRAME_BYTES, MAX_REPEATED_PROPERTY_BYTES,
};
use ferry_protocol::packed::PackedBodies;
use ferry_protocol::{
    split_frame, Delivery, FrameKind, PropertyValue, RawFrame, Response, WireError,
};

/// What `deliveries`, each on its subscription, become through the writer with frame limit `limit`.
fn write(deliveries: &[(u64, Delivery)], limit: u32) -> BytesMut {
    let mut w = DeliverBatchWriter::new(limit);
    let mut out = BytesMut::new();
    for (sub, d) in deliveries {
        w.push(&mut out, *sub, &d.view());
    }
    w.finish(&mut out);
    out
}

#[test]
fn a_run_of_alike_deliveries_is_one_frame_that_decodes_to_them_in_order_byte_exact() {
    let run: Vec<_> = (1..=200).map(|i| (3, record(i))).collect();
    let out = write(&run, 1 << 20);
    let frames = decode_all(out.clone());
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].0, FrameKind::DeliverBatch);
    assert_eq!(flatten(frames), run);
    // The names and the property are written once: each further record adds only its fields.
    let one = write(&run[..1], 1 << 20).len();
    let per_record = (out.len() - one) / 199;
    assert_eq!(per_record, 16 + 1 + 21 + 4 + 150 + 8);
}

#[test]
fn the_writer_writes_what_the_response_encoder_writes() {
    let run: Vec<_> = (1..=5).map(|i| (9, record(i))).collect();
    let written = write(&run, 1 << 20);
    let deliveries: Vec<_> = run.iter().map(|(_, d)| d.clone()).collect();
    let mut encoded = BytesMut::new();
    Response::DeliverBatch {
        subscription: 9,
        deliveries: deliveries.clone(),
    }
    .encode(0, &mut encoded);
    assert_eq!(written, encoded);
    let mut payload = BytesMut::new();
    put_deliver_batch(&mut payload, 9, &deliveries);
    assert_eq!(&written[10..], &payload[..]);
}

#[test]
fn a_change_of_subscription_queue_sender_or_properties_starts_a_new_frame() {
    let base = record(1);
    let mut other_queue = record(2);
    other_queue.message.queue = "t:other".into();
    let mut other_sender = record(3);
    other_sender.message.sender = "someone".into();
    let mut other_properties = record(4);
    other_properties.message.properties = vec![].into();
    let mut addressed = record(5);
    addressed.message.receiver = Some("me".into());
    addressed.delivery_id = 77;
    let run = vec![
        (1, base.clone()),
        (2, base.clone()),
        (2, other_queue),
        (2, other_sender),
        (2, other_properties),
        // A receiver and a delivery id are the delivery's own: no new frame for them.
        (2, addressed),
        (2, record(6)),
    ];
    let frames = decode_all(write(&run, 1 << 20));
    let sizes: Vec<usize> = frames.iter().map(|f| f.2.len()).collect();
    assert_eq!(sizes, [1, 1, 1, 1, 1, 2]);
    assert!(frames.iter().all(|f| f.0 == FrameKind::DeliverBatch));
    assert_eq!(flatten(frames), run);
}

#[test]
fn frames_stay_within_the_limit_and_a_delivery_too_large_for_a_batch_goes_as_deliver() {
    let limit = 4096u32;
    let mut big = record(50);
    big.message.body = Bytes::from(vec![7u8; 5000]);
    let mut run: Vec<_> = (1..50).map(|i| (1, record(i))).collect();
    run.push((1, big));
    run.extend((51..60).map(|i| (1, record(i))));
    let out = write(&run, limit);
    let mut cut = out.clone();
    while let Some(f) = split_frame(&mut cut, u32::MAX).unwrap() {
        if f.kind == FrameKind::DeliverBatch as u16 {
            assert!(f.payload.len() + 10 <= limit as usize);
        }
    }
    let frames = decode_all(out);
    let kinds: Vec<FrameKind> = frames.iter().map(|f| f.0).collect();
    assert!(kinds.len() > 3, "{kinds:?}");
    let big_at = frames
        .iter()
        .position(|f| f.0 == FrameKind::Deliver)
        .unwrap();
    assert_eq!(frames[big_at].2[0].message.id, 50);
    assert_eq!(flatten(frames), run);
    // The default bound holds with a larger limit too.
    let many: Vec<_> = (1..2000).map(|i| (1, record(i))).collect();
    let mut out = write(&many, u32::MAX);
    while let Some(f) = split_frame(&mut out, u32::MAX).unwrap() {
        assert!(f.payload.len() + 10 <= MAX_BATCH_FRAME_BYTES);
    }
}

#[test]
fn the_writer_bounds_the_properties_repeated_over_a_batch() {
    // 1,000 bytes of properties: at most 65 deliveries share them in one frame.
    let mut d = record(1);
    d.message.body = Bytes::new();
    d.message.properties = vec![("p".into(), PropertyValue::Str("x".repeat(994)))].into();
    let run: Vec<_> = (0..200).map(|_| (1, d.clone())).collect();
    let frames = decode_all(write(&run, u32::MAX));
    assert!(frames
        .iter()
        .all(|f| f.2.len() * 1000 <= MAX_REPEATED_PROPERTY_BYTES));
    assert_eq!(flatten(frames), run);
}

/// A `DeliverBatch` frame with `payload`.
fn batch_frame(payload: Vec<u8>) -> RawFrame {
    RawFrame {
        kind: FrameKind::DeliverBatch as u16,
        request_id: 0,
        payload: Bytes::from(payload),
    }
}

/// The head of a batch on subscription 1, queue 'q', sender 's', with `properties` (encoded)
/// and `count`.
fn head(properties: &[u8], count: u32) -> Vec<u8> {
    let mut p = hex("01 00 00 00 00 00 00 00 | 01 00 71 | 01 00 73");
    p.extend_from_slice(properties);
    p.extend_from_slice(&count.to_le_bytes());
    p
}

/// One entry: ids, no receiver, fixed fields, body 'a', no expiry.
fn entry() -> Vec<u8> {
    let mut e = vec![0u8; 16 + 1 + 21];
    e.extend_from_slice(&hex("01 00 00 00 | 61"));
    e.extend_from_slice(&[0u8; 8]);
    e
}

#[test]
fn a_batch_of_no_deliveries_is_refused() {
    let mut p = head(&hex("00 00"), 0);
    p.extend(entry());
    assert_eq!(
        Response::decode(&batch_frame(p)),
        Err(WireError::InvalidValue {
            field: "delivery count of a batch",
            value: 0
        })
    );
}

#[test]
fn a_count_beyond_the_bytes_present_is_refused_before_anything_is_allocated() {
    let mut p = head(&hex("00 00"), 1_000_000);
    p.extend(entry());
    assert!(matches!(
        Response::decode(&batch_frame(p)),
        Err(WireError::CountTooLarge {
            field: "deliveries",
            count: 1_000_000,
            ..
        })
    ));
}

#[test]
fn properties_that_would_repeat_beyond_the_bound_are_refused() {
    // A property of 1,000 bytes on the wire (name 'p', a string of 994), over 66 entries.
    let mut props = hex("01 00 | 01 00 70 | 03");
    props.extend_from_slice(&994u16.to_le_bytes());
    props.extend(std::iter::repeat_n(b'x', 994));
    let mut p = head(&props, 66);
    for _ in 0..66 {
        p.extend(entry());
    }
    assert_eq!(
        Response::decode(&batch_frame(p.clone())),
        Err(WireError::InvalidValue {
            field: "bytes of a batch's properties repeated per delivery",
            value: 66_000
        })
    );
    // 65 of them are within it.
    let mut p = head(&props, 65);
    for _ in 0..65 {
        p.extend(entry());
    }
    let Response::DeliverBatch { deliveries, .. } = Response::decode(&batch_frame(p)).unwrap()
    else {
        panic!("not a batch")
    };
    assert_eq!(deliveries.len(), 65);
}

#[test]
fn fewer_entries_than_counted_or_bytes_after_the_last_are_refused() {
    let mut p = head(&hex("00 00"), 2);
    p.extend(entry());
    // Two counted, one there (and not enough bytes for a second).
    assert!(matches!(
        Response::decode(&batch_frame(p)),
        Err(WireError::CountTooLarge { .. } | WireError::Truncated { .. })
    ));
    let mut p = head(&hex("00 00"), 1);
    p.extend(entry());
    p.push(0);
    assert_eq!(
        Response::decode(&batch_frame(p)),
        Err(WireError::TrailingBytes(1))
    );
}

#[test]
fn a_batch_decodes_into_deliveries_sharing_one_copy_of_its_properties() {
    let deliveries: Vec<(u64, Delivery)> = (1..=50).map(|id| (9, record(id))).collect();
    let frames = decode_all(write(&deliveries, u32::MAX));
    assert_eq!(frames.len(), 1, "one frame");
    let got = &frames[0].2;
    assert_eq!(got.len(), 50);
    for (d, (_, want)) in got.iter().zip(&deliveries) {
        assert_eq!(d, want, "each delivery reads its properties");
        assert!(
            d.message.properties.ptr_eq(&got[0].message.properties),
            "one allocation for the batch, not one per delivery"
        );
    }
}

/// A run of `bodies` written with `push_run` after `before` (pushed one by one), and the same
/// deliveries all pushed one by one: both buffers.
fn run_both_ways(
    before: &[(u64, Delivery)],
    template: &Delivery,
    bodies: &[Bytes],
    limit: u32,
) -> (BytesMut, BytesMut) {
    let mut w = DeliverBatchWriter::new(limit);
    let mut by_run = BytesMut::new();
    for (sub, d) in before {
        w.push(&mut by_run, *sub, &d.view());
    }
    w.push_run(
        &mut by_run,
        1,
        &template.view(),
        500,
        &PackedBodies::pack(bodies),
    );
    w.finish(&mut by_run);
    let mut each: Vec<(u64, Delivery)> = before.to_vec();
    for (id, body) in (500..).zip(bodies) {
        let mut d = template.clone();
        d.message.id = id;
        d.message.body = body.clone();
        each.push((1, d));
    }
    (by_run, write(&each, limit))
}

/// A case of a run: its name, the deliveries before it, its bodies, the frame limit.
type RunCase<'a> = (&'a str, Vec<(u64, Delivery)>, &'a [Bytes], u32);

#[test]
fn a_run_of_bodies_is_written_byte_for_byte_as_its_deliveries_one_by_one() {
    let template = record(7);
    let bodies: Vec<Bytes> = (0..300u32)
        .map(|i| Bytes::from(vec![i as u8; 100 + (i as usize % 90)]))
        .collect();
    let mut big = bodies.clone();
    big[150] = Bytes::from(vec![9u8; 5000]);
    let mut other_fields = record(1);
    other_fields.message.sender = "someone else".into();
    let cases: Vec<RunCase> = vec![
        ("alone, one frame", vec![], &bodies, u32::MAX),
        (
            "after a frame of other fields",
            vec![(1, other_fields)],
            &bodies,
            u32::MAX,
        ),
        (
            "after one of another subscription",
            vec![(2, record(2))],
            &bodies,
            u32::MAX,
        ),
        (
            "continuing a frame of the same fields",
            vec![(1, template.clone())],
            &bodies,
            u32::MAX,
        ),
        ("cut into frames by the limit", vec![], &bodies, 4096),
        ("with a body too large for a batch", vec![], &big, 4096),
    ];
    for (case, before, bodies, limit) in cases {
        let (by_run, each) = run_both_ways(&before, &template, bodies, limit);
        assert_eq!(by_run, each, "{case}");
        let delivered = flatten(decode_all(by_run));
        assert_eq!(delivered.len(), before.len() + bodies.len(), "{case}");
        assert_eq!(
            delivered.last().unwrap().1.message.id,
            500 + bodies.len() as u64 - 1
        );
    }
}

#[test]
fn a_run_keeps_to_the_bound_on_repeated_properties() {
    let mut template = record(1);
    template.message.properties = vec![("p".into(), PropertyValue::Str("x".repeat(994)))].into();
    let bodies: Vec<Bytes> = (0..200).map(|_| Bytes::new()).collect();
    let (by_run, each) = run_both_ways(&[], &template, &bodies, u32::MAX);
    assert_eq!(by_run, each);
    let frames = decode_all(by_run);
    assert!(frames
        .iter()
        .all(|f| f.2.len() * 1000 <= MAX_REPEATED_PROPERTY_BYTES));
}
