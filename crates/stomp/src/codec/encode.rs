//! Writing frames: [`Frame::encode`] and its exact [`Frame::encoded_len`].

use super::error::EncodeError;
use super::escape::Escaping;
use super::frame::{Frame, Version};

/// The header the encoder adds to a frame with a body that does not name one.
const CONTENT_LENGTH: &str = "content-length";

impl Frame {
    /// Checks that the frame can be written in `version`: every header representable with the
    /// frame's escaping, a `content-length` (the first, if any) equal to the body's length, and
    /// a body only on SEND, MESSAGE and ERROR.
    pub fn check_encodable(&self, version: Version) -> Result<(), EncodeError> {
        if !self.body.is_empty() && !self.command.allows_body() {
            return Err(EncodeError::BodyNotAllowed(self.command));
        }
        let escaping = self.escaping(version);
        for (name, value) in &self.headers {
            if !escaping.can_write(name, true) || !escaping.can_write(value, false) {
                return Err(EncodeError::Unrepresentable(name.clone()));
            }
        }
        if let Some(given) = self.header(CONTENT_LENGTH) {
            if given.parse::<usize>().ok() != Some(self.body.len()) {
                return Err(EncodeError::ContentLength {
                    given: given.to_owned(),
                    actual: self.body.len(),
                });
            }
        }
        Ok(())
    }

    /// Exactly the bytes [`Frame::encode`] appends for this frame in `version` (when it can be
    /// written at all).
    pub fn encoded_len(&self, version: Version) -> usize {
        let escaping = self.escaping(version);
        let headers: usize = self
            .headers
            .iter()
            .map(|(n, v)| escaping.len(n) + 1 + escaping.len(v) + 1)
            .sum();
        let added = match self.added_length() {
            Some(n) => CONTENT_LENGTH.len() + 1 + decimal_len(n) + 1,
            None => 0,
        };
        self.command.as_str().len() + 1 + headers + added + 1 + self.body.len() + 1
    }

    /// Appends the frame, as `version` writes it, to `out`: command, headers (escaped as the
    /// version and command say) with a `content-length` added when the body is not empty and
    /// no header names one, a blank line, the body and NUL. LF line ends.
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.check_encodable(version)?;
        let escaping = self.escaping(version);
        out.reserve(self.encoded_len(version));
        out.extend_from_slice(self.command.as_str().as_bytes());
        out.push(b'\n');
        for (name, value) in &self.headers {
            escaping.write(name, out);
            out.push(b':');
            escaping.write(value, out);
            out.push(b'\n');
        }
        if let Some(n) = self.added_length() {
            out.extend_from_slice(CONTENT_LENGTH.as_bytes());
            out.push(b':');
            out.extend_from_slice(n.to_string().as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
        out.extend_from_slice(&self.body);
        out.push(0);
        Ok(())
    }

    fn escaping(&self, version: Version) -> Escaping {
        Escaping::of(version, self.command.escapes_headers())
    }

    /// The body length to announce in an added `content-length`, if one is added.
    fn added_length(&self) -> Option<usize> {
        (!self.body.is_empty() && self.header(CONTENT_LENGTH).is_none()).then_some(self.body.len())
    }
}

/// A heart-beat, as sent between frames.
pub const HEARTBEAT: &[u8] = b"\n";

/// Digits of `n` in decimal.
fn decimal_len(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_lengths() {
        for n in [0usize, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
        }
    }
}
