//! `split_frame`: incomplete input, limits checked on the length prefix before any buffering,
//! lengths below the header size, and back-to-back frames; `split_frames`, which cuts all the
//! complete frames of a read at once, against it.

mod common;

use bytes::{BufMut, BytesMut};
use common::*;
use ferry_protocol::{
    frames_in, split_frame, split_frames, RawFrame, Request, WireError, HEADER_LEN,
};
use proptest::prelude::*;

#[test]
fn header_is_ten_bytes() {
    assert_eq!(HEADER_LEN, 10);
    assert_eq!(req_bytes(&Request::Ping, 1).len(), HEADER_LEN);
}

#[test]
fn fewer_than_four_bytes_are_incomplete() {
    for n in 0..4 {
        let mut buf = BytesMut::from(&[0xffu8; 4][..n]);
        assert_eq!(split_frame(&mut buf, 64), Ok(None));
        assert_eq!(buf.len(), n);
    }
}

#[test]
fn oversized_frame_is_rejected_from_its_length_prefix_alone() {
    // Only the four length bytes have arrived: the announcement alone is enough to refuse it,
    // so the reader neither waits for nor buffers the rest.
    let mut buf = BytesMut::new();
    buf.put_u32_le(1000);
    let cap_before = buf.capacity();
    assert_eq!(
        split_frame(&mut buf, 1000),
        Err(WireError::FrameTooLarge {
            len: 1004,
            max: 1000
        })
    );
    assert_eq!(
        buf.capacity(),
        cap_before,
        "nothing may be reserved for a refused frame"
    );
    assert_eq!(buf.len(), 4);
}

#[test]
fn frame_limit_counts_the_length_prefix() {
    // A Ping is 10 bytes on the wire in all.
    let ping = req_bytes(&Request::Ping, 1);
    let mut buf = BytesMut::from(&ping[..]);
    assert!(split_frame(&mut buf, 10).unwrap().is_some());
    let mut buf = BytesMut::from(&ping[..]);
    assert_eq!(
        split_frame(&mut buf, 9),
        Err(WireError::FrameTooLarge { len: 10, max: 9 })
    );
}

#[test]
fn largest_length_prefix_does_not_overflow() {
    let mut buf = BytesMut::new();
    buf.put_u32_le(u32::MAX);
    assert_eq!(
        split_frame(&mut buf, u32::MAX),
        Err(WireError::FrameTooLarge {
            len: u64::from(u32::MAX) + 4,
            max: u32::MAX
        })
    );
}

#[test]
fn length_below_the_header_is_frame_too_short() {
    for len in 0..6u32 {
        let mut buf = BytesMut::new();
        buf.put_u32_le(len);
        buf.put_slice(&[0; 16]);
        assert_eq!(
            split_frame(&mut buf, 1 << 20),
            Err(WireError::FrameTooShort(len))
        );
    }
    // Six is exactly a header with an empty payload.
    let mut buf = BytesMut::new();
    buf.put_u32_le(6);
    buf.put_u16_le(0x0003);
    buf.put_u32_le(5);
    let f = split_frame(&mut buf, 1 << 20).unwrap().unwrap();
    assert_eq!((f.kind, f.request_id, f.payload.len()), (3, 5, 0));
}

#[test]
fn an_incomplete_frame_reserves_room_for_itself_only() {
    let mut buf = BytesMut::new();
    buf.put_u32_le(4000 - 4);
    buf.put_u16_le(0x0020);
    assert_eq!(split_frame(&mut buf, 4000), Ok(None));
    assert!(buf.capacity() >= 4000, "room for the announced frame");
    assert!(buf.capacity() <= 2 * 4000, "and not much more");
    assert_eq!(buf.len(), 6);
}

#[test]
fn back_to_back_frames_split_one_at_a_time_leaving_the_partial_tail() {
    let a = req_bytes(&Request::Ping, 1);
    let b = req_bytes(
        &Request::CreateQueue {
            name: "q".into(),
            options: Default::default(),
        },
        2,
    );
    let mut buf = BytesMut::new();
    buf.put_slice(&a);
    buf.put_slice(&b);
    buf.put_slice(&a[..5]);
    assert_eq!(split_frame(&mut buf, 64).unwrap().unwrap().request_id, 1);
    assert_eq!(split_frame(&mut buf, 64).unwrap().unwrap().request_id, 2);
    assert_eq!(split_frame(&mut buf, 64), Ok(None));
    assert_eq!(&buf[..], &a[..5]);
    buf.put_slice(&a[5..]);
    assert_eq!(split_frame(&mut buf, 64).unwrap().unwrap().request_id, 1);
    assert!(buf.is_empty());
}

#[test]
fn wire_errors_say_what_is_wrong() {
    assert_eq!(
        WireError::FrameTooLarge { len: 20, max: 10 }.to_string(),
        "frame of 20 bytes exceeds the limit of 10"
    );
    assert_eq!(
        WireError::FrameTooShort(3).to_string(),
        "frame length 3 is shorter than the header"
    );
    assert_eq!(
        WireError::UnknownKind(0x1234).to_string(),
        "unknown frame kind 0x1234"
    );
}

/// Cuts `stream` one frame at a time: the frames, how it stopped, what is left.
fn one_by_one(stream: &[u8], max: u32) -> (Vec<RawFrame>, Result<(), WireError>, Vec<u8>) {
    let mut buf = BytesMut::from(stream);
    let mut frames = Vec::new();
    let outcome = loop {
        match split_frame(&mut buf, max) {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    (frames, outcome, buf.to_vec())
}

/// Cuts `stream` with `split_frames`: the same three things.
fn all_at_once(stream: &[u8], max: u32) -> (Vec<RawFrame>, Result<(), WireError>, Vec<u8>) {
    let mut buf = BytesMut::from(stream);
    let (run, outcome) = split_frames(&mut buf, max);
    let frames = frames_in(&run).map(|f| f.to_raw(&run)).collect();
    (frames, outcome, buf.to_vec())
}

#[test]
fn all_frames_at_once_stop_at_a_partial_tail_and_reserve_room_for_it() {
    let a = req_bytes(&Request::Ping, 1);
    let b = req_bytes(&Request::Ping, 2);
    let mut buf = BytesMut::new();
    buf.put_slice(&a);
    buf.put_slice(&b);
    buf.put_u32_le(4000 - 4);
    let (run, outcome) = split_frames(&mut buf, 4000);
    assert_eq!(outcome, Ok(()));
    let ids: Vec<u32> = frames_in(&run).map(|f| f.request_id).collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(buf.len(), 4, "the partial frame stays");
    assert!(buf.capacity() >= 4000, "with room for the announced frame");
    // Nothing complete: an empty run, nothing consumed.
    let (run, outcome) = split_frames(&mut buf, 4000);
    assert!(run.is_empty());
    assert_eq!((outcome, buf.len()), (Ok(()), 4));
}

#[test]
fn a_bad_length_after_complete_frames_comes_back_beside_them() {
    let a = req_bytes(&Request::Ping, 1);
    let mut buf = BytesMut::new();
    buf.put_slice(&a);
    buf.put_u32_le(2);
    buf.put_u16_le(0x0003);
    let (run, outcome) = split_frames(&mut buf, 64);
    assert_eq!(frames_in(&run).count(), 1);
    assert_eq!(outcome, Err(WireError::FrameTooShort(2)));
    let mut buf = BytesMut::new();
    buf.put_slice(&a);
    buf.put_u32_le(1000);
    let (run, outcome) = split_frames(&mut buf, 64);
    assert_eq!(frames_in(&run).count(), 1);
    assert_eq!(
        outcome,
        Err(WireError::FrameTooLarge { len: 1004, max: 64 })
    );
}

/// A byte stream of frames of random kinds, ids and payloads, then a few random bytes (often
/// a bad or partial header), cut at a random place.
fn streams() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(
            (
                any::<u16>(),
                any::<u32>(),
                prop::collection::vec(any::<u8>(), 0..40),
            ),
            0..8,
        ),
        prop::collection::vec(any::<u8>(), 0..12),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(frames, tail, cut)| {
            let mut out = Vec::new();
            for (kind, rid, payload) in frames {
                out.extend_from_slice(&(payload.len() as u32 + 6).to_le_bytes());
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&rid.to_le_bytes());
                out.extend_from_slice(&payload);
            }
            out.extend_from_slice(&tail);
            let at = cut.index(out.len() + 1);
            out.truncate(at);
            out
        })
}

proptest! {
    #[test]
    fn all_frames_at_once_are_the_frames_cut_one_by_one(stream in streams(), max in 10u32..80) {
        prop_assert_eq!(all_at_once(&stream, max), one_by_one(&stream, max));
    }
}

#[test]
fn a_window_reads_its_own_frame_and_nothing_behind_it() {
    let run = bytes::Bytes::from_static(&[1, 0, 2, 0, 3, 0]);
    let mut r = ferry_protocol::wire::Reader::window(&run, 2..4);
    assert_eq!(r.remaining(), 2);
    assert_eq!(r.u16(), Ok(2));
    // The next frame's bytes are there, but not this frame's.
    assert_eq!(r.u16(), Err(WireError::Truncated { needed: 2 }));
    assert_eq!(r.finish(), Ok(()));
    // A range past the run is cut at its end.
    assert_eq!(
        ferry_protocol::wire::Reader::window(&run, 4..99).remaining(),
        2
    );
}
