//! Truncation: every strict prefix of a frame is "incomplete" (nothing taken, no error, no
//! panic), also for CR LF line ends and bodies without content-length.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use bytes::BytesMut;
use common::any_frame;
use ferry_stomp::codec::{check, decode, Check, Limits, Version};
use proptest::prelude::*;

fn assert_every_prefix_incomplete(bytes: &[u8], version: Version) {
    let limits = Limits::DEFAULT;
    for cut in 0..bytes.len() {
        let prefix = &bytes[..cut];
        assert_eq!(
            check(prefix, &limits),
            Ok(Check::Incomplete),
            "prefix of {cut} bytes of {:?}",
            String::from_utf8_lossy(bytes)
        );
        let mut buf = BytesMut::from(prefix);
        assert_eq!(decode(&mut buf, version, &limits), Ok(None));
        assert_eq!(buf.len(), cut, "nothing taken");
    }
    assert!(matches!(check(bytes, &limits), Ok(Check::Frame(_))));
}

#[test]
fn prefixes_of_hand_written_frames_are_incomplete() {
    for bytes in [
        &b"SEND\r\ndestination:/queue/a\r\ncontent-length:4\r\n\r\na\0b\0\0"[..],
        b"SEND\ndestination:/queue/a\n\nno length\0",
        b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0",
        b"CONNECT\naccept-version:1.0,1.1,1.2\nheart-beat:0,0\n\n\0",
        b"DISCONNECT\n\n\0",
    ] {
        assert_every_prefix_incomplete(bytes, Version::V1_2);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prefixes_of_any_frame_are_incomplete((version, frame) in any_frame()) {
        let mut out = Vec::new();
        frame.encode(version, &mut out).unwrap();
        assert_every_prefix_incomplete(&out, version);
    }
}
