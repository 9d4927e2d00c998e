//! [`PackedBodies`]: message bodies back to back in one buffer, each after its length (u32,
//! little-endian), as a `PublishBatch` carries them in and a `DeliverRun` carries them out.
//!
//! A batch of small publishes held as one handle per body paid, per body, a reference count
//! taken and dropped on every hand-over and a handle written and read, on each side of the
//! broker; a run handed straight to a subscriber then had its bodies copied into the push one
//! by one. Packed, a batch is one buffer: a body is found by walking the lengths, the broker
//! moves a run from the publisher's frame to the subscriber's with one copy, and only a body
//! that is kept on its own (a stored message) becomes a handle of its own.

use bytes::{BufMut, Bytes, BytesMut};

use crate::wire::{Reader, WireError};

/// Bytes of a body's length prefix.
pub const LEN_PREFIX: usize = 4;

/// Bodies back to back, each after its u32 length: see the [module](self).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct PackedBodies {
    /// `count` x (u32 length | body), nothing else.
    bytes: Bytes,
    count: usize,
}

impl PackedBodies {
    /// `bodies`, packed in order (each copied once).
    pub fn pack<B: AsRef<[u8]>>(bodies: impl IntoIterator<Item = B>) -> PackedBodies {
        bodies.into_iter().collect()
    }

    /// Reads `count` bodies from `r` (each a u32 length and that many bytes), as one slice of
    /// its buffer: nothing copied, nothing allocated.
    pub fn read(r: &mut Reader<'_>, count: usize) -> Result<PackedBodies, WireError> {
        let mut span: Option<(usize, usize)> = None;
        for _ in 0..count {
            let at = r.bytes_range()?;
            let start = span.map_or(at.start - LEN_PREFIX, |(start, _)| start);
            span = Some((start, at.end));
        }
        Ok(PackedBodies {
            bytes: span.map_or_else(Bytes::new, |(start, end)| r.slice(start..end)),
            count,
        })
    }

    /// The `count` bodies packed in `bytes`, which [`PackedBodies::packed`] or a
    /// [`Group`] gave (a group of one body: its packed bytes).
    pub(crate) fn read_all(bytes: &Bytes, count: usize) -> PackedBodies {
        PackedBodies {
            bytes: bytes.clone(),
            count,
        }
    }

    /// How many bodies.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The packed bytes: what a frame carries for them.
    pub fn packed(&self) -> &Bytes {
        &self.bytes
    }

    /// The bodies in order, borrowed.
    pub fn iter(&self) -> Bodies<'_> {
        Bodies {
            rest: &self.bytes,
            left: self.count,
        }
    }

    /// The bodies in order, each a handle of its own (a slice of the packed buffer: one
    /// reference count each, no copy), for a body kept apart from the batch.
    pub fn handles(&self) -> impl ExactSizeIterator<Item = Bytes> + '_ {
        let base = self.bytes.as_ptr() as usize;
        self.iter().map(move |body| {
            let at = body.as_ptr() as usize - base;
            self.bytes.slice(at..at + body.len())
        })
    }

    /// The bodies cut into groups of at most `max_count` bodies and `max_bytes` packed bytes
    /// each, in order: for each group, its first body's index, its count and its packed
    /// bytes (a slice, not a copy). A body whose packed bytes alone exceed `max_bytes` is a
    /// group of its own.
    pub fn groups(&self, max_count: usize, max_bytes: usize) -> Groups<'_> {
        Groups {
            packed: self,
            at: 0,
            index: 0,
            max_count: max_count.max(1),
            max_bytes,
        }
    }
}

impl From<Vec<Bytes>> for PackedBodies {
    /// Packs `bodies` (each copied once).
    fn from(bodies: Vec<Bytes>) -> PackedBodies {
        let mut b =
            PackedBuilder::reserving(bodies.iter().map(|body| LEN_PREFIX + body.len()).sum());
        for body in &bodies {
            b.push(body);
        }
        b.finish()
    }
}

impl<B: AsRef<[u8]>> FromIterator<B> for PackedBodies {
    /// Packs the bodies in order (each copied once).
    fn from_iter<I: IntoIterator<Item = B>>(bodies: I) -> PackedBodies {
        let mut b = PackedBuilder::default();
        for body in bodies {
            b.push(body.as_ref());
        }
        b.finish()
    }
}

impl std::fmt::Debug for PackedBodies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(Bytes::copy_from_slice))
            .finish()
    }
}

/// The bodies of [`PackedBodies::iter`].
#[derive(Debug, Clone)]
pub struct Bodies<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Bodies<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (len, rest) = self.rest.split_first_chunk::<LEN_PREFIX>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let (body, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        self.left -= 1;
        Some(body)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Bodies<'_> {}

/// A group of [`PackedBodies::groups`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The index of its first body.
    pub first: usize,
    /// Its bodies.
    pub count: usize,
    /// Its packed bytes.
    pub packed: Bytes,
}

/// The groups of [`PackedBodies::groups`].
#[derive(Debug)]
pub struct Groups<'a> {
    packed: &'a PackedBodies,
    at: usize,
    index: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Iterator for Groups<'_> {
    type Item = Group;

    fn next(&mut self) -> Option<Group> {
        let bytes = &self.packed.bytes;
        let start = self.at;
        let first = self.index;
        let left = self.packed.count - self.index;
        if left > 0 && left <= self.max_count && bytes.len().saturating_sub(start) <= self.max_bytes
        {
            // The rest fits one group (a batch usually does whole): no lengths to walk.
            self.index = self.packed.count;
            self.at = bytes.len();
            return Some(Group {
                first,
                count: left,
                packed: bytes.slice(start..),
            });
        }
        let mut end = start;
        let mut count = 0;
        while self.index < self.packed.count && count < self.max_count {
            let len = bytes
                .get(end..end + LEN_PREFIX)
                .and_then(|b| b.first_chunk::<LEN_PREFIX>())
                .map_or(0, |b| u32::from_le_bytes(*b) as usize);
            let next = end + LEN_PREFIX + len;
            if count > 0 && next - start > self.max_bytes {
                break;
            }
            end = next;
            count += 1;
            self.index += 1;
        }
        if count == 0 {
            return None;
        }
        self.at = end;
        Some(Group {
            first,
            count,
            packed: bytes.slice(start..end.min(bytes.len())),
        })
    }
}

/// Packs bodies one by one into [`PackedBodies`].
#[derive(Debug, Default)]
pub struct PackedBuilder {
    bytes: BytesMut,
    count: usize,
}

impl PackedBuilder {
    /// A builder with room for `bytes` packed bytes (on the sending side: a decoder never
    /// sizes a buffer from a peer's numbers).
    pub fn reserving(bytes: usize) -> PackedBuilder {
        let mut b = PackedBuilder::default();
        b.bytes.reserve(bytes);
        b
    }

    /// Appends `body` (its length must fit a u32, as any body on the wire does).
    pub fn push(&mut self, body: &[u8]) {
        self.bytes.reserve(LEN_PREFIX + body.len());
        self.bytes.put_u32_le(body.len() as u32);
        self.bytes.extend_from_slice(body);
        self.count += 1;
    }

    /// Appends a body written by `write` into the buffer (its length is patched after).
    pub fn push_with(&mut self, write: impl FnOnce(&mut BytesMut)) {
        let at = self.bytes.len();
        self.bytes.put_u32_le(0);
        write(&mut self.bytes);
        let len = (self.bytes.len() - at - LEN_PREFIX) as u32;
        if let Some(slot) = self.bytes.get_mut(at..at + LEN_PREFIX) {
            slot.copy_from_slice(&len.to_le_bytes());
        }
        self.count += 1;
    }

    /// Bodies pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether none was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The packed bodies.
    pub fn finish(self) -> PackedBodies {
        PackedBodies {
            bytes: self.bytes.freeze(),
            count: self.count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies() -> Vec<Vec<u8>> {
        vec![b"a".to_vec(), Vec::new(), vec![7u8; 300], b"last".to_vec()]
    }

    #[test]
    fn packed_bodies_iterate_and_hand_out_as_they_went_in() {
        let p = PackedBodies::pack(bodies());
        assert_eq!(p.len(), 4);
        assert_eq!(p.packed().len(), 4 * 4 + 1 + 300 + 4);
        assert_eq!(p.iter().collect::<Vec<_>>(), bodies());
        assert_eq!(p.handles().collect::<Vec<_>>(), bodies());
        assert!(PackedBodies::default().is_empty());
        let mut b = PackedBuilder::reserving(16);
        b.push_with(|out| out.extend_from_slice(b"writ"));
        b.push(b"ten");
        assert_eq!(b.len(), 2);
        assert_eq!(b.finish(), PackedBodies::pack([&b"writ"[..], b"ten"]));
    }

    #[test]
    fn a_read_is_a_slice_of_the_frame_and_a_short_one_an_error() {
        let p = PackedBodies::pack(bodies());
        let buf = Bytes::from([p.packed().as_ref(), b"tail"].concat());
        let mut r = Reader::new(&buf);
        let read = PackedBodies::read(&mut r, 4).unwrap();
        assert_eq!(read, p);
        assert_eq!(read.packed().as_ptr(), buf.as_ptr(), "not a copy");
        assert_eq!(r.remaining(), 4);
        let short = buf.slice(..p.packed().len() - 1);
        assert!(PackedBodies::read(&mut Reader::new(&short), 4).is_err());
    }

    #[test]
    fn groups_keep_to_their_count_and_bytes_and_a_large_body_goes_alone() {
        let p = PackedBodies::pack(bodies());
        let groups: Vec<(usize, usize, usize)> = p
            .groups(2, 100)
            .map(|g| (g.first, g.count, g.packed.len()))
            .collect();
        // 'a' and '' (9 bytes), the 300-byte body alone, then 'last'.
        assert_eq!(groups, [(0, 2, 9), (2, 1, 304), (3, 1, 8)]);
        let whole: Vec<usize> = p.groups(10, 1000).map(|g| g.count).collect();
        assert_eq!(whole, [4]);
        // Exactly the rest's 321 bytes is one group; a byte less cuts off the last body.
        let counts = |max_bytes| -> Vec<(usize, usize)> {
            p.groups(4, max_bytes)
                .map(|g| (g.count, g.packed.len()))
                .collect()
        };
        assert_eq!(counts(321), [(4, 321)]);
        assert_eq!(counts(320), [(3, 313), (1, 8)]);
        assert_eq!(
            p.groups(3, 1000).map(|g| g.count).collect::<Vec<_>>(),
            [3, 1]
        );
        let joined: Vec<u8> = p.groups(1, 0).flat_map(|g| g.packed.to_vec()).collect();
        assert_eq!(&joined[..], &p.packed()[..]);
    }
}
