//! Every refusal of the codec, each triggered by the input it names, and each limit enforced
//! as soon as the bytes show it is crossed (before the rest of the frame is buffered).

use bytes::{Bytes, BytesMut};
use ferry_stomp::codec::{check, decode, Command, EncodeError, Frame, FrameError, Limits, Version};

const LIMITS: Limits = Limits {
    max_frame_bytes: 200,
    max_headers: 3,
    max_header_line: 40,
    max_body_bytes: 100,
};

fn decode_err(bytes: &[u8], version: Version) -> FrameError {
    let mut buf = BytesMut::from(bytes);
    decode(&mut buf, version, &LIMITS).expect_err("an error")
}

#[test]
fn a_header_line_over_the_limit_is_refused_before_its_end_arrives() {
    let mut long = b"SEND\nx:".to_vec();
    long.extend(std::iter::repeat_n(b'a', 40));
    // No LF yet: the line is already longer than the limit allows.
    assert_eq!(
        check(&long, &LIMITS),
        Err(FrameError::HeaderLineTooLong { limit: 40 })
    );
    let endless_command = vec![b'S'; 60];
    assert_eq!(
        check(&endless_command, &LIMITS),
        Err(FrameError::HeaderLineTooLong { limit: 40 })
    );
    let mut at_limit = b"SEND\nx:".to_vec();
    at_limit.extend(std::iter::repeat_n(b'a', 38));
    at_limit.extend(b"\r\n\n\0");
    assert!(
        check(&at_limit, &LIMITS).is_ok(),
        "40 bytes and a CR LF fit"
    );
}

#[test]
fn too_many_headers_are_refused_before_the_blank_line() {
    assert_eq!(
        check(b"SEND\na:1\nb:2\nc:3\nd:4\n", &LIMITS),
        Err(FrameError::TooManyHeaders { limit: 3 })
    );
    assert!(check(b"SEND\na:1\nb:2\nc:3\n\n\0", &LIMITS).is_ok());
}

#[test]
fn a_body_over_the_limit_is_refused_when_announced_or_when_seen() {
    assert_eq!(
        check(b"SEND\ncontent-length:101\n", &LIMITS),
        Err(FrameError::BodyTooLarge { limit: 100 }),
        "announced: refused before any body byte arrives"
    );
    let mut unterminated = b"SEND\n\n".to_vec();
    unterminated.extend(std::iter::repeat_n(b'x', 101));
    assert_eq!(
        check(&unterminated, &LIMITS),
        Err(FrameError::BodyTooLarge { limit: 100 }),
        "no NUL within the limit"
    );
    unterminated.truncate(106);
    assert_eq!(
        check(&unterminated, &LIMITS),
        Ok(ferry_stomp::codec::Check::Incomplete)
    );
}

#[test]
fn a_frame_over_the_frame_limit_is_refused() {
    let mut headers = b"SEND\n".to_vec();
    for _ in 0..3 {
        headers.extend(b"h:");
        headers.extend(std::iter::repeat_n(b'v', 35));
        headers.push(b'\n');
    }
    headers.extend(b"\n");
    // 123 bytes of headers and a 100-byte body do not fit 200 bytes.
    let mut f = headers.clone();
    f.extend(std::iter::repeat_n(b'b', 90));
    assert_eq!(
        check(&f, &LIMITS),
        Err(FrameError::FrameTooLarge { limit: 200 })
    );
    let limits = Limits {
        max_headers: 100,
        ..LIMITS
    };
    let many = b"SEND\n"
        .iter()
        .copied()
        .chain(b"h:1\n".repeat(60))
        .collect::<Vec<_>>();
    assert_eq!(
        check(&many, &limits),
        Err(FrameError::FrameTooLarge { limit: 200 }),
        "headers alone over the frame limit"
    );
}

#[test]
fn an_unknown_command_is_refused_once_its_line_is_whole() {
    assert_eq!(
        check(b"GET / HTTP/1.1", &LIMITS),
        Ok(ferry_stomp::codec::Check::Incomplete)
    );
    assert_eq!(
        check(b"GET / HTTP/1.1\r\n", &LIMITS),
        Err(FrameError::UnknownCommand("GET / HTTP/1.1".into()))
    );
    assert_eq!(
        decode_err(b"send\n\n\0", Version::V1_2),
        FrameError::UnknownCommand("send".into()),
        "commands are case-sensitive"
    );
}

#[test]
fn malformed_headers_escapes_and_text_are_refused() {
    assert_eq!(
        decode_err(b"SEND\nno colon\n\n\0", Version::V1_2),
        FrameError::MalformedHeader("no colon".into())
    );
    assert_eq!(
        decode_err(b"SEND\n:empty name\n\n\0", Version::V1_2),
        FrameError::MalformedHeader(":empty name".into())
    );
    assert_eq!(
        decode_err(b"SEND\nk:a\\tb\n\n\0", Version::V1_2),
        FrameError::InvalidEscape("\\t".into())
    );
    assert_eq!(
        decode_err(b"SEND\nk:a\\rb\n\n\0", Version::V1_1),
        FrameError::InvalidEscape("\\r".into())
    );
    assert_eq!(
        decode_err(b"SEND\nk:\xff\xfe\n\n\0", Version::V1_0),
        FrameError::InvalidUtf8
    );
}

#[test]
fn content_length_must_be_a_number_followed_by_nul() {
    for bad in ["-1", "", "1x", " 2", "99999999999999999999999"] {
        let f = format!("SEND\ncontent-length:{bad}\n\n\0");
        assert!(
            matches!(
                check(f.as_bytes(), &LIMITS),
                Err(FrameError::InvalidContentLength(_))
            ),
            "{bad}"
        );
    }
    assert_eq!(
        check(b"SEND\ncontent-length:2\n\nabc\0", &LIMITS),
        Err(FrameError::MissingNul(2))
    );
}

#[test]
fn a_body_is_refused_on_frames_that_must_not_have_one() {
    assert_eq!(
        decode_err(b"SUBSCRIBE\nid:1\n\nbody\0", Version::V1_2),
        FrameError::BodyNotAllowed(Command::Subscribe)
    );
    let f = Frame::new(Command::Ack).body_with(Bytes::from_static(b"x"));
    assert_eq!(
        f.encode(Version::V1_2, &mut Vec::new()),
        Err(EncodeError::BodyNotAllowed(Command::Ack))
    );
}

#[test]
fn frames_that_cannot_be_written_are_refused_by_the_encoder() {
    let f = Frame::new(Command::Connected).header_with("server", "a\nb");
    assert_eq!(
        f.encode(Version::V1_2, &mut Vec::new()),
        Err(EncodeError::Unrepresentable("server".into())),
        "CONNECTED is never escaped"
    );
    let f = Frame::new(Command::Send).header_with("a:b", "c");
    assert_eq!(
        f.encode(Version::V1_0, &mut Vec::new()),
        Err(EncodeError::Unrepresentable("a:b".into()))
    );
    assert!(f.encode(Version::V1_2, &mut Vec::new()).is_ok());
    let f = Frame::new(Command::Send)
        .header_with("content-length", "3")
        .body_with(Bytes::from_static(b"four"));
    assert_eq!(
        f.encode(Version::V1_2, &mut Vec::new()),
        Err(EncodeError::ContentLength {
            given: "3".into(),
            actual: 4
        })
    );
}
