//! Strategies for frames that can be written, shared by the property tests.
#![allow(dead_code)]

use bytes::Bytes;
use ferry_stomp::codec::{Command, Frame, Version};
use proptest::prelude::*;

/// Header text: mostly plain, with every character that escaping cares about.
fn text(special: &'static [char]) -> impl Strategy<Value = String> {
    let plain = prop_oneof![
        Just('a'),
        Just('Z'),
        Just('7'),
        Just('-'),
        Just(' '),
        Just('é'),
        Just('/')
    ];
    let special = proptest::sample::select(special);
    proptest::collection::vec(prop_oneof![4 => plain, 1 => special], 0..12)
        .prop_map(|cs| cs.into_iter().collect())
}

/// A frame of `command` that `version` can write, with an arbitrary body where allowed.
pub fn frame_for(command: Command, version: Version) -> impl Strategy<Value = Frame> {
    let escaping = command.escapes_headers() && version != Version::V1_0;
    let (name_chars, value_chars): (&'static [char], &'static [char]) = if !escaping {
        (&['\\'], &[':', '\\'])
    } else if version == Version::V1_1 {
        (&[':', '\n', '\\'], &[':', '\n', '\\'])
    } else {
        (&[':', '\n', '\r', '\\'], &[':', '\n', '\r', '\\'])
    };
    let name = text(name_chars).prop_filter("a name", |n| !n.is_empty() && n != "content-length");
    let headers = proptest::collection::vec((name, text(value_chars)), 0..6);
    let body = if command.allows_body() {
        proptest::collection::vec(any::<u8>(), 0..64).boxed()
    } else {
        Just(Vec::new()).boxed()
    };
    (headers, body).prop_map(move |(headers, body)| Frame {
        command,
        headers,
        body: Bytes::from(body),
    })
}

/// Any command in any version, and a frame of it that the version can write.
pub fn any_frame() -> impl Strategy<Value = (Version, Frame)> {
    (
        proptest::sample::select(Version::ALL.to_vec()),
        proptest::sample::select(Command::ALL.to_vec()),
    )
        .prop_flat_map(|(v, c)| frame_for(c, v).prop_map(move |f| (v, f)))
}

/// `f` as decoding its encoding gives it back: with the content-length the encoder adds.
pub fn as_decoded(mut f: Frame) -> Frame {
    if !f.body.is_empty() {
        f.headers
            .push(("content-length".into(), f.body.len().to_string()));
    }
    f
}
