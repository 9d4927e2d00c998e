//! [`decode`]: takes the next heart-beat or frame off a buffer and parses it.

use bytes::BytesMut;

use super::command::Command;
use super::error::{shown, FrameError};
use super::escape::Escaping;
use super::frame::{Frame, Version};
use super::limits::Limits;
use super::scan::{Check, FrameAt, Scanner};

/// What [`decode`] took off the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// One or more heart-beat EOLs.
    Heartbeat,
    /// A frame.
    Frame(Frame),
}

/// Takes the next heart-beat or whole frame off the front of `buf` and parses it with the
/// header escaping of `version`; `Ok(None)` when more bytes are needed (nothing is taken). The
/// frame's body shares `buf`'s allocation. On an error the connection is beyond repair (what
/// was taken is not put back).
pub fn decode(
    buf: &mut BytesMut,
    version: Version,
    limits: &Limits,
) -> Result<Option<Item>, FrameError> {
    decode_with(&mut Scanner::default(), buf, version, limits)
}

/// [`decode`] for a reader that calls it again as bytes arrive: `scanner` remembers how far
/// the frame at the front of `buf` was scanned, so each byte is looked at once.
pub fn decode_with(
    scanner: &mut Scanner,
    buf: &mut BytesMut,
    version: Version,
    limits: &Limits,
) -> Result<Option<Item>, FrameError> {
    match scanner.check(buf, limits)? {
        Check::Incomplete => Ok(None),
        Check::Heartbeat { len } => {
            scanner.reset();
            let _ = buf.split_to(len);
            Ok(Some(Item::Heartbeat))
        }
        Check::Frame(at) => {
            scanner.reset();
            let bytes = buf.split_to(at.len).freeze();
            let frame = parse(&bytes, at, version)?;
            let body = bytes.slice(at.body_start..at.body_start + at.body_len);
            if !body.is_empty() && !frame.command.allows_body() {
                return Err(FrameError::BodyNotAllowed(frame.command));
            }
            Ok(Some(Item::Frame(Frame { body, ..frame })))
        }
    }
}

/// The command and headers of the whole frame `bytes` laid out as `at` says (body left empty).
fn parse(bytes: &[u8], at: FrameAt, version: Version) -> Result<Frame, FrameError> {
    // The blank line's LF is the byte before the body; the lines before it hold the command
    // and the headers.
    let head = bytes
        .get(..at.body_start.saturating_sub(1))
        .unwrap_or_default();
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let first = lines.next().unwrap_or_default();
    let command = Command::parse(first).ok_or_else(|| FrameError::UnknownCommand(shown(first)))?;
    let escaping = Escaping::of(version, command.escapes_headers());
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let colon = memchr::memchr(b':', line)
            .filter(|&i| i > 0)
            .ok_or_else(|| FrameError::MalformedHeader(shown(line)))?;
        let (name, value) = line.split_at(colon);
        let value = value.get(1..).unwrap_or_default();
        headers.push((escaping.read(name)?, escaping.read(value)?));
    }
    Ok(Frame {
        command,
        headers,
        body: bytes::Bytes::new(),
    })
}
