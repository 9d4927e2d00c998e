//! The segment header: magic, format version, segment number and a snapshot of the metadata
//! (next message id, every queue, queue settings, every topic and subscription) as of the
//! segment's creation.
//!
//! The snapshot is what lets compaction delete the oldest segment: whatever metadata records it
//! held are summarised in the next segment's header, and the next message id never goes back.
//! Registered clients are not in it from format version 3 on (the count is written as 0):
//! their `ClientRegistered` records are live data that compaction rewrites, so a header's size
//! does not grow with the number of clients. Headers of older versions list every client.

use super::codec::{put_str, put_u16, put_u32, put_u64, Reader};
use super::subscription::{self, SubscriptionDef, SubscriptionFields};
use super::{FormatError, FORMAT_VERSION, MIN_FORMAT_VERSION};

/// First bytes of every segment file.
pub const MAGIC: [u8; 8] = *b"FERRYLOG";

/// Bytes before the header body: magic, body length, body CRC.
pub const PREFIX_LEN: usize = 16;

/// A decoded segment header.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SegmentHeader {
    /// The format version the segment was written in: it says how its records' CRCs are
    /// masked (see [`record::segment_mask`](super::record::segment_mask)).
    pub version: u16,
    /// The segment's number, also its file name.
    pub segment: u64,
    /// The next message id to hand out when the segment was created.
    pub next_id: u64,
    /// Every queue that existed when the segment was created.
    pub queues: Vec<String>,
    /// Every client registered when the segment was created (versions 1 and 2; empty from
    /// version 3 on).
    pub clients: Vec<String>,
    /// The settings of the queues that have any (name, maximum delivery count, dead-letter
    /// queue), from the optional trailer.
    pub options: Vec<QueueSettings>,
    /// The expiry queues of the queues that have one (name, expiry queue), from the second
    /// optional trailer.
    pub expiry: Vec<(String, String)>,
    /// Every topic, from the third optional trailer.
    pub topics: Vec<String>,
    /// Every subscription with its queue's settings, from the fourth optional trailer (present
    /// whenever the third is).
    pub subscriptions: Vec<SubscriptionDef>,
}

/// The topics and subscriptions a header snapshot holds, borrowed, for writing.
#[derive(Debug, Default)]
pub struct TopicSnapshot<'a> {
    /// Every topic.
    pub topics: Vec<&'a str>,
    /// Every subscription.
    pub subscriptions: Vec<SubscriptionFields<'a>>,
}

/// A queue's settings as a header snapshot holds them: name, maximum delivery count (0 =
/// unlimited), dead-letter queue.
pub type QueueSettings = (String, u32, Option<String>);

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Short, garbled or failing its checksum: what a crash while creating the file leaves.
    #[error("torn or garbled segment header: {0}")]
    Torn(String),
    /// A complete header of a format version this code does not read.
    #[error(
        "segment format version {0} is not supported (this build reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION})"
    )]
    Version(u16),
    /// The checksum matches but the fields make no sense: a bug, not a torn write.
    #[error("malformed segment header: {0}")]
    Malformed(FormatError),
}

/// Encodes a header for `segment` with the given metadata snapshot. The store passes no
/// `clients` (format version 3); tests pass some to build headers of older versions.
pub fn encode<'a>(
    segment: u64,
    next_id: u64,
    queues: impl ExactSizeIterator<Item = &'a str>,
    clients: impl ExactSizeIterator<Item = &'a str>,
    options: &[(&'a str, u32, Option<&'a str>)],
    expiry: &[(&'a str, &'a str)],
    topics: &TopicSnapshot<'a>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&MAGIC);
    put_u32(&mut out, 0); // body length, patched below
    put_u32(&mut out, 0); // body CRC, patched below
    put_u16(&mut out, FORMAT_VERSION);
    put_u16(&mut out, 0); // reserved
    put_u64(&mut out, segment);
    put_u64(&mut out, next_id);
    put_u32(&mut out, queues.len() as u32);
    for q in queues {
        put_str(&mut out, q);
    }
    put_u32(&mut out, clients.len() as u32);
    for c in clients {
        put_str(&mut out, c);
    }
    // The optional trailers, each present when it or a later one has something to say (then
    // the earlier counts are written even if 0): queue settings; expiry queues; topics, always
    // followed by the subscriptions.
    let topical = !topics.topics.is_empty() || !topics.subscriptions.is_empty();
    if !options.is_empty() || !expiry.is_empty() || topical {
        put_u32(&mut out, options.len() as u32);
        for (name, max, dlq) in options {
            put_str(&mut out, name);
            put_u32(&mut out, *max);
            match dlq {
                Some(d) => {
                    out.push(1);
                    put_str(&mut out, d);
                }
                None => out.push(0),
            }
        }
    }
    if !expiry.is_empty() || topical {
        put_u32(&mut out, expiry.len() as u32);
        for (name, x) in expiry {
            put_str(&mut out, name);
            put_str(&mut out, x);
        }
    }
    if topical {
        put_u32(&mut out, topics.topics.len() as u32);
        for t in &topics.topics {
            put_str(&mut out, t);
        }
        put_u32(&mut out, topics.subscriptions.len() as u32);
        for s in &topics.subscriptions {
            subscription::put(&mut out, s);
        }
    }
    let body = out.get(PREFIX_LEN..).unwrap_or_default();
    let len = (body.len() as u32).to_le_bytes();
    let crc = crc32c::crc32c(body).to_le_bytes();
    if let Some(dst) = out.get_mut(8..16) {
        dst.get_mut(..4).unwrap_or_default().copy_from_slice(&len);
        dst.get_mut(4..).unwrap_or_default().copy_from_slice(&crc);
    }
    out
}

/// Decodes the header at the start of `buf`; returns it with its length in bytes (records start
/// right after).
pub fn decode(buf: &[u8]) -> Result<(SegmentHeader, usize), HeaderError> {
    let mut r = Reader::new(buf);
    let torn = |e: FormatError| HeaderError::Torn(e.to_string());
    let magic = r.take(MAGIC.len(), "magic").map_err(torn)?;
    if magic != MAGIC {
        return Err(HeaderError::Torn("bad magic".into()));
    }
    let len = r.u32("header length").map_err(torn)? as usize;
    let crc = r.u32("header checksum").map_err(torn)?;
    let body = r.take(len, "header body").map_err(torn)?;
    if crc32c::crc32c(body) != crc {
        return Err(HeaderError::Torn("header checksum mismatch".into()));
    }
    let mut r = Reader::new(body);
    let bad = HeaderError::Malformed;
    let version = r.u16("format version").map_err(bad)?;
    if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(HeaderError::Version(version));
    }
    let _reserved = r.u16("reserved").map_err(bad)?;
    let segment = r.u64("segment number").map_err(bad)?;
    let next_id = r.u64("next message id").map_err(bad)?;
    let queues = names(&mut r, "queue count")?;
    let clients = names(&mut r, "client count")?;
    let mut options = Vec::new();
    if r.remaining() > 0 {
        let n = u64::from(r.u32("queue settings count").map_err(bad)?);
        let n = r.count(n, 7, "queue settings count").map_err(bad)?;
        for _ in 0..n {
            let name = r.str("queue name").map_err(bad)?;
            let max = r.u32("max deliveries").map_err(bad)?;
            let dlq = match r.u8("dead-letter presence").map_err(bad)? {
                0 => None,
                1 => Some(r.str("dead-letter queue").map_err(bad)?),
                v => {
                    return Err(bad(FormatError::Invalid {
                        field: "dead-letter presence",
                        value: u64::from(v),
                    }))
                }
            };
            options.push((name, max, dlq));
        }
    }
    let mut expiry = Vec::new();
    if r.remaining() > 0 {
        let n = u64::from(r.u32("expiry queue count").map_err(bad)?);
        let n = r.count(n, 4, "expiry queue count").map_err(bad)?;
        for _ in 0..n {
            let name = r.str("queue name").map_err(bad)?;
            expiry.push((name, r.str("expiry queue").map_err(bad)?));
        }
    }
    let mut topics = Vec::new();
    let mut subscriptions = Vec::new();
    if r.remaining() > 0 {
        topics = names(&mut r, "topic count")?;
        let n = u64::from(r.u32("subscription count").map_err(bad)?);
        let n = r
            .count(n, subscription::MIN_LEN, "subscription count")
            .map_err(bad)?;
        for _ in 0..n {
            subscriptions.push(subscription::read(&mut r).map_err(bad)?);
        }
    }
    r.finish().map_err(bad)?;
    let header = SegmentHeader {
        version,
        segment,
        next_id,
        queues,
        clients,
        options,
        expiry,
        topics,
        subscriptions,
    };
    Ok((header, PREFIX_LEN + len))
}

fn names(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<String>, HeaderError> {
    let n = u64::from(r.u32(field).map_err(HeaderError::Malformed)?);
    let n = r.count(n, 2, field).map_err(HeaderError::Malformed)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.str("name").map_err(HeaderError::Malformed)?);
    }
    Ok(v)
}

/// `buf`, an encoded header, rewritten as format `version` with its checksum fixed (tests build
/// version 1 stores and future versions with it).
#[cfg(test)]
pub fn as_version(mut buf: Vec<u8>, version: u16) -> Vec<u8> {
    if let Some(v) = buf.get_mut(16..18) {
        v.copy_from_slice(&version.to_le_bytes());
    }
    let crc = crc32c::crc32c(buf.get(PREFIX_LEN..).unwrap_or_default()).to_le_bytes();
    if let Some(c) = buf.get_mut(12..16) {
        c.copy_from_slice(&crc);
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_truncation_is_torn() {
        let buf = encode(
            7,
            42,
            ["a", "bb"].into_iter(),
            ["c"].into_iter(),
            &[("a", 3, Some("bb")), ("bb", 0, None)],
            &[("a", "bb")],
            &TopicSnapshot::default(),
        );
        let (h, len) = decode(&buf).unwrap();
        assert_eq!(len, buf.len());
        assert_eq!(
            h,
            SegmentHeader {
                version: FORMAT_VERSION,
                segment: 7,
                next_id: 42,
                queues: vec!["a".into(), "bb".into()],
                clients: vec!["c".into()],
                options: vec![("a".into(), 3, Some("bb".into())), ("bb".into(), 0, None)],
                expiry: vec![("a".into(), "bb".into())],
                topics: Vec::new(),
                subscriptions: Vec::new(),
            }
        );
        for cut in 0..buf.len() {
            assert!(
                matches!(decode(&buf[..cut]), Err(HeaderError::Torn(_))),
                "{cut}"
            );
        }
        let mut flipped = buf.clone();
        flipped[30] ^= 1;
        assert!(matches!(decode(&flipped), Err(HeaderError::Torn(_))));
    }

    #[test]
    fn topics_and_subscriptions_roundtrip_without_queue_settings() {
        let sub = SubscriptionDef {
            topic: "t".into(),
            name: "s".into(),
            durable: true,
            selector: "x > 1".into(),
            owner: "o".into(),
            expiry: Some("exp".into()),
            ..SubscriptionDef::default()
        };
        let snap = TopicSnapshot {
            topics: vec!["t", "u"],
            subscriptions: vec![sub.fields()],
        };
        let buf = encode(
            3,
            9,
            ["exp"].into_iter(),
            std::iter::empty(),
            &[],
            &[],
            &snap,
        );
        let (h, len) = decode(&buf).unwrap();
        assert_eq!(len, buf.len());
        assert_eq!(h.topics, vec!["t".to_string(), "u".into()]);
        assert_eq!(h.subscriptions, vec![sub]);
        assert!(h.options.is_empty() && h.expiry.is_empty());
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "{cut}");
        }
    }

    /// The header of an empty store's segment `segment` with next id `next_id`.
    fn empty(segment: u64, next_id: u64) -> Vec<u8> {
        encode(
            segment,
            next_id,
            std::iter::empty(),
            std::iter::empty(),
            &[],
            &[],
            &TopicSnapshot::default(),
        )
    }

    #[test]
    fn versions_1_and_2_are_read_and_versions_beyond_this_build_are_refused() {
        let buf = empty(4, 1);
        let (h, _) = decode(&as_version(buf.clone(), 1)).unwrap();
        assert_eq!((h.version, h.segment), (1, 4));
        let (h, _) = decode(&as_version(buf.clone(), 2)).unwrap();
        assert_eq!((h.version, h.segment), (2, 4));
        for v in [0, FORMAT_VERSION + 1, u16::MAX] {
            let err = decode(&as_version(buf.clone(), v)).unwrap_err();
            assert_eq!(err, HeaderError::Version(v));
            assert!(err.to_string().contains("reads versions 1 to 3"), "{err}");
        }
    }

    #[test]
    fn pinned_layout() {
        let buf = empty(1, 2);
        assert_eq!(&buf[..8], b"FERRYLOG");
        assert_eq!(&buf[8..12], &28u32.to_le_bytes());
        assert_eq!(&buf[16..18], &3u16.to_le_bytes());
        assert_eq!(&buf[20..28], &1u64.to_le_bytes());
        assert_eq!(&buf[28..36], &2u64.to_le_bytes());
        assert_eq!(buf.len(), 44);
    }
}
