//! The byte examples in `docs/protocol.md` are real frames: each one splits, decodes and
//! re-encodes to the very same bytes, and together they show every frame kind. (The layouts
//! themselves are pinned in `layout.rs`.)
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::HashSet;

use bytes::BytesMut;
use ferry_protocol::{split_frame, FrameKind, Request, Response, HEADER_LEN};

/// The bytes of each ```text block: on every line, after an optional leading word (a frame
/// name), the run of two-digit hex tokens (`|` and `||` separators skipped) up to the first
/// other token (a comment).
fn example_blocks(doc: &str) -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(b) => blocks.push(b),
                None if line.trim() == "```text" => current = Some(Vec::new()),
                None => {}
            }
            continue;
        }
        let Some(bytes) = current.as_mut() else {
            continue;
        };
        let is_hex = |t: &str| t.len() == 2 && t.chars().all(|c| c.is_ascii_hexdigit());
        let mut tokens = line
            .split_whitespace()
            .filter(|t| *t != "|" && *t != "||")
            .peekable();
        if tokens.peek().is_some_and(|t| !is_hex(t)) {
            tokens.next();
        }
        for t in tokens {
            if !is_hex(t) {
                break;
            }
            bytes.push(u8::from_str_radix(t, 16).unwrap());
        }
    }
    blocks
}

#[test]
fn every_example_in_the_protocol_doc_is_a_valid_frame() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/protocol.md"
    ))
    .expect("docs/protocol.md");
    let mut kinds = HashSet::new();
    let mut frames = 0;
    for block in example_blocks(&doc) {
        let mut buf = BytesMut::from(&block[..]);
        while let Some(frame) = split_frame(&mut buf, 1 << 20).expect("a valid frame") {
            let kind = FrameKind::from_u16(frame.kind).expect("a known kind");
            let mut again = BytesMut::new();
            if kind.is_request() {
                Request::decode(&frame)
                    .unwrap_or_else(|e| panic!("{kind:?}: {e}"))
                    .encode(frame.request_id, &mut again);
            } else {
                Response::decode(&frame)
                    .unwrap_or_else(|e| panic!("{kind:?}: {e}"))
                    .encode(frame.request_id, &mut again);
                if matches!(kind, FrameKind::Deliver | FrameKind::SubscriptionClosed) {
                    assert_eq!(frame.request_id, 0, "pushes carry request id 0");
                }
            }
            // Every example is in the canonical encoding: what an encoder writes for its value.
            assert_eq!(
                &again[HEADER_LEN..],
                &frame.payload[..],
                "{kind:?}: the example is not what the encoder writes"
            );
            kinds.insert(kind);
            frames += 1;
        }
        assert!(
            buf.is_empty(),
            "an example ends with {} stray bytes: {:02x?}",
            buf.len(),
            &buf[..]
        );
    }
    let missing: Vec<_> = FrameKind::ALL
        .iter()
        .filter(|k| !kinds.contains(k))
        .collect();
    assert!(missing.is_empty(), "no example of {missing:?}");
    assert!(frames >= 50, "only {frames} example frames found");
}
