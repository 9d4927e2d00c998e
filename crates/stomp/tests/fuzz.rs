//! Arbitrary bytes never panic the codec: random bytes, random bytes after a valid frame's
//! start, and valid frames with bytes flipped, inserted or cut, with default and tiny limits.
//! Whatever the input, decoding ends in frames, "incomplete" or an error, and never takes more
//! than the buffer holds.

mod common;

use bytes::BytesMut;
use common::any_frame;
use ferry_stomp::codec::{decode, Limits, Version};
use proptest::prelude::*;

const TINY: Limits = Limits {
    max_frame_bytes: 48,
    max_headers: 2,
    max_header_line: 12,
    max_body_bytes: 16,
};

/// Decodes `bytes` until it needs more or fails; checks that every frame decoded stays within
/// `limits`.
fn decode_all(bytes: &[u8], version: Version, limits: &Limits) {
    let mut buf = BytesMut::from(bytes);
    loop {
        let before = buf.len();
        match decode(&mut buf, version, limits) {
            Ok(Some(ferry_stomp::codec::Item::Frame(f))) => {
                assert!(f.body.len() <= limits.max_body_bytes);
                assert!(f.headers.len() <= limits.max_headers);
                assert!(before - buf.len() <= limits.max_frame_bytes);
            }
            Ok(Some(ferry_stomp::codec::Item::Heartbeat)) => {}
            Ok(None) | Err(_) => return,
        }
        assert!(buf.len() < before, "progress");
    }
}

fn versions() -> impl Strategy<Value = Version> {
    proptest::sample::select(Version::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), v in versions()) {
        decode_all(&bytes, v, &Limits::DEFAULT);
        decode_all(&bytes, v, &TINY);
    }

    #[test]
    fn random_bytes_after_a_command_never_panic(
        command in proptest::sample::select(vec!["SEND\n", "CONNECT\n", "MESSAGE\r\n", "ACK\n"]),
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), Just(b'\\'), Just(0u8), any::<u8>()],
            0..128,
        ),
        v in versions(),
    ) {
        let mut all = command.as_bytes().to_vec();
        all.extend(bytes);
        decode_all(&all, v, &Limits::DEFAULT);
        decode_all(&all, v, &TINY);
    }

    #[test]
    fn damaged_frames_never_panic(
        (version, frame) in any_frame(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut bytes = Vec::new();
        frame.encode(version, &mut bytes).unwrap();
        for (at, byte, how) in edits {
            if bytes.is_empty() { break; }
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => bytes.truncate(i),
            }
        }
        decode_all(&bytes, version, &Limits::DEFAULT);
        decode_all(&bytes, version, &TINY);
    }
}
