//! Topic names and topic patterns (wildcard subscriptions).
//!
//! A topic name is a sequence of words separated by dots (`prices.eu.fish`), in the queue-name
//! alphabet. A subscription may name a **pattern** instead of a topic, with two wildcard words,
//! spelled as NATS and ActiveMQ spell them:
//!
//! - `*` stands for exactly one word: `prices.*.fish` matches `prices.eu.fish`, not
//!   `prices.fish` nor `prices.eu.north.fish`;
//! - `>` stands for one or more trailing words and may only be the last word: `prices.>`
//!   matches `prices.eu` and `prices.eu.fish`, not `prices`.
//!
//! A wildcard is a whole word (`pri*ces` and `prices.*x` are refused); other words of a pattern
//! match the same word of the topic exactly. Words are what `str::split('.')` gives, so an
//! empty word (`a..b`, allowed in topic names) is a word like any other.
//!
//! Patterns are for subscriptions only: a topic is created, deleted and published to by its
//! name, never by a pattern. [`matches()`] is the reference meaning; the stores keep indexes that
//! find the matching patterns of a topic without looking at the others.

use crate::limits::is_valid_name;

/// The wildcard word for exactly one word.
pub const ONE_WORD: &str = "*";

/// The wildcard word for one or more trailing words.
pub const TRAILING_WORDS: &str = ">";

/// Separates the words of a topic name or pattern.
pub const WORD_SEPARATOR: char = '.';

/// The property in which the broker gives every published message the topic it was published
/// to (a string), so that a receiver of a pattern subscription knows the concrete topic; a
/// selector may test it. A sender's own property of that name is replaced.
pub const TOPIC_PROPERTY: &str = "ferry_topic";

/// One word of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word<'a> {
    /// This word exactly.
    Literal(&'a str),
    /// `*`: any one word.
    One,
    /// `>`: one or more words (last word only).
    Trailing,
}

impl<'a> Word<'a> {
    /// The word `w` of a pattern.
    pub fn of(w: &'a str) -> Word<'a> {
        match w {
            ONE_WORD => Word::One,
            TRAILING_WORDS => Word::Trailing,
            _ => Word::Literal(w),
        }
    }
}

/// Whether `name` is a pattern: one of its words is `*` or `>` (it may still be malformed; see
/// [`check_pattern`]). Names without `*` and `>` anywhere are never patterns, so the test is
/// cheap for the topic names of publishes.
pub fn is_pattern(name: &str) -> bool {
    name.bytes().any(|b| b == b'*' || b == b'>')
}

/// Why a name is not a valid topic pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// Empty, too long, or a character outside `[A-Za-z0-9._-*>]`.
    #[error("use 1 to {0} characters of A-Z a-z 0-9 . _ - and the wildcard words * and >")]
    Characters(u16),
    /// `*` or `>` inside a word rather than as a whole word.
    #[error("the wildcards * and > must be whole words (between dots), as in 'prices.*.eu'")]
    PartialWord,
    /// `>` before the last word.
    #[error("> stands for the remaining words and must be the last word, as in 'prices.>'")]
    TrailingNotLast,
}

/// Checks that `pattern` is a well-formed topic pattern (or a plain topic name) of at most
/// `max_len` bytes.
pub fn check_pattern(pattern: &str, max_len: u16) -> Result<(), PatternError> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-';
    if pattern.is_empty()
        || pattern.len() > usize::from(max_len)
        || !pattern.bytes().all(|b| plain(b) || b == b'*' || b == b'>')
    {
        return Err(PatternError::Characters(max_len));
    }
    let mut words = pattern.split(WORD_SEPARATOR).peekable();
    while let Some(w) = words.next() {
        let wild = w.bytes().any(|b| b == b'*' || b == b'>');
        if wild && w != ONE_WORD && w != TRAILING_WORDS {
            return Err(PatternError::PartialWord);
        }
        if w == TRAILING_WORDS && words.peek().is_some() {
            return Err(PatternError::TrailingNotLast);
        }
    }
    Ok(())
}

/// Whether `name` is a topic name or a well-formed pattern: what a subscription may name.
pub fn is_valid_filter(name: &str, max_len: u16) -> bool {
    if is_pattern(name) {
        check_pattern(name, max_len).is_ok()
    } else {
        is_valid_name(name, max_len)
    }
}

/// Whether pattern `pattern` matches topic `topic` (a pattern without wildcards matches the
/// topic of that name only). The reference meaning of patterns, in time linear in the words.
pub fn matches(pattern: &str, topic: &str) -> bool {
    let mut topic_words = topic.split(WORD_SEPARATOR);
    for p in pattern.split(WORD_SEPARATOR) {
        match (Word::of(p), topic_words.next()) {
            (_, None) => return false,
            (Word::Trailing, Some(_)) => return true,
            (Word::One, Some(_)) => {}
            (Word::Literal(l), Some(t)) if l == t => {}
            (Word::Literal(_), Some(_)) => return false,
        }
    }
    topic_words.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_nats_and_activemq_spell_them() {
        for (pattern, topic, expected) in [
            ("prices.eu.fish", "prices.eu.fish", true),
            ("prices.*.fish", "prices.eu.fish", true),
            ("prices.>", "prices.eu.fish", true),
            ("prices.>", "prices.eu", true),
            ("prices.>", "prices", false),
            ("prices.*", "prices.eu.fish", false),
            ("prices.*", "prices", false),
            ("*.eu.*", "prices.eu.fish", true),
            ("*", "prices", true),
            ("*", "prices.eu", false),
            (">", "prices", true),
            (">", "a.b.c.d", true),
            ("prices.*.fish", "prices.fish", false),
            ("prices.*.fish", "prices.eu.north.fish", false),
            ("prices.eu", "prices.eu.fish", false),
            ("prices.eu.fish", "prices.eu", false),
            ("a.*.b", "a..b", true),
            ("prices.us.>", "prices.eu.fish", false),
        ] {
            assert_eq!(matches(pattern, topic), expected, "{pattern} ~ {topic}");
        }
    }

    #[test]
    fn wildcards_must_be_whole_words_and_trailing_last() {
        for ok in [
            "prices.>",
            "*.eu.*",
            "*",
            ">",
            "a.*.>",
            "plain.name",
            "a..*",
        ] {
            assert_eq!(check_pattern(ok, 200), Ok(()), "{ok}");
            assert!(is_valid_filter(ok, 200), "{ok}");
        }
        for (bad, e) in [
            ("pri*ces", PatternError::PartialWord),
            ("prices.*x", PatternError::PartialWord),
            ("prices.>>", PatternError::PartialWord),
            ("prices.>.eu", PatternError::TrailingNotLast),
            (">.>", PatternError::TrailingNotLast),
            ("", PatternError::Characters(200)),
            ("prices.#", PatternError::Characters(200)),
            ("a b.*", PatternError::Characters(200)),
        ] {
            assert_eq!(check_pattern(bad, 200), Err(e), "{bad}");
            assert!(!is_valid_filter(bad, 200), "{bad}");
        }
        assert_eq!(
            check_pattern("a.*", 2),
            Err(PatternError::Characters(2)),
            "the length limit holds for patterns too"
        );
        assert!(!is_pattern("prices.eu") && is_pattern("prices.>") && is_pattern("a*"));
        assert!(!is_valid_filter("no spaces", 200));
    }
}
