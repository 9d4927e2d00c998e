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

use bytes::BufMut;

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

/// Bytes of the fields that change from record to record (four u64, two u32); the rest of a
/// record is the same throughout a run.
const VARYING: usize = 4 * 8 + 2 * 4;

/// Encodes the records of one run: the fields that do not change (signature, session id, host
/// name, with their lengths) are laid out once, and each record is that template with its own
/// numbers written over it. The writer makes records as fast as it can: building each field by
/// field cost it as much CPU as a broker's whole handling of the record.
#[derive(Debug, Clone)]
pub struct Encoder {
    template: [u8; RECORD_LEN],
}

impl Encoder {
    /// The encoder of the run with session id `session`.
    pub fn new(session: &[u8; SESSION_LEN]) -> Encoder {
        let mut template = [0u8; RECORD_LEN];
        let mut at = VARYING;
        for s in [
            SIGNATURE
                .as_bytes()
                .get(..SIGNATURE_LEN)
                .unwrap_or_default(),
            &session[..],
            HOST.as_bytes(),
        ] {
            for part in [&(s.len() as u16).to_be_bytes()[..], s] {
                if let Some(slot) = template.get_mut(at..at + part.len()) {
                    slot.copy_from_slice(part);
                }
                at += part.len();
            }
        }
        debug_assert_eq!(at, RECORD_LEN);
        Encoder { template }
    }

    /// Appends record `seq`, made at `now_ns` (ns since the Unix epoch), to `out`.
    pub fn encode<B: BufMut + AsMut<[u8]>>(&self, seq: u64, now_ns: u64, out: &mut B) {
        out.put_slice(&self.template);
        let written = out.as_mut();
        let start = written.len() - RECORD_LEN;
        let Some(fields) = written.get_mut(start..start + VARYING) else {
            return;
        };
        // A trace of 8 calls: trace id, and the call's place in it.
        let numbers = [seq, seq / 8, now_ns, now_ns + 1_500];
        for (slot, n) in fields.chunks_exact_mut(8).zip(numbers) {
            slot.copy_from_slice(&n.to_be_bytes());
        }
        if let Some(order) = fields.get_mut(32..VARYING) {
            let (eoi, ess) = order.split_at_mut(4);
            eoi.copy_from_slice(&((seq % 8) as u32).to_be_bytes());
            ess.copy_from_slice(&((seq % 8).min(3) as u32).to_be_bytes());
        }
    }
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
        let encoder = Encoder::new(&s);
        encoder.encode(42, 1_700_000_000_000_000_000, &mut out);
        encoder.encode(43, 5, &mut out);
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
        // Field by field: the numbers of record 43, then the strings with their lengths.
        let r = &out[RECORD_LEN..];
        assert_eq!(&r[..8], &43u64.to_be_bytes());
        assert_eq!(&r[8..16], &5u64.to_be_bytes(), "trace id: seq / 8");
        assert_eq!(&r[24..32], &1_505u64.to_be_bytes(), "exit time");
        assert_eq!(&r[32..36], &3u32.to_be_bytes(), "execution order: seq % 8");
        assert_eq!(&r[36..40], &3u32.to_be_bytes(), "stack depth");
        assert_eq!(&r[40..42], &(SIGNATURE_LEN as u16).to_be_bytes());
        assert_eq!(&r[SESSION_AT - 2..SESSION_AT], &16u16.to_be_bytes());
        assert_eq!(&r[RECORD_LEN - HOST.len()..], HOST.as_bytes());
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
