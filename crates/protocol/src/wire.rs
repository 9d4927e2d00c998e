//! Checked little-endian field readers and writers. Nothing here can panic on peer bytes, and no
//! count read from the peer can make us allocate more than the bytes that are actually there.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::name::Name;
use crate::types::{Properties, PropertyValue};

/// Why bytes from a peer could not be decoded. Any of these closes the connection, except
/// [`WireError::UnknownKind`], which the broker answers with `UnknownRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    /// The frame ended before a field did.
    #[error("frame truncated: needed {needed} more bytes")]
    Truncated {
        /// Bytes missing.
        needed: usize,
    },
    /// The length prefix is above the limit.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    FrameTooLarge {
        /// Announced length (header included).
        len: u64,
        /// The limit.
        max: u32,
    },
    /// The length prefix is below the header size.
    #[error("frame length {0} is shorter than the header")]
    FrameTooShort(u32),
    /// The frame kind is not one this side knows.
    #[error("unknown frame kind {0:#06x}")]
    UnknownKind(u16),
    /// A field holds a value outside its domain.
    #[error("invalid {field}: {value}")]
    InvalidValue {
        /// The field.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A string field is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
    /// A count announces more elements than the remaining bytes can hold.
    #[error("{field} count {count} exceeds the {remaining} bytes left")]
    CountTooLarge {
        /// The field.
        field: &'static str,
        /// Announced count.
        count: u64,
        /// Bytes left in the frame.
        remaining: usize,
    },
    /// Bytes left over after the last field.
    #[error("{0} trailing bytes after the last field")]
    TrailingBytes(usize),
}

/// A cursor over one frame's payload. Byte fields are zero-copy slices of the frame.
pub struct Reader<'a> {
    buf: &'a Bytes,
    /// `buf` up to where the payload ends (all of it, unless reading a [`Reader::window`]):
    /// what `take` reads from, with one bounds check.
    data: &'a [u8],
    pos: usize,
}

/// A run of fixed-size fields read by [`Reader::fixed`], handed out in order. The run's size is
/// a constant of the code that reads it, so a field past its end is that code's mistake, not
/// the peer's: it reads as zero (and the decoder's tests catch it), never as a panic.
pub struct Fixed<'a, const N: usize> {
    /// The run's `N` bytes, read where they lie: copying them to the stack first made each
    /// unaligned field a load across two earlier stores, which the CPU cannot forward (a
    /// stall per field, the largest cost of decoding a delivery).
    bytes: &'a [u8],
    pos: usize,
}

impl<const N: usize> Fixed<'_, N> {
    fn next<const K: usize>(&mut self) -> [u8; K] {
        let mut a = [0u8; K];
        if let Some(s) = self.bytes.get(self.pos..self.pos + K) {
            a.copy_from_slice(s);
        }
        self.pos += K;
        a
    }
    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        let [b] = self.next::<1>();
        b
    }
    /// The next little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.next())
    }
    /// The next little-endian u64.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.next())
    }
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a Bytes) -> Self {
        Reader {
            buf,
            data: buf,
            pos: 0,
        }
    }

    /// Reads the payload at `range` of `buf` (one frame of several cut from a stream at once),
    /// as [`Reader::new`] reads a payload of its own; byte fields are slices of `buf`. A range
    /// reaching past `buf` is cut at its end.
    pub fn window(buf: &'a Bytes, range: std::ops::Range<usize>) -> Self {
        let data = buf.get(..range.end).unwrap_or(buf);
        Reader {
            buf,
            data,
            pos: range.start.min(data.len()),
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(WireError::TrailingBytes(n)),
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(WireError::Truncated { needed: n })?;
        match self.data.get(self.pos..end) {
            Some(s) => {
                self.pos = end;
                Ok(s)
            }
            None => Err(WireError::Truncated {
                needed: end - self.data.len().min(end),
            }),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A run of neighbouring fixed-size fields, `N` bytes in all, taken with one bounds check
    /// instead of one per field; read the fields from it in order with [`Fixed`].
    pub fn fixed<const N: usize>(&mut self) -> Result<Fixed<'a, N>, WireError> {
        Ok(Fixed {
            bytes: self.take(N)?,
            pos: 0,
        })
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }
    /// Little-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Little-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Little-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// Little-endian i64.
    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// Little-endian IEEE-754 f64.
    pub fn f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    /// A byte that must be 0 or 1.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(WireError::InvalidValue {
                field,
                value: u64::from(v),
            }),
        }
    }
    /// The next string's text: u16 length, then UTF-8 bytes, checked unless they are the bytes
    /// of `prev` (then `None`, and the caller reuses `prev`): a batch names the same topic in
    /// every message, and the check costs more than comparing.
    fn text_unless(
        &mut self,
        field: &'static str,
        prev: Option<&str>,
    ) -> Result<Option<&'a str>, WireError> {
        let len = usize::from(self.u16()?);
        let bytes = self.take(len)?;
        if prev.is_some_and(|p| p.as_bytes() == bytes) {
            return Ok(None);
        }
        std::str::from_utf8(bytes)
            .map(Some)
            .map_err(|_| WireError::InvalidUtf8(field))
    }
    /// A string: u16 length, then UTF-8 bytes.
    pub fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        Ok(self
            .text_unless(field, None)?
            .unwrap_or_default()
            .to_owned())
    }
    /// A string read as a [`Name`]: when its bytes equal `prev`'s, a clone of `prev` (no
    /// allocation and no UTF-8 check); otherwise checked like [`Reader::string`].
    pub fn name_like(
        &mut self,
        field: &'static str,
        prev: Option<&Name>,
    ) -> Result<Name, WireError> {
        Ok(
            match (self.text_unless(field, prev.map(Name::as_str))?, prev) {
                (Some(text), _) => Name::from(text),
                (None, Some(p)) => p.clone(),
                // `text_unless` gives `None` only for a `prev`.
                (None, None) => Name::default(),
            },
        )
    }
    /// An optional string: a presence byte (0 or 1), then the string if present.
    pub fn opt_string(&mut self, field: &'static str) -> Result<Option<String>, WireError> {
        if self.bool(field)? {
            Ok(Some(self.string(field)?))
        } else {
            Ok(None)
        }
    }
    /// A byte string: u32 length, then the bytes (a zero-copy slice of the frame).
    #[inline]
    pub fn bytes(&mut self) -> Result<Bytes, WireError> {
        let at = self.bytes_range()?;
        Ok(self.buf.slice(at))
    }
    /// The bytes at `at` in the buffer read (a range [`Reader::bytes_range`] gave), shared
    /// with it; empty for a range outside it.
    pub fn slice(&self, at: std::ops::Range<usize>) -> Bytes {
        if at.start <= at.end && at.end <= self.buf.len() {
            self.buf.slice(at)
        } else {
            Bytes::new()
        }
    }
    /// A byte string read as [`Reader::bytes`] reads it, given as its range in the buffer
    /// read (the one given to [`Reader::new`] or [`Reader::window`]) rather than as a slice of
    /// it: no reference to the buffer is taken, for a reader that keeps the buffer and
    /// hands out slices of it itself (a reference per body, taken on one thread and dropped
    /// on another, costs more than the rest of decoding a small delivery).
    #[inline]
    pub fn bytes_range(&mut self) -> Result<std::ops::Range<usize>, WireError> {
        let len = self.u32()? as usize;
        let start = self.pos;
        self.take(len)?;
        Ok(start..start + len)
    }
    /// A u16 element count, checked against the bytes left: each element takes at least
    /// `min_elem_bytes`, so a hostile count cannot force a large allocation.
    pub fn count16(
        &mut self,
        field: &'static str,
        min_elem_bytes: usize,
    ) -> Result<usize, WireError> {
        let n = u64::from(self.u16()?);
        self.check_count(field, n, min_elem_bytes)
    }
    /// A u32 element count, checked like [`Reader::count16`].
    pub fn count32(
        &mut self,
        field: &'static str,
        min_elem_bytes: usize,
    ) -> Result<usize, WireError> {
        let n = u64::from(self.u32()?);
        self.check_count(field, n, min_elem_bytes)
    }
    fn check_count(
        &self,
        field: &'static str,
        n: u64,
        min_elem_bytes: usize,
    ) -> Result<usize, WireError> {
        let need = n.saturating_mul(min_elem_bytes.max(1) as u64);
        if need > self.remaining() as u64 {
            return Err(WireError::CountTooLarge {
                field,
                count: n,
                remaining: self.remaining(),
            });
        }
        Ok(n as usize)
    }
    /// Message properties: u16 count, then per property a name, a type tag and a value.
    pub fn properties(&mut self) -> Result<Properties, WireError> {
        // name length (2) + tag (1) + smallest value (1)
        let n = self.count16("properties", 4)?;
        let mut props = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.string("property name")?;
            let value = match self.u8()? {
                0 => PropertyValue::Bool(self.bool("property value")?),
                1 => PropertyValue::Int(self.i64()?),
                2 => PropertyValue::Float(self.f64()?),
                3 => PropertyValue::Str(self.string("property value")?),
                t => {
                    return Err(WireError::InvalidValue {
                        field: "property type",
                        value: u64::from(t),
                    })
                }
            };
            props.push((name, value));
        }
        Ok(props.into())
    }
    /// A list of strings: u16 count, then the strings.
    pub fn strings(&mut self, field: &'static str) -> Result<Vec<String>, WireError> {
        let n = self.count16(field, 2)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.string(field)?);
        }
        Ok(v)
    }
    /// A list of u64: u32 count, then the values.
    pub fn u64s(&mut self, field: &'static str) -> Result<Vec<u64>, WireError> {
        let n = self.count32(field, 8)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.u64()?);
        }
        Ok(v)
    }
}

/// The longest string a string field can carry, in bytes (its length prefix is a u16).
/// [`put_string`] cuts longer strings, so senders check user-supplied text against this first.
pub const MAX_STRING_BYTES: usize = u16::MAX as usize;

/// The part of `s` that a string field carries: all of it, or the longest prefix of at most
/// [`MAX_STRING_BYTES`] that ends on a character boundary.
pub fn fitting(s: &str) -> &str {
    let mut end = s.len().min(MAX_STRING_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// Writes a string: u16 length, then UTF-8 bytes. Strings longer than 65535 bytes are cut at
/// the last character boundary that fits (names are far shorter; only error texts can be long).
pub fn put_string(out: &mut BytesMut, s: &str) {
    let s = fitting(s);
    out.put_u16_le(s.len() as u16);
    out.put_slice(s.as_bytes());
}

/// Writes an optional string: presence byte, then the string.
pub fn put_opt_string(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => {
            out.put_u8(1);
            put_string(out, s);
        }
        None => out.put_u8(0),
    }
}

/// Writes a byte string: u32 length, then the bytes.
pub fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_u32_le(b.len() as u32);
    out.put_slice(b);
}

/// Writes a bool as one byte.
pub fn put_bool(out: &mut BytesMut, b: bool) {
    out.put_u8(u8::from(b));
}

/// Writes properties: u16 count, then name, type tag and value for each.
pub fn put_properties(out: &mut BytesMut, props: &Properties) {
    out.put_u16_le(props.len() as u16);
    for (name, value) in props {
        put_string(out, name);
        match value {
            PropertyValue::Bool(b) => {
                out.put_u8(0);
                put_bool(out, *b);
            }
            PropertyValue::Int(i) => {
                out.put_u8(1);
                out.put_i64_le(*i);
            }
            PropertyValue::Float(f) => {
                out.put_u8(2);
                out.put_f64_le(*f);
            }
            PropertyValue::Str(s) => {
                out.put_u8(3);
                put_string(out, s);
            }
        }
    }
}

/// Writes a list of strings: u16 count, then the strings.
pub fn put_strings(out: &mut BytesMut, v: &[String]) {
    out.put_u16_le(v.len() as u16);
    for s in v {
        put_string(out, s);
    }
}

/// Writes a list of u64: u32 count, then the values.
pub fn put_u64s(out: &mut BytesMut, v: &[u64]) {
    out.put_u32_le(v.len() as u32);
    for x in v {
        out.put_u64_le(*x);
    }
}
