//! Byte layouts pinned against the examples of the STOMP 1.2 specification: each example
//! decodes to the frame it shows, and frames built in code encode to the exact bytes.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::BytesMut;
use ferry_stomp::codec::{decode, Command, Frame, Item, Limits, Version};

/// Decodes exactly one frame from `bytes` (all of it).
fn one(bytes: &[u8], version: Version) -> Frame {
    let mut buf = BytesMut::from(bytes);
    match decode(&mut buf, version, &Limits::DEFAULT).unwrap() {
        Some(Item::Frame(f)) => {
            assert!(buf.is_empty(), "left over: {:?}", &buf[..]);
            f
        }
        other => panic!("not a frame: {other:?}"),
    }
}

fn encoded(f: &Frame, version: Version) -> Vec<u8> {
    let mut out = Vec::new();
    f.encode(version, &mut out).unwrap();
    assert_eq!(out.len(), f.encoded_len(version), "encoded_len is exact");
    out
}

fn frame(command: Command, headers: &[(&str, &str)], body: &[u8]) -> Frame {
    Frame {
        command,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: bytes::Bytes::copy_from_slice(body),
    }
}

#[test]
fn every_command_of_the_spec_examples_decodes_and_encodes_byte_for_byte() {
    let examples: Vec<(&[u8], Frame)> = vec![
        (
            b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
            frame(
                Command::Connect,
                &[("accept-version", "1.2"), ("host", "stomp.github.org")],
                b"",
            ),
        ),
        (
            b"STOMP\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
            frame(
                Command::Stomp,
                &[("accept-version", "1.2"), ("host", "stomp.github.org")],
                b"",
            ),
        ),
        (
            b"CONNECTED\nversion:1.2\n\n\0",
            frame(Command::Connected, &[("version", "1.2")], b""),
        ),
        (
            b"SEND\ndestination:/queue/a\ncontent-type:text/plain\ncontent-length:13\n\nhello queue a\0",
            frame(
                Command::Send,
                &[
                    ("destination", "/queue/a"),
                    ("content-type", "text/plain"),
                    ("content-length", "13"),
                ],
                b"hello queue a",
            ),
        ),
        (
            b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\0",
            frame(
                Command::Subscribe,
                &[("id", "0"), ("destination", "/queue/foo"), ("ack", "client")],
                b"",
            ),
        ),
        (
            b"UNSUBSCRIBE\nid:0\n\n\0",
            frame(Command::Unsubscribe, &[("id", "0")], b""),
        ),
        (
            b"ACK\nid:12345\ntransaction:tx1\n\n\0",
            frame(Command::Ack, &[("id", "12345"), ("transaction", "tx1")], b""),
        ),
        (
            b"NACK\nid:12345\ntransaction:tx1\n\n\0",
            frame(Command::Nack, &[("id", "12345"), ("transaction", "tx1")], b""),
        ),
        (
            b"BEGIN\ntransaction:tx1\n\n\0",
            frame(Command::Begin, &[("transaction", "tx1")], b""),
        ),
        (
            b"COMMIT\ntransaction:tx1\n\n\0",
            frame(Command::Commit, &[("transaction", "tx1")], b""),
        ),
        (
            b"ABORT\ntransaction:tx1\n\n\0",
            frame(Command::Abort, &[("transaction", "tx1")], b""),
        ),
        (
            b"DISCONNECT\nreceipt:77\n\n\0",
            frame(Command::Disconnect, &[("receipt", "77")], b""),
        ),
        (
            b"RECEIPT\nreceipt-id:77\n\n\0",
            frame(Command::Receipt, &[("receipt-id", "77")], b""),
        ),
        (
            b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-type:text/plain\ncontent-length:13\n\nhello queue a\0",
            frame(
                Command::Message,
                &[
                    ("subscription", "0"),
                    ("message-id", "007"),
                    ("destination", "/queue/a"),
                    ("content-type", "text/plain"),
                    ("content-length", "13"),
                ],
                b"hello queue a",
            ),
        ),
        (
            b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:14\nmessage:malformed frame received\n\nThe message...\0",
            frame(
                Command::Error,
                &[
                    ("receipt-id", "message-12345"),
                    ("content-type", "text/plain"),
                    ("content-length", "14"),
                    ("message", "malformed frame received"),
                ],
                b"The message...",
            ),
        ),
    ];
    for (bytes, expected) in examples {
        assert_eq!(one(bytes, Version::V1_2), expected);
        assert_eq!(
            encoded(&expected, Version::V1_2),
            bytes,
            "{}",
            expected.command
        );
    }
}

#[test]
fn a_body_without_content_length_ends_at_the_first_nul_and_gets_one_when_encoded() {
    let f = one(
        b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\0",
        Version::V1_2,
    );
    assert_eq!(&f.body[..], b"hello queue a");
    assert_eq!(
        encoded(&f, Version::V1_2),
        b"SEND\ndestination:/queue/a\ncontent-type:text/plain\ncontent-length:13\n\nhello queue a\0"
    );
}

#[test]
fn a_binary_body_with_nuls_is_carried_by_content_length() {
    let body: Vec<u8> = (0..=255u8).chain([0, 0, 10, 13]).collect();
    let f = frame(Command::Message, &[("destination", "/topic/x")], &body);
    let bytes = encoded(&f, Version::V1_2);
    let back = one(&bytes, Version::V1_2);
    assert_eq!(&back.body[..], &body[..]);
    assert_eq!(back.header("content-length"), Some("260"));
}

#[test]
fn repeated_headers_keep_their_order_and_the_first_wins() {
    // The spec's example: the value of foo is World.
    let f = one(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0", Version::V1_2);
    assert_eq!(f.header("foo"), Some("World"));
    assert_eq!(f.headers.len(), 2);
    assert_eq!(
        encoded(&f, Version::V1_2),
        b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0"
    );
    // Only the first content-length counts too.
    let f = one(
        b"SEND\ncontent-length:2\ncontent-length:5\n\nab\0",
        Version::V1_2,
    );
    assert_eq!(&f.body[..], b"ab");
}

#[test]
fn crlf_line_ends_and_heartbeats_between_frames() {
    let mut buf = BytesMut::from(
        &b"\n\r\nSEND\r\ndestination:/queue/a\r\n\r\nhi\0\r\n\nDISCONNECT\n\n\0"[..],
    );
    let l = Limits::DEFAULT;
    assert_eq!(
        decode(&mut buf, Version::V1_2, &l).unwrap(),
        Some(Item::Heartbeat)
    );
    let Some(Item::Frame(send)) = decode(&mut buf, Version::V1_2, &l).unwrap() else {
        panic!("a SEND");
    };
    assert_eq!(send.header("destination"), Some("/queue/a"));
    assert_eq!(&send.body[..], b"hi");
    assert_eq!(
        decode(&mut buf, Version::V1_2, &l).unwrap(),
        Some(Item::Heartbeat)
    );
    let Some(Item::Frame(d)) = decode(&mut buf, Version::V1_2, &l).unwrap() else {
        panic!("a DISCONNECT");
    };
    assert_eq!(d.command, Command::Disconnect);
    assert!(buf.is_empty());
    assert_eq!(decode(&mut buf, Version::V1_2, &l).unwrap(), None);
}

#[test]
fn headers_are_escaped_as_each_version_says() {
    let f = frame(
        Command::Message,
        &[("a:b", "line1\nline2:x\\y"), ("cr", "a\rb")],
        b"",
    );
    let v12 = encoded(&f, Version::V1_2);
    assert_eq!(
        v12,
        b"MESSAGE\na\\cb:line1\\nline2\\cx\\\\y\ncr:a\\rb\n\n\0".to_vec()
    );
    assert_eq!(one(&v12, Version::V1_2), f);
    // 1.1 has no \r: that frame cannot be written, the rest can.
    assert!(f.encode(Version::V1_1, &mut Vec::new()).is_err());
    let f11 = frame(Command::Message, &[("a:b", "x\ny\\")], b"");
    let v11 = encoded(&f11, Version::V1_1);
    assert_eq!(v11, b"MESSAGE\na\\cb:x\\ny\\\\\n\n\0".to_vec());
    assert_eq!(one(&v11, Version::V1_1), f11);
    // 1.0 escapes nothing: backslashes are read and written as they are.
    let f10 = one(b"SEND\nkey:a\\nb\\\\c:d\n\n\0", Version::V1_0);
    assert_eq!(f10.header("key"), Some("a\\nb\\\\c:d"));
    assert_eq!(
        encoded(&f10, Version::V1_0),
        b"SEND\nkey:a\\nb\\\\c:d\n\n\0"
    );
}

#[test]
fn connect_and_connected_frames_are_never_escaped() {
    let f = one(b"CONNECT\nlogin:a\\b\npasscode:x:y\n\n\0", Version::V1_2);
    assert_eq!(f.header("login"), Some("a\\b"));
    assert_eq!(
        f.header("passcode"),
        Some("x:y"),
        "split at the first colon"
    );
    assert_eq!(
        encoded(&f, Version::V1_2),
        b"CONNECT\nlogin:a\\b\npasscode:x:y\n\n\0"
    );
    let connected = frame(Command::Connected, &[("server", "ferry\\1")], b"");
    assert_eq!(
        encoded(&connected, Version::V1_2),
        b"CONNECTED\nserver:ferry\\1\n\n\0"
    );
}
