//! Message bodies of English-like text: words drawn from a small built-in list, with
//! sentence punctuation, so that bodies look like what FTaB's clients sent (prose up to 2000
//! characters) rather than a constant filler.
//!
//! A body is a 16-byte header (context and run id, little endian: the drivers have no context
//! field, so Tola and Maruja carry it in the body) followed by text cut from a block generated
//! once per run at a random offset.

use bytes::{BufMut, Bytes, BytesMut};
use rand::{Rng, SeedableRng};

/// Bytes before the text.
pub const HEADER_LEN: usize = 16;

/// Size of the generated text block.
const BLOCK_LEN: usize = 64 * 1024;

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "message",
    "queue",
    "server",
    "client",
    "order",
    "shipment",
    "harbour",
    "ferry",
    "river",
    "morning",
    "evening",
    "request",
    "reply",
    "priority",
    "database",
    "worker",
    "thread",
    "network",
    "delivery",
    "crossing",
    "passenger",
    "ticket",
    "schedule",
    "weather",
    "captain",
    "deck",
    "cargo",
    "island",
    "bridge",
    "station",
    "quickly",
    "slowly",
    "carefully",
    "always",
    "never",
    "often",
    "small",
    "large",
    "early",
    "late",
    "north",
    "south",
    "east",
    "west",
    "another",
];

/// Generates bodies for one run.
#[derive(Debug, Clone)]
pub struct TextSource {
    block: Bytes,
}

impl TextSource {
    /// A source with its text generated from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut text = String::with_capacity(BLOCK_LEN + 32);
        let mut capital = true;
        while text.len() < BLOCK_LEN {
            let word = WORDS
                .get(rng.gen_range(0..WORDS.len()))
                .copied()
                .unwrap_or_default();
            if capital {
                let mut chars = word.chars();
                if let Some(first) = chars.next() {
                    text.push(first.to_ascii_uppercase());
                    text.push_str(chars.as_str());
                }
            } else {
                text.push_str(word);
            }
            capital = false;
            match rng.gen_range(0..20) {
                0 => {
                    text.push_str(". ");
                    capital = true;
                }
                1 => text.push_str(", "),
                _ => text.push(' '),
            }
        }
        TextSource {
            block: Bytes::from(text.into_bytes()),
        }
    }

    /// A body of `size` bytes (at least the header) carrying `context` and `run_id`.
    pub fn body(&self, size: usize, context: u64, run_id: u64) -> Bytes {
        let size = size.max(HEADER_LEN);
        let text_len = (size - HEADER_LEN).min(self.block.len());
        let start = rand::thread_rng().gen_range(0..=self.block.len() - text_len);
        let mut b = BytesMut::with_capacity(size);
        b.put_u64_le(context);
        b.put_u64_le(run_id);
        b.put_slice(self.block.get(start..start + text_len).unwrap_or_default());
        // Bodies larger than the block repeat spaces; 64 KiB covers FTaB's 2000 characters.
        b.put_bytes(b' ', size - HEADER_LEN - text_len);
        b.freeze()
    }
}

/// The context and run id of a body, if it is long enough to hold them.
pub fn header(body: &[u8]) -> Option<(u64, u64)> {
    let context = u64::from_le_bytes(body.get(0..8)?.try_into().ok()?);
    let run_id = u64::from_le_bytes(body.get(8..16)?.try_into().ok()?);
    Some((context, run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_text_with_a_header() {
        let source = TextSource::new(7);
        let body = source.body(2000, 42, 9);
        assert_eq!(body.len(), 2000);
        assert_eq!(header(&body), Some((42, 9)));
        let text = std::str::from_utf8(&body[HEADER_LEN..]).unwrap();
        assert!(
            text.split(' ').filter(|w| !w.is_empty()).count() > 200,
            "{text}"
        );
        assert!(text
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b" .,".contains(&b)));
        assert_eq!(source.body(10, 1, 2).len(), HEADER_LEN);
        assert_eq!(header(b"short"), None);
    }
}
