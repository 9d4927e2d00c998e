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
pub fn check(buf: &[u8], limits: &Limits) -> Result<Check, FrameError> {
    let heartbeat = eols(buf);
    if heartbeat > 0 {
        return Ok(Check::Heartbeat { len: heartbeat });
    }
    if buf == b"\r" {
        return Ok(Check::Incomplete); // the start of a CR LF heart-beat
    }
    let mut line_start = 0;
    let mut headers = 0usize;
    let mut content_length: Option<usize> = None;
    let body_start = loop {
        if line_start > limits.max_frame_bytes {
            return Err(FrameError::FrameTooLarge {
                limit: limits.max_frame_bytes,
            });
        }
        let rest = buf.get(line_start..).unwrap_or_default();
        // A line may take its limit plus a CR before its LF.
        let window = rest.get(..limits.max_header_line + 2).unwrap_or(rest);
        let Some(lf) = memchr::memchr(b'\n', window) else {
            if rest.len() > limits.max_header_line + 1 {
                return Err(FrameError::HeaderLineTooLong {
                    limit: limits.max_header_line,
                });
            }
            return Ok(Check::Incomplete);
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
            break next;
        } else {
            headers += 1;
            if headers > limits.max_headers {
                return Err(FrameError::TooManyHeaders {
                    limit: limits.max_headers,
                });
            }
            if content_length.is_none() {
                // Only the first content-length counts, as for every repeated header.
                if let Some(value) = line.strip_prefix(CONTENT_LENGTH) {
                    content_length = Some(parse_length(value, limits)?);
                }
            }
        }
        line_start = next;
    };
    let body = buf.get(body_start..).unwrap_or_default();
    let body_len = match content_length {
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
            match memchr::memchr(0, window) {
                Some(n) => n,
                None if body.len() > limits.max_body_bytes => {
                    return Err(FrameError::BodyTooLarge {
                        limit: limits.max_body_bytes,
                    })
                }
                None => return within_frame(buf.len(), limits, Check::Incomplete),
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
