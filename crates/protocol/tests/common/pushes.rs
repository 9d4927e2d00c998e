//! Pushed deliveries as the broker writes them for a stream of records: a sample record, and
//! every frame of a written buffer decoded back.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::{Bytes, BytesMut};
use ferry_protocol::{split_frame, Delivery, FrameKind, Message, PropertyValue, Response};

/// A 150-byte record as the `stream` workload publishes it, message `id` of topic `t`.
pub fn record(id: u64) -> Delivery {
    Delivery {
        delivery_id: 0,
        message: Message {
            id,
            queue: "t:reader".into(),
            sender: "writer".into(),
            receiver: None,
            priority: 4,
            context: id * 3,
            properties: vec![("ferry_topic".into(), PropertyValue::Str("t".into()))].into(),
            body: Bytes::from(vec![id as u8; 150]),
            created_at: 1_700_000_000_000 + id,
            delivery_count: 0,
            expires_at: 0,
        },
    }
}

/// Every frame of `out`, decoded: (kind, subscription, deliveries).
pub fn decode_all(mut out: BytesMut) -> Vec<(FrameKind, u64, Vec<Delivery>)> {
    let mut frames = Vec::new();
    while let Some(f) = split_frame(&mut out, u32::MAX).unwrap() {
        assert_eq!(f.request_id, 0, "pushes carry request id 0");
        let kind = FrameKind::from_u16(f.kind).unwrap();
        frames.push(match Response::decode(&f).unwrap() {
            Response::Deliver {
                subscription,
                delivery,
            } => (kind, subscription, vec![delivery]),
            Response::DeliverBatch {
                subscription,
                deliveries,
            }
            | Response::DeliverRun {
                subscription,
                deliveries,
            } => (kind, subscription, deliveries),
            other => panic!("not a delivery: {other:?}"),
        });
    }
    assert!(out.is_empty(), "a frame left incomplete");
    frames
}

/// The deliveries of `frames` in order, each with its subscription.
pub fn flatten(frames: Vec<(FrameKind, u64, Vec<Delivery>)>) -> Vec<(u64, Delivery)> {
    frames
        .into_iter()
        .flat_map(|(_, s, ds)| ds.into_iter().map(move |d| (s, d)))
        .collect()
}
