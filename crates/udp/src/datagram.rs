//! The datagram format, sans-IO: [`parse`] for the gateway, [`Packer`] for senders.
//!
//! ```text
//! offset  size  field
//! 0       2     magic "FD" (0x46 0x44)
//! 2       1     version, 1
//! 3       1     flags: bit 0 set = a topic follows; every other bit 0
//! [4      1     topic length T, 1 to 200]            only with flag bit 0
//! [5      T     topic name, [A-Za-z0-9._-]]
//! then, to the end of the datagram, one or more records:
//!         2     record length L, big-endian, at least 1
//!         L     the record: the body of one message
//! ```
//!
//! A datagram is taken whole or not at all: any field out of place (bad magic, version or
//! flags, a topic name that is not one, no record, a record of length 0 or running past the
//! end) makes it malformed, and none of its records is published.

use bytes::{BufMut, Bytes};
use thiserror::Error;

/// The first two bytes of every datagram.
pub const MAGIC: [u8; 2] = *b"FD";
/// The format's version.
pub const VERSION: u8 = 1;
/// Flag bit: a topic name follows the header.
pub const FLAG_TOPIC: u8 = 0x01;
/// The largest UDP payload over IPv4 (65,535 less the IP and UDP headers).
pub const MAX_DATAGRAM: usize = 65_507;
/// The header without a topic.
pub const HEADER_LEN: usize = 4;
/// Bytes before each record.
pub const RECORD_PREFIX: usize = 2;
/// The longest topic name.
pub const MAX_TOPIC_LEN: usize = 200;

/// Why a datagram is malformed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Malformed {
    /// Shorter than the header.
    #[error("{0} bytes: shorter than the 4-byte header")]
    Short(usize),
    /// The first two bytes are not "FD".
    #[error("bad magic {0:#06x} (expected \"FD\")")]
    Magic(u16),
    /// A version this broker does not read.
    #[error("version {0} (this broker reads version 1)")]
    Version(u8),
    /// Flag bits other than bit 0.
    #[error("unknown flags {0:#04x}")]
    Flags(u8),
    /// The topic length is 0, past the end, or the name is not a valid topic name.
    #[error("bad topic: {0}")]
    Topic(&'static str),
    /// No record after the header.
    #[error("no record")]
    NoRecord,
    /// A record of length 0, a length prefix cut short, or a record running past the end.
    #[error("record {index} at byte {offset}: {what}")]
    Record {
        /// Which record (0-based).
        index: usize,
        /// Where its length prefix starts.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// A parsed datagram: its topic (if it names one) and its records, sharing the datagram's
/// buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The topic named by the datagram, `None`: the gateway's configured topic.
    pub topic: Option<String>,
    /// The records, in order.
    pub records: Vec<Bytes>,
}

/// Parses one datagram (see the module's table). The records are slices of `data`: nothing is
/// copied.
pub fn parse(data: &Bytes) -> Result<Datagram, Malformed> {
    let b = data.as_ref();
    let header = b.get(..HEADER_LEN).ok_or(Malformed::Short(b.len()))?;
    let &[m0, m1, version, flags, ..] = header else {
        return Err(Malformed::Short(b.len()));
    };
    if [m0, m1] != MAGIC {
        return Err(Malformed::Magic(u16::from_be_bytes([m0, m1])));
    }
    if version != VERSION {
        return Err(Malformed::Version(version));
    }
    if flags & !FLAG_TOPIC != 0 {
        return Err(Malformed::Flags(flags));
    }
    let mut at = HEADER_LEN;
    let topic = if flags & FLAG_TOPIC != 0 {
        let len = usize::from(*b.get(at).ok_or(Malformed::Topic("no topic length"))?);
        if len == 0 {
            return Err(Malformed::Topic("length 0"));
        }
        let name = b
            .get(at + 1..at + 1 + len)
            .ok_or(Malformed::Topic("runs past the end of the datagram"))?;
        let valid = name
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
        if !valid {
            return Err(Malformed::Topic("not a topic name ([A-Za-z0-9._-])"));
        }
        at += 1 + len;
        // Checked to be ASCII above.
        Some(name.iter().map(|&c| char::from(c)).collect())
    } else {
        None
    };
    let mut records = Vec::new();
    while at < b.len() {
        let record = |what| Malformed::Record {
            index: records.len(),
            offset: at,
            what,
        };
        let prefix = b
            .get(at..at + RECORD_PREFIX)
            .ok_or_else(|| record("length prefix cut short"))?;
        let &[hi, lo] = prefix else {
            return Err(record("length prefix cut short"));
        };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if len == 0 {
            return Err(record("length 0"));
        }
        let start = at + RECORD_PREFIX;
        if start + len > b.len() {
            return Err(record("runs past the end of the datagram"));
        }
        records.push(data.slice(start..start + len));
        at = start + len;
    }
    if records.is_empty() {
        return Err(Malformed::NoRecord);
    }
    Ok(Datagram { topic, records })
}

/// Packs records into datagrams of at most a given size, for senders (the benchmark harness,
/// applications' monitoring writers).
#[derive(Debug, Clone)]
pub struct Packer {
    buf: Vec<u8>,
    header_len: usize,
    limit: usize,
    records: usize,
}

impl Packer {
    /// A packer for datagrams of at most `limit` bytes (at most [`MAX_DATAGRAM`]), naming
    /// `topic` in each (`None`: the gateway's configured topic). Fails for a topic that is not
    /// a name, or a limit that cannot hold the header and a 1-byte record.
    pub fn new(topic: Option<&str>, limit: usize) -> Result<Packer, Malformed> {
        let mut buf = Vec::with_capacity(limit.min(MAX_DATAGRAM));
        buf.extend_from_slice(&MAGIC);
        buf.push(VERSION);
        match topic {
            None => buf.push(0),
            Some(t) => {
                if t.is_empty() || t.len() > MAX_TOPIC_LEN {
                    return Err(Malformed::Topic("1 to 200 characters"));
                }
                if !t
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
                {
                    return Err(Malformed::Topic("not a topic name ([A-Za-z0-9._-])"));
                }
                buf.push(FLAG_TOPIC);
                buf.push(t.len() as u8);
                buf.extend_from_slice(t.as_bytes());
            }
        }
        let limit = limit.min(MAX_DATAGRAM);
        if limit < buf.len() + RECORD_PREFIX + 1 {
            return Err(Malformed::Short(limit));
        }
        Ok(Packer {
            header_len: buf.len(),
            buf,
            limit,
            records: 0,
        })
    }

    /// Whether `record` fits in the datagram being packed.
    pub fn fits(&self, record: &[u8]) -> bool {
        self.buf.len() + RECORD_PREFIX + record.len() <= self.limit
    }

    /// The most record bytes one datagram of this packer can hold.
    pub fn max_record(&self) -> usize {
        (self.limit - self.header_len - RECORD_PREFIX).min(usize::from(u16::MAX))
    }

    /// Appends `record` if it fits (and is 1 to 65,535 bytes); `false` otherwise, leaving the
    /// datagram as it was.
    pub fn push(&mut self, record: &[u8]) -> bool {
        if record.is_empty() || record.len() > usize::from(u16::MAX) || !self.fits(record) {
            return false;
        }
        self.buf.put_u16(record.len() as u16);
        self.buf.extend_from_slice(record);
        self.records += 1;
        true
    }

    /// Records packed so far.
    pub fn len(&self) -> usize {
        self.records
    }

    /// Whether no record is packed.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The datagram packed so far (valid once it holds a record).
    pub fn datagram(&self) -> &[u8] {
        &self.buf
    }

    /// Starts the next datagram (same topic).
    pub fn clear(&mut self) {
        self.buf.truncate(self.header_len);
        self.records = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn packed(topic: Option<&str>, records: &[&[u8]]) -> Bytes {
        let mut p = Packer::new(topic, MAX_DATAGRAM).unwrap();
        for r in records {
            assert!(p.push(r));
        }
        Bytes::copy_from_slice(p.datagram())
    }

    #[test]
    fn a_datagram_round_trips() {
        let d = parse(&packed(None, &[b"a", b"bc", &[0, 255, 0]])).unwrap();
        assert_eq!(d.topic, None);
        assert_eq!(d.records, vec![&b"a"[..], b"bc", &[0, 255, 0]]);
        let d = parse(&packed(Some("kieker.records"), &[b"x"])).unwrap();
        assert_eq!(d.topic.as_deref(), Some("kieker.records"));
        assert_eq!(d.records, vec![&b"x"[..]]);
    }

    #[test]
    fn the_bytes_are_as_documented() {
        let d = packed(Some("t"), &[b"hi"]);
        assert_eq!(&d[..], b"FD\x01\x01\x01t\x00\x02hi");
        let d = packed(None, &[b"a", b"b"]);
        assert_eq!(&d[..], b"FD\x01\x00\x00\x01a\x00\x01b");
    }

    #[test]
    fn each_malformation_is_named() {
        let cases: [(&[u8], Malformed); 11] = [
            (b"", Malformed::Short(0)),
            (b"FD\x01", Malformed::Short(3)),
            (b"XY\x01\x00\x00\x01a", Malformed::Magic(0x5859)),
            (b"FD\x02\x00\x00\x01a", Malformed::Version(2)),
            (b"FD\x01\x02\x00\x01a", Malformed::Flags(2)),
            (b"FD\x01\x01", Malformed::Topic("no topic length")),
            (b"FD\x01\x01\x00\x00\x01a", Malformed::Topic("length 0")),
            (
                b"FD\x01\x01\x05ab",
                Malformed::Topic("runs past the end of the datagram"),
            ),
            (b"FD\x01\x00", Malformed::NoRecord),
            (
                b"FD\x01\x00\x00\x01a\x00",
                Malformed::Record {
                    index: 1,
                    offset: 7,
                    what: "length prefix cut short",
                },
            ),
            (
                b"FD\x01\x00\x00\x05abc",
                Malformed::Record {
                    index: 0,
                    offset: 4,
                    what: "runs past the end of the datagram",
                },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(
                parse(&Bytes::copy_from_slice(bytes)),
                Err(want),
                "{bytes:?}"
            );
        }
        let zero = parse(&Bytes::from_static(b"FD\x01\x00\x00\x00")).unwrap_err();
        assert!(matches!(
            zero,
            Malformed::Record {
                what: "length 0",
                ..
            }
        ));
        let bad_name = parse(&Bytes::from_static(b"FD\x01\x01\x02a*\x00\x01a")).unwrap_err();
        assert!(matches!(bad_name, Malformed::Topic(_)), "{bad_name}");
    }

    #[test]
    fn the_packer_stops_at_its_limit() {
        let mut p = Packer::new(None, 16).unwrap();
        assert_eq!(p.max_record(), 10);
        assert!(p.push(b"12345"));
        assert!(!p.push(b"1234"), "4 + 2 + 5 + 2 + 4 = 17 > 16");
        assert!(p.push(b"123"));
        assert_eq!(p.len(), 2);
        assert_eq!(p.datagram().len(), 16);
        p.clear();
        assert!(p.is_empty());
        assert!(!p.push(b""), "empty records are not records");
        assert!(Packer::new(None, 6).is_err());
        assert!(Packer::new(Some("a b"), 100).is_err());
    }

    proptest! {
        #[test]
        fn parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse(&Bytes::from(bytes));
        }

        #[test]
        fn what_is_packed_parses_back(records in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..200), 1..20)) {
            let mut p = Packer::new(Some("t.x"), MAX_DATAGRAM).unwrap();
            for r in &records {
                prop_assert!(p.push(r));
            }
            let d = parse(&Bytes::copy_from_slice(p.datagram())).unwrap();
            prop_assert_eq!(d.records.len(), records.len());
            for (a, b) in d.records.iter().zip(&records) {
                prop_assert_eq!(&a[..], &b[..]);
            }
        }
    }
}
