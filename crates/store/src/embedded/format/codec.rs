//! Little-endian field writers and a checked reader. The reader never panics and never
//! allocates more than the bytes actually present, whatever the counts on disk say.

use ferry_protocol::{Properties, PropertyValue};

use super::FormatError;

/// Appends `v` as two little-endian bytes.
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as four little-endian bytes.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as eight little-endian bytes.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a string: u16 length, then UTF-8 bytes. Callers check lengths first (see
/// [`str_fits`]); a longer string would be cut, never written with a wrong length.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let s = s.get(..end).unwrap_or_default();
    put_u16(out, s.len() as u16);
    out.extend_from_slice(s.as_bytes());
}

/// Whether `s` can be written by [`put_str`] without being cut.
pub fn str_fits(s: &str) -> bool {
    s.len() <= usize::from(u16::MAX)
}

/// Appends properties: u16 count, then per property a name, a type tag and the value.
pub fn put_properties(out: &mut Vec<u8>, props: &Properties) {
    put_u16(out, props.len().min(usize::from(u16::MAX)) as u16);
    for (name, value) in props.iter().take(usize::from(u16::MAX)) {
        put_str(out, name);
        match value {
            PropertyValue::Bool(b) => {
                out.push(0);
                out.push(u8::from(*b));
            }
            PropertyValue::Int(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_le_bytes());
            }
            PropertyValue::Float(f) => {
                out.push(2);
                out.extend_from_slice(&f.to_le_bytes());
            }
            PropertyValue::Str(s) => {
                out.push(3);
                put_str(out, s);
            }
        }
    }
}

/// Whether [`put_properties`] can write `props` without cutting anything.
pub fn properties_fit(props: &Properties) -> bool {
    props.len() <= usize::from(u16::MAX)
        && props.iter().all(|(name, value)| {
            str_fits(name)
                && match value {
                    PropertyValue::Str(s) => str_fits(s),
                    _ => true,
                }
        })
}

/// Bytes [`put_properties`] writes for `props`.
pub fn properties_len(props: &Properties) -> usize {
    2 + props
        .iter()
        .map(|(name, value)| {
            2 + name.len()
                + 1
                + match value {
                    PropertyValue::Bool(_) => 1,
                    PropertyValue::Int(_) | PropertyValue::Float(_) => 8,
                    PropertyValue::Str(s) => 2 + s.len(),
                }
        })
        .sum::<usize>()
}

/// A cursor over bytes read from disk.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), FormatError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(FormatError::Trailing(n)),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], FormatError> {
        if n > self.buf.len() {
            return Err(FormatError::Truncated(field));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }

    /// One byte.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, FormatError> {
        Ok(u8::from_le_bytes(self.array(field)?))
    }

    /// Little-endian u16.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// Little-endian u32.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// Little-endian u64.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A string written by [`put_str`].
    pub fn str(&mut self, field: &'static str) -> Result<String, FormatError> {
        let len = usize::from(self.u16(field)?);
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| FormatError::Utf8(field))
    }

    /// A count of elements that take at least `min_elem` bytes each, checked against the bytes
    /// left so that a corrupt count cannot force a huge allocation.
    pub fn count(
        &mut self,
        n: u64,
        min_elem: usize,
        field: &'static str,
    ) -> Result<usize, FormatError> {
        if n.saturating_mul(min_elem.max(1) as u64) > self.remaining() as u64 {
            return Err(FormatError::Invalid { field, value: n });
        }
        usize::try_from(n).map_err(|_| FormatError::Invalid { field, value: n })
    }

    /// Properties written by [`put_properties`].
    pub fn properties(&mut self) -> Result<Properties, FormatError> {
        let n = u64::from(self.u16("property count")?);
        let n = self.count(n, 4, "property count")?;
        let mut props = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.str("property name")?;
            let value = match self.u8("property type")? {
                0 => match self.u8("property value")? {
                    0 => PropertyValue::Bool(false),
                    1 => PropertyValue::Bool(true),
                    v => {
                        return Err(FormatError::Invalid {
                            field: "bool property",
                            value: u64::from(v),
                        })
                    }
                },
                1 => PropertyValue::Int(i64::from_le_bytes(self.array("property value")?)),
                2 => PropertyValue::Float(f64::from_le_bytes(self.array("property value")?)),
                3 => PropertyValue::Str(self.str("property value")?),
                t => {
                    return Err(FormatError::Invalid {
                        field: "property type",
                        value: u64::from(t),
                    })
                }
            };
            props.push((name, value));
        }
        Ok(props.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_roundtrip_and_length() {
        let props: Properties = vec![
            ("b".into(), PropertyValue::Bool(true)),
            ("i".into(), PropertyValue::Int(-7)),
            ("f".into(), PropertyValue::Float(1.5)),
            ("s".into(), PropertyValue::Str("héllo".into())),
        ]
        .into();
        let mut out = Vec::new();
        put_properties(&mut out, &props);
        assert_eq!(out.len(), properties_len(&props));
        let mut r = Reader::new(&out);
        assert_eq!(r.properties().unwrap(), props);
        r.finish().unwrap();
        for cut in 0..out.len() {
            assert!(Reader::new(&out[..cut]).properties().is_err());
        }
    }

    #[test]
    fn huge_counts_are_refused_without_allocating() {
        let mut r = Reader::new(&[0xff, 0xff, 0, 0]);
        assert!(r.properties().is_err());
    }
}
