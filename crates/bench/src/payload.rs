//! The bench message body: bytes 0..8 hold the send time (µs since the Unix epoch, little
//! endian) for end-to-end latency, bytes 8..16 the run id so that a consumer ignores messages
//! left over from an earlier run; the rest is filler.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes at the start of every bench body.
pub const HEADER_LEN: usize = 16;

/// Now, in µs since the Unix epoch. Wall-clock time, so that producers and consumers in other
/// processes (a later multi-process driver) can compare stamps.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A body of `size` bytes (at least [`HEADER_LEN`]) stamped with `sent_micros` and `run_id`.
pub fn encode(size: usize, sent_micros: u64, run_id: u64) -> Bytes {
    let size = size.max(HEADER_LEN);
    let mut b = BytesMut::with_capacity(size);
    b.put_u64_le(sent_micros);
    b.put_u64_le(run_id);
    // A constant filler: compressible, but Ferry does not compress, and a pattern would
    // cost time in the producer that belongs to the broker.
    b.put_bytes(b'x', size - HEADER_LEN);
    b.freeze()
}

/// The send stamp of a body from run `run_id`, or `None` for a foreign or short body.
pub fn decode(body: &[u8], run_id: u64) -> Option<u64> {
    let stamp = u64::from_le_bytes(body.get(0..8)?.try_into().ok()?);
    let run = u64::from_le_bytes(body.get(8..16)?.try_into().ok()?);
    (run == run_id).then_some(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let b = encode(100, 123_456, 7);
        assert_eq!(b.len(), 100);
        assert_eq!(decode(&b, 7), Some(123_456));
        assert_eq!(decode(&b, 8), None);
        assert_eq!(decode(&b[..10], 7), None);
        assert_eq!(encode(3, 1, 2).len(), HEADER_LEN);
    }

    #[test]
    fn clock_is_plausible() {
        // After 2020-01-01.
        assert!(now_micros() > 1_577_836_800_000_000);
    }
}
