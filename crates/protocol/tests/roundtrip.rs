//! Every request and response variant: encode -> split_frame -> decode gives the original, and a
//! frame or payload cut at any byte is "incomplete" or an error, never a panic or a wrong value.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashSet;

use bytes::{Bytes, BytesMut};
use common::*;
use ferry_protocol::requests::Connect;
use ferry_protocol::{split_frame, Name, OutgoingMessage, RawFrame, Request, Response, WireError};

#[test]
fn samples_cover_every_kind() {
    let req: HashSet<_> = all_requests().iter().map(Request::kind).collect();
    let resp: HashSet<_> = all_responses().iter().map(Response::kind).collect();
    assert_eq!(req, request_kinds().into_iter().collect());
    assert_eq!(resp, response_kinds().into_iter().collect());
    // The pinned subsets alone cover every kind too.
    let req: HashSet<_> = pinned_requests().iter().map(Request::kind).collect();
    let resp: HashSet<_> = pinned_responses().iter().map(Response::kind).collect();
    assert_eq!(req.len(), request_kinds().len());
    assert_eq!(resp.len(), response_kinds().len());
}

#[test]
fn a_publish_batch_head_and_its_bodies_are_the_frame_encode_writes() {
    let mut seen = 0;
    for req in all_requests() {
        let Request::PublishBatch(batch) = &req else {
            continue;
        };
        let mut head = BytesMut::new();
        let bodies = ferry_protocol::publish_batch::encode_publish_batch_head(7, batch, &mut head);
        assert_eq!(
            bodies.as_ptr(),
            batch.bodies.packed().as_ptr(),
            "not a copy"
        );
        assert_eq!(
            [&head[..], &bodies[..]].concat(),
            req_bytes(&req, 7).to_vec()
        );
        seen += 1;
    }
    assert!(seen > 0, "no PublishBatch among the samples");
}

#[test]
fn encoded_len_is_the_size_the_encoder_writes_for_every_frame_kind() {
    for req in all_requests() {
        assert_eq!(req.encoded_len(), req_bytes(&req, 7).len(), "{req:?}");
    }
    for resp in all_responses() {
        assert_eq!(resp.encoded_len(), resp_bytes(&resp, 7).len(), "{resp:?}");
        if let Response::Deliver {
            subscription,
            delivery,
        } = &resp
        {
            let mut out = BytesMut::new();
            ferry_protocol::encode_deliver(&mut out, *subscription, &delivery.view());
            assert_eq!(
                ferry_protocol::deliver_encoded_len(&delivery.view()),
                out.len()
            );
        }
    }
}

#[test]
fn every_request_roundtrips() {
    for (i, req) in all_requests().into_iter().enumerate() {
        let id = i as u32 * 1000 + 1;
        let frame = one_frame(&req_bytes(&req, id));
        assert_eq!(frame.kind, req.kind().as_u16());
        assert_eq!(frame.request_id, id);
        assert_eq!(Request::decode(&frame), Ok(req));
    }
}

#[test]
fn every_response_roundtrips() {
    for (i, resp) in all_responses().into_iter().enumerate() {
        let id = i as u32; // includes 0, as pushes use
        let frame = one_frame(&resp_bytes(&resp, id));
        assert_eq!(frame.kind, resp.kind().as_u16());
        assert_eq!(frame.request_id, id);
        assert_eq!(Response::decode(&frame), Ok(resp));
    }
}

#[test]
fn many_frames_in_one_buffer_come_out_in_order() {
    let mut buf = BytesMut::new();
    let reqs = all_requests();
    for (i, r) in reqs.iter().enumerate() {
        r.encode(i as u32, &mut buf);
    }
    for (i, r) in reqs.iter().enumerate() {
        let f = split_frame(&mut buf, LIMIT).unwrap().unwrap();
        assert_eq!(f.request_id, i as u32);
        assert_eq!(&Request::decode(&f).unwrap(), r);
    }
    assert_eq!(split_frame(&mut buf, LIMIT), Ok(None));
    assert!(buf.is_empty());
}

/// Feeds every proper prefix of `bytes` to `split_frame`: each must be "incomplete" and consume
/// nothing; the whole frame must then come out.
fn assert_prefixes_incomplete(bytes: &[u8]) {
    for cut in 0..bytes.len() {
        let mut buf = BytesMut::from(&bytes[..cut]);
        assert_eq!(
            split_frame(&mut buf, LIMIT),
            Ok(None),
            "prefix of {cut} of {} bytes",
            bytes.len()
        );
        assert_eq!(
            buf.len(),
            cut,
            "split_frame consumed bytes of an incomplete frame"
        );
    }
    one_frame(bytes);
}

/// Decodes the payload of `frame` cut at every byte: each must be an error.
fn assert_cut_payloads_fail<T: std::fmt::Debug>(
    frame: &RawFrame,
    decode: impl Fn(&RawFrame) -> Result<T, WireError>,
) {
    for cut in 0..frame.payload.len() {
        let cut_frame = RawFrame {
            payload: frame.payload.slice(..cut),
            ..frame.clone()
        };
        let res = decode(&cut_frame);
        assert!(
            res.is_err(),
            "kind {:#06x} payload cut at {cut} of {} decoded to {res:?}",
            frame.kind,
            frame.payload.len()
        );
    }
}

/// Adds a byte after the last field: must be rejected as trailing garbage.
fn with_trailing_byte(frame: &RawFrame) -> RawFrame {
    let mut p = frame.payload.to_vec();
    p.push(0);
    RawFrame {
        payload: Bytes::from(p),
        ..frame.clone()
    }
}

/// A `Connect` of a version this build does not speak, whose payload has no layout it knows.
fn foreign_connect(version: u16) -> Request {
    Request::Connect(Connect {
        version,
        client: String::new(),
        mechanism: String::new(),
        credentials: String::new(),
        keepalive_ms: 0,
        flags: 0,
    })
}

#[test]
fn truncated_requests_are_incomplete_or_errors() {
    for req in all_requests() {
        let bytes = req_bytes(&req, RID);
        if let Request::Connect(c) = &req {
            if !ferry_protocol::speaks_version(c.version) {
                // By design (see `requests::decode_connect`): only the version must parse, so
                // that the broker can answer UnsupportedVersion to any future client.
                let frame = one_frame(&bytes);
                for cut in 0..frame.payload.len() {
                    let cut_frame = RawFrame {
                        payload: frame.payload.slice(..cut),
                        ..frame.clone()
                    };
                    let res = Request::decode(&cut_frame);
                    if cut < 2 {
                        assert!(res.is_err());
                    } else {
                        assert_eq!(res, Ok(foreign_connect(c.version)));
                    }
                }
                assert_eq!(
                    Request::decode(&with_trailing_byte(&frame)),
                    Ok(foreign_connect(c.version))
                );
                continue;
            }
        }
        assert_prefixes_incomplete(&bytes);
        let frame = one_frame(&bytes);
        assert_cut_payloads_fail(&frame, Request::decode);
        assert_eq!(
            Request::decode(&with_trailing_byte(&frame)),
            Err(WireError::TrailingBytes(1)),
            "{req:?}"
        );
    }
}

#[test]
fn truncated_responses_are_incomplete_or_errors() {
    for resp in all_responses() {
        let bytes = resp_bytes(&resp, RID);
        assert_prefixes_incomplete(&bytes);
        let frame = one_frame(&bytes);
        assert_cut_payloads_fail(&frame, Response::decode);
        assert_eq!(
            Response::decode(&with_trailing_byte(&frame)),
            Err(WireError::TrailingBytes(1)),
            "{resp:?}"
        );
    }
}

#[test]
fn requests_and_responses_do_not_decode_as_each_other() {
    for req in all_requests() {
        let frame = one_frame(&req_bytes(&req, RID));
        assert_eq!(
            Response::decode(&frame),
            Err(WireError::UnknownKind(frame.kind))
        );
    }
    for resp in all_responses() {
        let frame = one_frame(&resp_bytes(&resp, RID));
        assert_eq!(
            Request::decode(&frame),
            Err(WireError::UnknownKind(frame.kind))
        );
    }
}

#[test]
fn unknown_kinds_are_reported_as_such_whatever_the_payload() {
    for kind in [0x0000, 0x0005, 0x00ff, 0x7fff, 0x8000, 0x8006, 0xffff] {
        for payload in [&b""[..], b"\x01\x02\x03", &[0xff; 40]] {
            let frame = RawFrame {
                kind,
                request_id: 9,
                payload: Bytes::copy_from_slice(payload),
            };
            assert_eq!(Request::decode(&frame), Err(WireError::UnknownKind(kind)));
            assert_eq!(Response::decode(&frame), Err(WireError::UnknownKind(kind)));
        }
    }
}

#[test]
fn an_error_code_unknown_to_this_build_decodes_as_internal_keeping_its_text() {
    let frame = RawFrame {
        kind: 0x8003,
        request_id: 1,
        payload: Bytes::from(hex("e9 03 | 03 00 6e 65 77")), // code 1001, "new"
    };
    assert_eq!(
        Response::decode(&frame),
        Ok(Response::error(ferry_protocol::ErrorCode::Internal, "new"))
    );
}

#[test]
fn a_connect_of_another_version_decodes_from_its_version_alone() {
    // A future client may lay out its connect differently; only the leading version is frozen.
    let frame = RawFrame {
        kind: 0x0001,
        request_id: 1,
        payload: Bytes::from(hex("08 00 | ff ff ff | 01")),
    };
    assert_eq!(Request::decode(&frame), Ok(foreign_connect(8)));
    // Version 1 and 2 clients (before topics) are refused the same way.
    let frame = RawFrame {
        kind: 0x0001,
        request_id: 1,
        payload: Bytes::from(hex("01 00 | ff ff ff | 01")),
    };
    assert_eq!(Request::decode(&frame), Ok(foreign_connect(1)));
    // A version 2 connect (no keep-alive or flags) is one of those.
    let frame = RawFrame {
        kind: 0x0001,
        request_id: 1,
        payload: Bytes::from(hex("02 00 | 03 00 61 70 70 | 00 00")),
    };
    assert_eq!(Request::decode(&frame), Ok(foreign_connect(2)));
    // A version 3 connect (no mechanism) too.
    let frame = RawFrame {
        kind: 0x0001,
        request_id: 1,
        payload: Bytes::from(hex(
            "03 00 | 03 00 61 70 70 | 00 00 | 00 00 00 00 | 00 00 00 00",
        )),
    };
    assert_eq!(Request::decode(&frame), Ok(foreign_connect(3)));
    // If the rest does have this version's layout it is kept.
    let req = Request::Connect(Connect {
        version: 7,
        client: "app".into(),
        mechanism: String::new(),
        credentials: String::new(),
        keepalive_ms: 1000,
        flags: 0,
    });
    assert_eq!(Request::decode(&one_frame(&req_bytes(&req, 1))), Ok(req));
    // The connect of a version this build speaks (4 to 7 share its layout) must be whole.
    for version in ["04 00", "05 00", "06 00", "07 00"] {
        let frame = RawFrame {
            kind: 0x0001,
            request_id: 1,
            payload: Bytes::from(hex(&format!("{version} | ff ff ff | 01"))),
        };
        assert!(Request::decode(&frame).is_err(), "{version}");
    }
}

#[test]
fn strings_over_the_u16_limit_are_cut_at_a_character_boundary() {
    use ferry_protocol::wire::{put_string, Reader, MAX_STRING_BYTES};
    // 'é' is two bytes: 40,000 of them do not fit, and 65,535 is odd, so the cut must back off.
    let long = "é".repeat(40_000);
    let mut out = BytesMut::new();
    put_string(&mut out, &long);
    let bytes = out.freeze();
    let mut r = Reader::new(&bytes);
    let s = r.string("s").unwrap();
    r.finish().unwrap();
    assert_eq!(s.len(), MAX_STRING_BYTES - 1);
    assert!(long.starts_with(&s));
    // The size computation used to split batches agrees with the encoder on such strings.
    let mut m = ferry_protocol::OutgoingMessage::new("q", Bytes::new());
    m.properties = vec![
        (
            "p".into(),
            ferry_protocol::PropertyValue::Str("x".repeat(70_000)),
        ),
        (
            "é".repeat(40_000),
            ferry_protocol::PropertyValue::Str(long.clone()),
        ),
    ]
    .into();
    let mut out = BytesMut::new();
    ferry_protocol::requests::put_outgoing(&mut out, &m);
    assert_eq!(
        ferry_protocol::requests::outgoing_encoded_len(&m),
        out.len()
    );
}

#[test]
fn a_batch_repeating_its_topic_shares_it_between_messages_and_checks_each_new_one() {
    let to = |topic: &str| OutgoingMessage::to_topic(topic, Bytes::from_static(b"p"));
    let batch = Request::SendBatch(vec![to("prices"), to("prices"), to("pricez"), to("prices")]);
    let bytes = req_bytes(&batch, 5);
    let decoded = Request::decode(&one_frame(&bytes));
    assert_eq!(decoded, Ok(batch));
    // A topic repeated from the message before shares that message's allocation; a new one
    // (and the one after it, which differs from its predecessor) gets its own.
    let Ok(Request::SendBatch(ms)) = decoded else {
        panic!("a batch")
    };
    let topics: Vec<&Name> = ms.iter().map(|m| m.topic.as_ref().unwrap()).collect();
    assert!(topics[1].same_allocation(topics[0]));
    assert!(!topics[2].same_allocation(topics[1]));
    assert!(!topics[3].same_allocation(topics[0]));

    // The third topic, different from the one before it, must still be checked as UTF-8 even
    // though the decoder reuses a topic equal to the previous one unchecked.
    let at = bytes
        .windows(6)
        .position(|w| w == b"pricez")
        .expect("the third topic is in the frame");
    let mut bad = bytes.clone();
    bad[at + 5] = 0xff;
    assert_eq!(
        Request::decode(&one_frame(&bad)),
        Err(WireError::InvalidUtf8("topic name"))
    );
    // The same bytes in the first message, with no message before it, are refused too.
    let first = Request::SendBatch(vec![to("pricez"), to("pricez")]);
    let mut bad = req_bytes(&first, 6);
    let at = bad.windows(6).position(|w| w == b"pricez").unwrap();
    bad[at + 5] = 0xff;
    assert_eq!(
        Request::decode(&one_frame(&bad)),
        Err(WireError::InvalidUtf8("topic name"))
    );
}
