//! What every message body of the workload starts with: its type, sender, the location the
//! interaction is about, the product family, the correlation of offers and the send time;
//! padded to the message's size.

use bytes::{BufMut, Bytes, BytesMut};

use super::layout::Loc;
use super::spec::{Kind, MessageType};

/// Bytes of [`Header`].
const HEADER_LEN: usize = 40;
const MAGIC: u32 = 0x534a_4d53;

/// What every message starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Its type.
    pub ty: MessageType,
    /// Who sent it.
    pub from: Loc,
    /// The location the interaction is about (the SM of an order, the chosen SP, ...).
    pub subject: u32,
    /// The product family (calls for offers and what follows).
    pub family: u32,
    /// Correlates the offers of one call for offers.
    pub corr: u64,
    /// Offers expected for `corr`.
    pub expected: u32,
    /// Wall-clock µs when sent.
    pub sent_us: u64,
}

fn kind_code(k: Kind) -> u8 {
    k as u8
}

fn kind_of(b: u8) -> Option<Kind> {
    Kind::ALL.get(usize::from(b)).copied()
}

impl Header {
    /// The header followed by padding to `size` bytes in all.
    pub fn encode(&self, size: usize) -> Bytes {
        let mut b = BytesMut::with_capacity(size.max(HEADER_LEN));
        b.put_u32(MAGIC);
        b.put_u8(self.ty.index() as u8);
        b.put_u8(kind_code(self.from.kind));
        b.put_u16(0);
        b.put_u32(self.from.id);
        b.put_u32(self.subject);
        b.put_u32(self.family);
        b.put_u32(self.expected);
        b.put_u64(self.corr);
        b.put_u64(self.sent_us);
        b.resize(size.max(HEADER_LEN), b'.');
        b.freeze()
    }

    /// The header of a body, `None` when it is not one of ours.
    pub fn decode(b: &[u8]) -> Option<Header> {
        let u32_at = |at: usize| Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?));
        let u64_at = |at: usize| Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?));
        if u32_at(0)? != MAGIC {
            return None;
        }
        Some(Header {
            ty: *MessageType::ALL.get(usize::from(*b.get(4)?))?,
            from: Loc {
                kind: kind_of(*b.get(5)?)?,
                id: u32_at(8)?,
            },
            subject: u32_at(12)?,
            family: u32_at(16)?,
            expected: u32_at(20)?,
            corr: u64_at(24)?,
            sent_us: u64_at(32)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_pad_to_size() {
        let h = Header {
            ty: MessageType::Offer,
            from: Loc {
                kind: Kind::Sp,
                id: 7,
            },
            subject: 3,
            family: 11,
            corr: 99,
            expected: 2,
            sent_us: 123_456,
        };
        let b = h.encode(2560);
        assert_eq!(b.len(), 2560);
        assert_eq!(Header::decode(&b), Some(h));
        assert_eq!(h.encode(10).len(), HEADER_LEN);
        assert_eq!(Header::decode(b"nope"), None);
    }
}
