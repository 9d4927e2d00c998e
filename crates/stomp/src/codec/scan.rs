//! [`check`]: whether a heart-beat or a whole frame is buffered, found without allocating, with
//! the [`Limits`] enforced on the bytes seen so far.

use super::command::Command;
use super::error::{shown, FrameError};
use super::limits::Limits;

/// What the start of a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Not enough bytes yet (and none over any limit).
    Incomplete,
    /// `len` bytes of heart-beat EOLs (LF or CR LF) before anything else.
    Heartbeat {
        /// Bytes to skip.
        len: usize,
    },
    /// A whole frame of `len` bytes, NUL included.
    Frame(FrameAt),
}

/// Where a whole frame's parts are, as offsets from the start of the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameAt {
    /// The frame's length, NUL included.
    pub len: usize,
    /// Where the body starts (after the blank line ending the headers).
    pub body_start: usize,
    /// The body's length.
    pub body_len: usize,
}

/// The header that gives the body's length.
const CONTENT_LENGTH: &[u8] = b"content-length:";

/// Looks at the start of `buf` (see [`Check`]). Errors as soon as the bytes show a limit
/// crossed, an unknown command (once its line is whole), a bad `content-length`, or a frame
/// whose announced body is not followed by NUL: a caller need never buffer more than a limit's
/// worth to learn that.
///
/// Scans from the start every time; a reader that calls it again as more bytes arrive uses a
/// [`Scanner`], which resumes where it stopped.
pub fn check(buf: &[u8], limits: &Limits) -> Result<Check, FrameError> {
    Scanner::default().check(buf, limits)
}

/// [`check`] that remembers how far it got in the frame at the start of the buffer, so that a
/// frame arriving in many reads is scanned once in all (not once per read: a body without
/// `content-length` would otherwise cost the square of its length). Call [`Scanner::reset`]
/// after taking a heart-beat or frame off the buffer, and give it the same buffer (grown at its
/// end) in between.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Scanner {
    /// Where the next header line starts; 0 before the command line.
    line_start: usize,
    /// Header lines seen.
    headers: usize,
    /// The first `content-length` seen.
    content_length: Option<usize>,
    /// Where the body starts, once the blank line was seen.
    body_start: Option<usize>,
    /// How far the body was searched for its NUL (no `content-length`).
    searched: usize,
}

impl Scanner {
    /// Forgets the frame scanned so far (it was taken off the buffer).
    pub fn reset(&mut self) {
        *self = Scanner::default();
    }

    /// [`check`], resumed where the last call on this buffer stopped.
    pub fn check(&mut self, buf: &[u8], limits: &Limits) -> Result<Check, FrameError> {
        if self.line_start == 0 {
            let heartbeat = eols(buf);
            if heartbeat > 0 {
                return Ok(Check::Heartbeat { len: heartbeat });
            }
            if buf == b"\r" {
                return Ok(Check::Incomplete); // the start of a CR LF heart-beat
            }
        }
        let body_start = match self.body_start {
            Some(at) => at,
            None => match self.scan_head(buf, limits)? {
                Some(at) => at,
                None => return Ok(Check::Incomplete),
            },
        };
        let body = buf.get(body_start..).unwrap_or_default();
        let body_len = match self.content_length {
            Some(n) => {
                if body.len() <= n {
                    return within_frame(body_start + n + 1, limits, Check::Incomplete);
                }
                if body.get(n) != Some(&0) {
                    return Err(FrameError::MissingNul(n));
                }
                n
            }
            None => {
                let window = body.get(..limits.max_body_bytes + 1).unwrap_or(body);
                let from = self.searched.min(window.len());
                match memchr::memchr(0, window.get(from..).unwrap_or_default()) {
                    Some(n) => from + n,
                    None if body.len() > limits.max_body_bytes => {
                        return Err(FrameError::BodyTooLarge {
                            limit: limits.max_body_bytes,
                        })
                    }
                    None => {
                        self.searched = window.len();
                        return within_frame(buf.len(), limits, Check::Incomplete);
                    }
                }
            }
        };
        let at = FrameAt {
            len: body_start + body_len + 1,
            body_start,
            body_len,
        };
        within_frame(at.len, limits, Check::Frame(at))
    }

    /// Reads the command and header lines that are whole; the body's start once the blank
    /// line is there.
    fn scan_head(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, FrameError> {
        loop {
            let line_start = self.line_start;
            if line_start > limits.max_frame_bytes {
                return Err(FrameError::FrameTooLarge {
                    limit: limits.max_frame_bytes,
                });
            }
            let rest = buf.get(line_start..).unwrap_or_default();
            let window = rest.get(..limits.max_header_line + 2).unwrap_or(rest);
            let Some(lf) = memchr::memchr(b'\n', window) else {
                if rest.len() > limits.max_header_line + 1 {
                    return Err(FrameError::HeaderLineTooLong {
                        limit: limits.max_header_line,
                    });
                }
                return Ok(None);
            };
            let raw = window.get(..lf).unwrap_or_default();
            let line = raw.strip_suffix(b"\r").unwrap_or(raw);
            if line.len() > limits.max_header_line {
                return Err(FrameError::HeaderLineTooLong {
                    limit: limits.max_header_line,
                });
            }
            let next = line_start + lf + 1;
            if line_start == 0 {
                if Command::parse(line).is_none() {
                    return Err(FrameError::UnknownCommand(shown(line)));
                }
            } else if line.is_empty() {
                self.body_start = Some(next);
                return Ok(Some(next));
            } else {
                self.headers += 1;
                if self.headers > limits.max_headers {
                    return Err(FrameError::TooManyHeaders {
                        limit: limits.max_headers,
                    });
                }
                if self.content_length.is_none() {
                    if let Some(value) = line.strip_prefix(CONTENT_LENGTH) {
                        self.content_length = Some(parse_length(value, limits)?);
                    }
                }
            }
            self.line_start = next;
        }
    }
}

/// `ok` unless `len` bytes are over the frame limit.
fn within_frame(len: usize, limits: &Limits, ok: Check) -> Result<Check, FrameError> {
    if len > limits.max_frame_bytes {
        return Err(FrameError::FrameTooLarge {
            limit: limits.max_frame_bytes,
        });
    }
    Ok(ok)
}

/// A content-length value: decimal digits, at most the body limit.
fn parse_length(value: &[u8], limits: &Limits) -> Result<usize, FrameError> {
    if value.is_empty() || value.len() > 20 || !value.iter().all(u8::is_ascii_digit) {
        return Err(FrameError::InvalidContentLength(shown(value)));
    }
    let n = value
        .iter()
        .try_fold(0usize, |n, d| {
            n.checked_mul(10)?.checked_add(usize::from(d - b'0'))
        })
        .ok_or_else(|| FrameError::InvalidContentLength(shown(value)))?;
    if n > limits.max_body_bytes {
        return Err(FrameError::BodyTooLarge {
            limit: limits.max_body_bytes,
        });
    }
    Ok(n)
}

/// Length of the whole EOLs (LF, CR LF) at the start of `buf`.
fn eols(buf: &[u8]) -> usize {
    let mut i = 0;
    loop {
        match (buf.get(i), buf.get(i + 1)) {
            (Some(b'\n'), _) => i += 1,
            (Some(b'\r'), Some(b'\n')) => i += 2,
            _ => return i,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_scan_finds_what_a_fresh_one_finds() {
        let l = Limits::DEFAULT;
        let frames: [&[u8]; 3] = [
            b"SEND\ndestination:/queue/a\n\nhello there\0",
            b"SEND\ncontent-length:3\nx:y\n\na\0b\0",
            b"\r\n\nSUBSCRIBE\nid:1\n\n\0",
        ];
        for frame in frames {
            let mut scanner = Scanner::default();
            for cut in 0..=frame.len() {
                let part = &frame[..cut];
                assert_eq!(
                    scanner.check(part, &l),
                    check(part, &l),
                    "at {cut} of {frame:?}"
                );
            }
        }
    }

    #[test]
    fn heartbeats_frames_and_incomplete_input_are_told_apart() {
        let l = Limits::DEFAULT;
        assert_eq!(check(b"", &l), Ok(Check::Incomplete));
        assert_eq!(check(b"\r", &l), Ok(Check::Incomplete));
        assert_eq!(check(b"\n\r\nSEND", &l), Ok(Check::Heartbeat { len: 3 }));
        assert_eq!(check(b"\r\n\r", &l), Ok(Check::Heartbeat { len: 2 }));
        let frame = b"SEND\ndestination:/queue/a\n\nhi\0\n";
        assert_eq!(
            check(frame, &l),
            Ok(Check::Frame(FrameAt {
                len: 30,
                body_start: 27,
                body_len: 2
            }))
        );
        let with_length = b"SEND\r\ncontent-length:3\r\n\r\na\0b\0";
        assert_eq!(
            check(with_length, &l),
            Ok(Check::Frame(FrameAt {
                len: with_length.len(),
                body_start: 26,
                body_len: 3
            }))
        );
    }
}
