//! The `DeliverRun` push: a publish run written for a version 7 receiver decodes to exactly
//! the deliveries a `DeliverBatch` writer would have sent, in order, in fewer bytes; frames
//! keep their bounds; runs that settle something still go out as batches; malformed runs are
//! refused with a precise error. And the `PublishedRun` reply: a malformed one is refused.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::pushes::{decode_all, flatten, record};
use ferry_protocol::batch_writer::DeliverBatchWriter;
use ferry_protocol::deliver_batch::{MAX_BATCH_FRAME_BYTES, MAX_REPEATED_PROPERTY_BYTES};
use ferry_protocol::deliver_run::{is_run, MAX_RUN_DELIVERIES};
use ferry_protocol::packed::PackedBodies;
use ferry_protocol::{Delivery, FrameKind, PropertyValue, RawFrame, Response, WireError};

/// `bodies` as a run of `template`'s fields from id 500 on, after `before` (pushed one by
/// one), on subscription 1, through a writer with or without runs.
fn written(
    runs: bool,
    before: &[(u64, Delivery)],
    template: &Delivery,
    bodies: &[Bytes],
    limit: u32,
) -> BytesMut {
    let w = DeliverBatchWriter::new(limit);
    let mut w = if runs { w.with_runs() } else { w };
    let mut out = BytesMut::new();
    for (sub, d) in before {
        w.push(&mut out, *sub, &d.view());
    }
    w.push_run(
        &mut out,
        1,
        &template.view(),
        500,
        &PackedBodies::pack(bodies),
    );
    w.finish(&mut out);
    out
}

/// Bodies of 100 to 189 bytes, one of them (at 150) too large for a frame of 4 KiB.
fn bodies() -> (Vec<Bytes>, Vec<Bytes>) {
    let bodies: Vec<Bytes> = (0..300u32)
        .map(|i| Bytes::from(vec![i as u8; 100 + (i as usize % 90)]))
        .collect();
    let mut big = bodies.clone();
    big[150] = Bytes::from(vec![9u8; 5000]);
    (bodies, big)
}

#[test]
fn a_run_decodes_to_what_a_batch_writer_sends_in_fewer_bytes() {
    let template = record(7);
    let (bodies, big) = bodies();
    let mut other = record(1);
    other.message.sender = "someone else".into();
    let cases = [
        ("alone, one frame", vec![], &bodies, u32::MAX),
        (
            "after an open batch of other fields",
            vec![(1, other)],
            &bodies,
            u32::MAX,
        ),
        (
            "after an open batch of the same fields",
            vec![(1, template.clone())],
            &bodies,
            u32::MAX,
        ),
        ("cut into frames by the limit", vec![], &bodies, 4096),
        ("with a body too large for a frame", vec![], &big, 4096),
    ];
    for (case, before, bodies, limit) in cases {
        let runs = written(true, &before, &template, bodies, limit);
        let batches = written(false, &before, &template, bodies, limit);
        assert!(
            runs.len() + 40 * bodies.len() < batches.len(),
            "{case}: {} bytes as runs, {} as batches",
            runs.len(),
            batches.len()
        );
        let frames = decode_all(runs);
        assert!(
            frames.iter().any(|f| f.0 == FrameKind::DeliverRun),
            "{case}"
        );
        for (_, _, ds) in frames.iter().filter(|f| f.0 == FrameKind::DeliverRun) {
            let bytes: usize = ds.iter().map(|d| d.message.body.len() + 4).sum();
            assert!(
                bytes <= limit as usize && bytes <= MAX_BATCH_FRAME_BYTES,
                "{case}"
            );
            assert!(is_run(ds), "{case}");
        }
        assert_eq!(flatten(frames), flatten(decode_all(batches)), "{case}");
    }
    // The body too large for a frame went out as a `Deliver` of its own.
    let frames = decode_all(written(true, &[], &template, &big, 4096));
    let alone: Vec<_> = frames
        .iter()
        .filter(|f| f.0 == FrameKind::Deliver)
        .collect();
    assert_eq!(alone.len(), 1);
    assert_eq!(alone[0].2[0].message.id, 650);
}

#[test]
fn a_record_of_a_run_takes_its_body_and_length_only() {
    let template = record(7);
    let one = written(
        true,
        &[],
        &template,
        &[Bytes::from(vec![1u8; 150])],
        u32::MAX,
    );
    let many = written(
        true,
        &[],
        &template,
        &vec![Bytes::from(vec![1u8; 150]); 201],
        u32::MAX,
    );
    assert_eq!((many.len() - one.len()) / 200, 4 + 150);
}

#[test]
fn a_run_that_settles_something_goes_out_as_batches() {
    let mut template = record(7);
    template.delivery_id = 42;
    let (bodies, _) = bodies();
    let frames = decode_all(written(true, &[], &template, &bodies, u32::MAX));
    assert!(frames.iter().all(|f| f.0 == FrameKind::DeliverBatch));
}

#[test]
fn a_run_frame_keeps_to_its_count_and_property_bounds() {
    let template = record(7);
    let empty = vec![Bytes::new(); 2500];
    let frames = decode_all(written(true, &[], &template, &empty, u32::MAX));
    let counts: Vec<usize> = frames.iter().map(|f| f.2.len()).collect();
    assert_eq!(counts, [MAX_RUN_DELIVERIES, MAX_RUN_DELIVERIES, 452]);

    let mut heavy = record(7);
    heavy.message.properties = vec![("p".into(), PropertyValue::Str("x".repeat(994)))].into();
    let frames = decode_all(written(true, &[], &heavy, &empty[..200], u32::MAX));
    assert!(frames.len() > 1);
    assert!(frames
        .iter()
        .all(|f| f.0 == FrameKind::DeliverRun && f.2.len() * 1000 <= MAX_REPEATED_PROPERTY_BYTES));
    assert_eq!(flatten(frames).len(), 200);
}

/// A `DeliverRun` payload: record 7's fields, first id `first`, `count`, then `bodies`.
fn run_payload(first: u64, count: u32, bodies: &[&[u8]]) -> Vec<u8> {
    let d = record(7);
    let mut out = BytesMut::new();
    Response::DeliverRun {
        subscription: 3,
        deliveries: vec![d],
    }
    .encode(0, &mut out);
    // Keep the head up to the first id (header, and the one body with its length, cut).
    let head_end = out.len() - 4 - 150 - 4 - 8;
    let mut p = out[ferry_protocol::HEADER_LEN..head_end].to_vec();
    p.put_u64_le(first);
    p.put_u32_le(count);
    for b in bodies {
        p.put_u32_le(b.len() as u32);
        p.extend_from_slice(b);
    }
    p
}

fn run_frame(payload: Vec<u8>) -> RawFrame {
    RawFrame {
        kind: FrameKind::DeliverRun.as_u16(),
        request_id: 0,
        payload: Bytes::from(payload),
    }
}

#[test]
fn malformed_runs_are_refused_precisely() {
    // Well formed, as a control.
    let ok = Response::decode(&run_frame(run_payload(5, 2, &[b"a", b"bc"]))).unwrap();
    let Response::DeliverRun { deliveries, .. } = ok else {
        panic!("a run")
    };
    let ids: Vec<u64> = deliveries.iter().map(|d| d.message.id).collect();
    assert_eq!(ids, [5, 6]);
    assert!(deliveries.iter().all(|d| d.delivery_id == 0));

    let count_of = |value: u64| WireError::InvalidValue {
        field: "delivery count of a run",
        value,
    };
    assert_eq!(
        Response::decode(&run_frame(run_payload(5, 0, &[b"a"]))),
        Err(count_of(0))
    );
    let many = vec![&b""[..]; MAX_RUN_DELIVERIES + 1];
    assert_eq!(
        Response::decode(&run_frame(run_payload(5, many.len() as u32, &many))),
        Err(count_of(MAX_RUN_DELIVERIES as u64 + 1))
    );
    assert_eq!(
        Response::decode(&run_frame(run_payload(u64::MAX, 2, &[b"a", b"b"]))),
        Err(WireError::InvalidValue {
            field: "first message id of a run",
            value: u64::MAX
        })
    );
    assert!(matches!(
        Response::decode(&run_frame(run_payload(5, 1_000_000, &[b"a"]))),
        Err(WireError::CountTooLarge {
            field: "deliveries",
            count: 1_000_000,
            ..
        })
    ));
    // A body cut short, and a byte after the last body.
    let mut cut = run_payload(5, 2, &[b"a", b"bc"]);
    cut.pop();
    assert!(Response::decode(&run_frame(cut)).is_err());
    let mut extra = run_payload(5, 2, &[b"a", b"bc"]);
    extra.push(0);
    assert!(Response::decode(&run_frame(extra)).is_err());
}

#[test]
fn a_published_run_of_no_bodies_or_past_the_last_id_is_refused() {
    let reply = |first: u64, count: u32| {
        let mut p = first.to_le_bytes().to_vec();
        p.put_u32_le(count);
        Response::decode(&RawFrame {
            kind: FrameKind::PublishedRun.as_u16(),
            request_id: 1,
            payload: Bytes::from(p),
        })
    };
    assert_eq!(
        reply(9, 3),
        Ok(Response::PublishedRun {
            first_id: 9,
            count: 3
        })
    );
    assert_eq!(reply(u64::MAX, 1).unwrap().kind(), FrameKind::PublishedRun);
    for (first, count) in [(9, 0), (u64::MAX, 2)] {
        assert_eq!(
            reply(first, count),
            Err(WireError::InvalidValue {
                field: "published run",
                value: u64::from(count)
            }),
            "{first} {count}"
        );
    }
}

#[test]
fn a_shared_run_is_the_bytes_of_a_copied_one_with_large_bodies_as_slices_of_their_own() {
    use ferry_protocol::batch_writer::SHARE_AT_LEAST;
    let template = record(7);
    let (bodies, big) = bodies();
    let mut other = record(1);
    other.message.sender = "someone else".into();
    // Frames of up to 64 KiB (bodies of ~40 KiB: shared), of 4 KiB (never shared), and a run
    // with a body too large for its frames, after a delivery of other fields.
    for (limit, bodies) in [(u32::MAX, &bodies), (4096, &bodies), (u32::MAX, &big)] {
        let packed = PackedBodies::pack(bodies);
        let copied = written(true, &[(1, other.clone())], &template, bodies, limit);
        let mut w = DeliverBatchWriter::new(limit).with_runs();
        let mut out = BytesMut::new();
        let mut pieces = Vec::new();
        w.push(&mut out, 1, &other.view());
        w.push_run_sharing(&mut out, 1, &template.view(), 500, &packed, &mut pieces);
        w.finish(&mut out);
        let joined: Vec<u8> = pieces
            .iter()
            .flat_map(|p| p.to_vec())
            .chain(out.to_vec())
            .collect();
        assert_eq!(joined, copied.to_vec(), "limit {limit}");
        let range = packed.packed().as_ptr_range();
        let shared: Vec<&Bytes> = pieces
            .iter()
            .filter(|p| range.contains(&p.as_ptr()))
            .collect();
        assert!(shared.iter().all(|p| p.len() >= SHARE_AT_LEAST));
        if limit == 4096 {
            assert!(pieces.is_empty(), "4 KiB frames: every group is copied");
        } else {
            assert!(
                !shared.is_empty(),
                "limit {limit}: no body slice handed over"
            );
        }
    }
    // A run that settles something goes out as batches, copied.
    let mut settled = template.clone();
    settled.delivery_id = 3;
    let mut w = DeliverBatchWriter::new(u32::MAX).with_runs();
    let (mut out, mut pieces) = (BytesMut::new(), Vec::new());
    let packed = PackedBodies::pack(&bodies);
    w.push_run_sharing(&mut out, 1, &settled.view(), 500, &packed, &mut pieces);
    assert!(pieces.is_empty());
}
