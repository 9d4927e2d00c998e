//! Header escaping: what each version turns into which backslash sequence.
//!
//! | character | 1.2 | 1.1 | 1.0, and CONNECT/STOMP/CONNECTED in every version |
//! |---|---|---|---|
//! | CR | `\r` | (cannot be written) | (cannot be written) |
//! | LF | `\n` | `\n` | (cannot be written) |
//! | `:` | `\c` | `\c` | as is in values, not in names |
//! | `\` | `\\` | `\\` | as is |

use super::error::{shown, FrameError};
use super::frame::Version;

/// How the header text of one frame is escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escaping {
    /// No escaping (1.0; CONNECT, STOMP and CONNECTED frames).
    None,
    /// STOMP 1.1's: `\n`, `\c`, `\\`.
    V1_1,
    /// STOMP 1.2's: `\r`, `\n`, `\c`, `\\`.
    V1_2,
}

impl Escaping {
    /// The escaping of a frame of a command that escapes (or not: `escapes`) in `version`.
    pub fn of(version: Version, escapes: bool) -> Escaping {
        match version {
            _ if !escapes => Escaping::None,
            Version::V1_0 => Escaping::None,
            Version::V1_1 => Escaping::V1_1,
            Version::V1_2 => Escaping::V1_2,
        }
    }

    /// The escape sequence for `b`, if this escaping has one.
    fn sequence(self, b: u8) -> Option<&'static [u8]> {
        match (self, b) {
            (Escaping::None, _) => None,
            (Escaping::V1_2, b'\r') => Some(b"\\r"),
            (_, b'\n') => Some(b"\\n"),
            (_, b':') => Some(b"\\c"),
            (_, b'\\') => Some(b"\\\\"),
            _ => None,
        }
    }

    /// Whether `text` can be written as a header name (`name`) or value with this escaping:
    /// every line break must have an escape, and a name's colons too.
    pub fn can_write(self, text: &str, name: bool) -> bool {
        text.bytes().all(|b| match b {
            b'\r' | b'\n' => self.sequence(b).is_some(),
            b':' if name => self.sequence(b).is_some(),
            _ => true,
        })
    }

    /// Bytes [`Escaping::write`] writes for `text`.
    pub fn len(self, text: &str) -> usize {
        text.bytes()
            .map(|b| self.sequence(b).map_or(1, <[u8]>::len))
            .sum()
    }

    /// Appends `text`, escaped, to `out` (a `Vec<u8>` or a `BytesMut`).
    pub fn write(self, text: &str, out: &mut impl bytes::BufMut) {
        if self == Escaping::None || !text.bytes().any(|b| self.sequence(b).is_some()) {
            out.put_slice(text.as_bytes());
            return;
        }
        for b in text.bytes() {
            match self.sequence(b) {
                Some(s) => out.put_slice(s),
                None => out.put_u8(b),
            }
        }
    }

    /// `raw` unescaped, as UTF-8 text.
    pub fn read(self, raw: &[u8]) -> Result<String, FrameError> {
        if self == Escaping::None || memchr::memchr(b'\\', raw).is_none() {
            return String::from_utf8(raw.to_vec()).map_err(|_| FrameError::InvalidUtf8);
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut bytes = raw.iter().copied();
        while let Some(b) = bytes.next() {
            if b != b'\\' {
                out.push(b);
                continue;
            }
            let next = bytes.next();
            let c = match (self, next) {
                (Escaping::V1_2, Some(b'r')) => b'\r',
                (_, Some(b'n')) => b'\n',
                (_, Some(b'c')) => b':',
                (_, Some(b'\\')) => b'\\',
                (_, Some(other)) => return Err(FrameError::InvalidEscape(shown(&[b'\\', other]))),
                (_, None) => return Err(FrameError::InvalidEscape("\\".into())),
            };
            out.push(c);
        }
        String::from_utf8(out).map_err(|_| FrameError::InvalidUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_escapes_what_it_defines() {
        let text = "a:b\\c\nd\re";
        let mut out = Vec::new();
        Escaping::V1_2.write(text, &mut out);
        assert_eq!(out, b"a\\cb\\\\c\\nd\\re");
        assert_eq!(Escaping::V1_2.len(text), out.len());
        assert_eq!(Escaping::V1_2.read(&out).unwrap(), text);
        assert!(!Escaping::V1_1.can_write(text, false), "1.1 has no \\r");
        assert!(Escaping::V1_1.can_write("a:b\nc", true));
        assert!(!Escaping::None.can_write("a\nb", false));
        assert!(Escaping::None.can_write("a:b", false) && !Escaping::None.can_write("a:b", true));
        assert_eq!(
            Escaping::V1_1.read(b"a\\r").unwrap_err(),
            FrameError::InvalidEscape("\\r".into()),
            "\\r is undefined in 1.1"
        );
        assert_eq!(
            Escaping::None.read(b"a\\t").unwrap(),
            "a\\t",
            "1.0 reads backslashes as is"
        );
        assert_eq!(
            Escaping::V1_2.read(b"tail\\").unwrap_err(),
            FrameError::InvalidEscape("\\".into())
        );
        assert_eq!(
            Escaping::V1_2.read(b"\xff").unwrap_err(),
            FrameError::InvalidUtf8
        );
    }
}
