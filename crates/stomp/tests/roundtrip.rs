//! Roundtrip: every frame that can be written decodes back to itself (plus the content-length
//! the encoder adds), in every version, alone and in a stream with heart-beats; `encoded_len`
//! is exact.

mod common;

use bytes::BytesMut;
use common::{any_frame, as_decoded};
use ferry_stomp::codec::{decode, Item, Limits, HEARTBEAT};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_frame_decodes_to_what_was_encoded((version, frame) in any_frame()) {
        let mut out = Vec::new();
        frame.encode(version, &mut out).unwrap();
        prop_assert_eq!(out.len(), frame.encoded_len(version));
        let mut buf = BytesMut::from(&out[..]);
        let got = decode(&mut buf, version, &Limits::DEFAULT).unwrap();
        prop_assert_eq!(got, Some(Item::Frame(as_decoded(frame))));
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn a_stream_of_frames_and_heartbeats_decodes_in_order(
        items in proptest::collection::vec((any_frame(), 0..3usize), 1..8),
    ) {
        let version = items[0].0 .0;
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for ((_, frame), beats) in &items {
            // Every frame is written in the stream's version, if it can be.
            if frame.encode(version, &mut out).is_err() {
                continue;
            }
            expected.push(Item::Frame(as_decoded(frame.clone())));
            if *beats > 0 {
                for _ in 0..*beats {
                    out.extend_from_slice(HEARTBEAT);
                }
                expected.push(Item::Heartbeat);
            }
        }
        let mut buf = BytesMut::from(&out[..]);
        let mut got = Vec::new();
        while let Some(item) = decode(&mut buf, version, &Limits::DEFAULT).unwrap() {
            got.push(item);
        }
        prop_assert_eq!(got, expected);
        prop_assert!(buf.is_empty());
    }
}
