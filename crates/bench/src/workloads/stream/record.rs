//! Kieker's operation-execution record, as the `stream` workload's writer emits it: operation
//! signature, session id, trace id, entry and exit times, host name, execution order index and
//! stack depth, encoded in exactly [`RECORD_LEN`] bytes (Kieker's binary records are about 150
//! bytes). The sequence number comes first, so that the reader can count distinct records and
//! the loss; the entry time is the writer's clock when the record was made, so that the reader
//! can tell how old it is.
//!
//! ```text
//! seq u64 | trace_id u64 | tin_ns u64 | tout_ns u64 | eoi u32 | ess u32
//! | u16 len + operation signature | u16 len + session id | u16 len + host name
//! ```

/// Bytes of one encoded record.
pub const RECORD_LEN: usize = 150;
/// Bytes of the session id, which carries the writer's run id (hex), so that the reader
/// tells this run's records from those of an earlier run left in a queue.
pub const SESSION_LEN: usize = 16;
const HOST: &str = "app-host-01";
const SIGNATURE: &str =
    "public boolean kieker.examples.bookstore.Catalog.getBook(boolean) throws java.io.IOException";
/// Fixed-size fields: four u64, two u32, three u16 length prefixes.
const FIXED: usize = 4 * 8 + 2 * 4 + 3 * 2;
/// The signature's length, so that the record is exactly [`RECORD_LEN`] bytes.
const SIGNATURE_LEN: usize = RECORD_LEN - FIXED - SESSION_LEN - HOST.len();

/// The session id of run `run_id`.
pub fn session(run_id: u64) -> [u8; SESSION_LEN] {
    let mut s = [0u8; SESSION_LEN];
    let hex = format!("{run_id:016X}");
    s.copy_from_slice(hex.as_bytes());
    s
}

/// Appends record `seq` of the run with session id `session`, made at `now_ns` (ns since the
/// Unix epoch), to `out`.
pub fn encode(seq: u64, now_ns: u64, session: &[u8; SESSION_LEN], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&seq.to_be_bytes());
    // A trace of 8 calls: trace id, and the call's place in it.
    out.extend_from_slice(&(seq / 8).to_be_bytes());
    out.extend_from_slice(&now_ns.to_be_bytes());
    out.extend_from_slice(&(now_ns + 1_500).to_be_bytes());
    out.extend_from_slice(&((seq % 8) as u32).to_be_bytes());
    out.extend_from_slice(&((seq % 8).min(3) as u32).to_be_bytes());
    for s in [
        SIGNATURE
            .as_bytes()
            .get(..SIGNATURE_LEN)
            .unwrap_or_default(),
        &session[..],
        HOST.as_bytes(),
    ] {
        out.extend_from_slice(&(s.len() as u16).to_be_bytes());
        out.extend_from_slice(s);
    }
    debug_assert_eq!(out.len() - start, RECORD_LEN);
}

/// Where the session id lies in a record.
const SESSION_AT: usize = FIXED - 2 + SIGNATURE_LEN;

/// The sequence number and entry time (ns) of a record of the run with `session`; `None` for
/// anything else.
pub fn decode(record: &[u8], session: &[u8; SESSION_LEN]) -> Option<(u64, u64)> {
    if record.len() != RECORD_LEN || record.get(SESSION_AT..SESSION_AT + SESSION_LEN)? != session {
        return None;
    }
    let seq = u64::from_be_bytes(record.get(..8)?.try_into().ok()?);
    let tin = u64::from_be_bytes(record.get(16..24)?.try_into().ok()?);
    Some((seq, tin))
}

/// ns since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Which sequence numbers arrived: counts distinct records and duplicates.
#[derive(Debug, Default)]
pub struct SeqSet {
    bits: Vec<u64>,
    /// Distinct sequence numbers seen.
    pub distinct: u64,
    /// Sequence numbers seen more than once.
    pub duplicates: u64,
}

impl SeqSet {
    /// Marks `seq`; `true` when it is new.
    pub fn insert(&mut self, seq: u64) -> bool {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.bits.len() {
            self.bits.resize((word + 1).next_power_of_two(), 0);
        }
        let mask = 1u64 << bit;
        match self.bits.get_mut(word) {
            Some(w) if *w & mask == 0 => {
                *w |= mask;
                self.distinct += 1;
                true
            }
            _ => {
                self.duplicates += 1;
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_150_bytes_and_decodes() {
        let mut out = Vec::new();
        let s = session(0xabc);
        assert_eq!(&s, b"0000000000000ABC");
        encode(42, 1_700_000_000_000_000_000, &s, &mut out);
        encode(43, 5, &s, &mut out);
        assert_eq!(out.len(), 2 * RECORD_LEN);
        assert_eq!(
            decode(&out[..RECORD_LEN], &s),
            Some((42, 1_700_000_000_000_000_000))
        );
        assert_eq!(decode(&out[RECORD_LEN..], &s), Some((43, 5)));
        assert_eq!(decode(&out[..10], &s), None);
        assert_eq!(
            decode(&out[..RECORD_LEN], &session(1)),
            None,
            "another run's"
        );
        let text = String::from_utf8_lossy(&out[..RECORD_LEN]);
        assert!(text.contains("kieker.examples.bookstore") && text.contains(HOST));
    }

    #[test]
    fn the_set_counts_distinct_and_duplicates() {
        let mut s = SeqSet::default();
        assert!(s.insert(0));
        assert!(s.insert(1000));
        assert!(!s.insert(1000));
        assert!(s.insert(63));
        assert_eq!((s.distinct, s.duplicates), (3, 1));
    }
}
