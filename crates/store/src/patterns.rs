//! [`PatternIndex`]: the topic patterns of wildcard subscriptions, indexed by word, so that
//! finding the patterns a topic matches costs time in the topic's words (and the patterns that
//! do match), never in the patterns that do not.
//!
//! A trie over words: each node has children by literal word, one child for `*`, and the
//! values of the patterns that end at it, with or without a trailing `>`. Matching walks the
//! topic's words, following at each node the literal child of that word and the `*` child, and
//! collecting the `>` value of every node passed with words still to come. Each pattern
//! matches a topic in at most one way (every pattern word lines up with one topic word), so
//! every matching pattern is reported exactly once. See [`ferry_protocol::topic`] for the
//! syntax and the reference meaning.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_protocol::topic::{Word, WORD_SEPARATOR};

/// Patterns (well-formed: see [`ferry_protocol::topic::check_pattern`]) with a value each.
#[derive(Debug)]
pub struct PatternIndex<V> {
    root: Node<V>,
    len: usize,
}

impl<V> Default for PatternIndex<V> {
    fn default() -> Self {
        PatternIndex {
            root: Node::default(),
            len: 0,
        }
    }
}

#[derive(Debug)]
struct Node<V> {
    literal: HashMap<Box<str>, Node<V>>,
    one: Option<Box<Node<V>>>,
    /// The pattern that ends here.
    end: Option<(Arc<str>, V)>,
    /// The pattern that is this node's path followed by `>`.
    trailing: Option<(Arc<str>, V)>,
}

impl<V> Default for Node<V> {
    fn default() -> Self {
        Node {
            literal: HashMap::new(),
            one: None,
            end: None,
            trailing: None,
        }
    }
}

impl<V> Node<V> {
    fn is_empty(&self) -> bool {
        self.literal.is_empty()
            && self.one.is_none()
            && self.end.is_none()
            && self.trailing.is_none()
    }

    /// Removes `pattern` (whose remaining words are `words`) below this node, pruning nodes
    /// left empty; returns its value.
    fn remove<'w>(&mut self, mut words: impl Iterator<Item = &'w str>) -> Option<V> {
        let Some(w) = words.next() else {
            return self.end.take().map(|(_, v)| v);
        };
        match Word::of(w) {
            Word::Trailing => self.trailing.take().map(|(_, v)| v),
            Word::One => {
                let child = self.one.as_mut()?;
                let v = child.remove(words);
                if child.is_empty() {
                    self.one = None;
                }
                v
            }
            Word::Literal(l) => {
                let child = self.literal.get_mut(l)?;
                let v = child.remove(words);
                if child.is_empty() {
                    self.literal.remove(l);
                }
                v
            }
        }
    }

    fn for_each_match<'s>(&'s self, topic: &[&str], f: &mut impl FnMut(&'s Arc<str>, &'s V)) {
        let Some((first, rest)) = topic.split_first() else {
            if let Some((p, v)) = &self.end {
                f(p, v);
            }
            return;
        };
        if let Some((p, v)) = &self.trailing {
            f(p, v);
        }
        if let Some(child) = self.literal.get(*first) {
            child.for_each_match(rest, f);
        }
        if let Some(child) = &self.one {
            child.for_each_match(rest, f);
        }
    }
}

impl<V> PatternIndex<V> {
    /// Number of patterns.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `pattern` with `value`, replacing (and returning) the value it had.
    pub fn insert(&mut self, pattern: &str, value: V) -> Option<V> {
        let mut node = &mut self.root;
        let mut words = pattern.split(WORD_SEPARATOR).peekable();
        while let Some(w) = words.next() {
            match Word::of(w) {
                // Only last (a well-formed pattern): the value sits on the node before it.
                Word::Trailing if words.peek().is_none() => {
                    let old = node.trailing.replace((Arc::from(pattern), value));
                    return self.counted(old);
                }
                Word::Trailing | Word::One => {
                    node = node.one.get_or_insert_with(Box::default);
                }
                Word::Literal(l) => node = node.literal.entry(l.into()).or_default(),
            }
        }
        let old = node.end.replace((Arc::from(pattern), value));
        self.counted(old)
    }

    fn counted(&mut self, old: Option<(Arc<str>, V)>) -> Option<V> {
        if old.is_none() {
            self.len += 1;
        }
        old.map(|(_, v)| v)
    }

    /// Removes `pattern`; returns its value if it was there.
    pub fn remove(&mut self, pattern: &str) -> Option<V> {
        let v = self.root.remove(pattern.split(WORD_SEPARATOR));
        if v.is_some() {
            self.len -= 1;
        }
        v
    }

    /// Calls `f` once for every pattern that matches `topic` (a topic name, not a pattern),
    /// with the pattern and its value, in no particular order.
    pub fn for_each_match<'s>(&'s self, topic: &str, mut f: impl FnMut(&'s Arc<str>, &'s V)) {
        if self.len == 0 {
            return;
        }
        // Topic names are short (at most a few hundred bytes): the words fit on the stack.
        let words: smallvec::SmallVec<[&str; 16]> = topic.split(WORD_SEPARATOR).collect();
        self.root.for_each_match(&words, &mut f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::topic::matches;
    use proptest::prelude::*;

    fn matching(index: &PatternIndex<u32>, topic: &str) -> Vec<String> {
        let mut out = Vec::new();
        index.for_each_match(topic, |p, _| out.push(p.to_string()));
        out.sort();
        out
    }

    #[test]
    fn a_topic_finds_exactly_its_patterns_once_each() {
        let mut index = PatternIndex::default();
        for (i, p) in [
            "prices.eu.fish",
            "prices.*.fish",
            "prices.>",
            "*.eu.*",
            ">",
            "prices.*",
            "prices.us.>",
            "prices.eu.fish.>",
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(index.insert(p, i as u32), None);
        }
        assert_eq!(index.len(), 8);
        assert_eq!(
            matching(&index, "prices.eu.fish"),
            vec!["*.eu.*", ">", "prices.*.fish", "prices.>", "prices.eu.fish"]
        );
        assert_eq!(matching(&index, "prices"), vec![">"]);
        assert_eq!(
            matching(&index, "prices.eu"),
            vec![">", "prices.*", "prices.>"]
        );
        assert_eq!(index.insert("prices.>", 99), Some(2), "replaces");
        assert_eq!(index.len(), 8);
        assert_eq!(index.remove("prices.>"), Some(99));
        assert_eq!(index.remove("prices.>"), None);
        assert_eq!(index.remove("nothing.*"), None);
        assert_eq!(index.len(), 7);
        assert_eq!(matching(&index, "prices.eu"), vec![">", "prices.*"]);
    }

    #[test]
    fn removing_every_pattern_leaves_an_empty_trie() {
        let mut index = PatternIndex::default();
        let patterns = ["a.*.c", "a.*.>", "a.b.c", "*", ">", "a.*"];
        for p in patterns {
            index.insert(p, ());
        }
        for p in patterns {
            assert_eq!(index.remove(p), Some(()), "{p}");
        }
        assert!(index.is_empty());
        assert!(
            index.root.is_empty(),
            "every node was pruned: {:?}",
            index.root
        );
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof!["a", "b", "c", ""].prop_map(String::from)
    }

    fn pattern() -> impl Strategy<Value = String> {
        (
            proptest::collection::vec(prop_oneof![word(), Just("*".to_string())], 1..4),
            any::<bool>(),
        )
            .prop_map(|(mut words, trailing)| {
                if trailing {
                    words.push(">".into());
                }
                words.join(".")
            })
    }

    fn topic() -> impl Strategy<Value = String> {
        proptest::collection::vec(word(), 1..6).prop_map(|w| w.join("."))
    }

    proptest! {
        /// The index finds what the reference matcher says, after inserts and removals.
        #[test]
        fn the_index_agrees_with_the_reference_matcher(
            patterns in proptest::collection::vec(pattern(), 0..20),
            removed in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
            topics in proptest::collection::vec(topic(), 1..10),
        ) {
            let mut index = PatternIndex::default();
            let mut live: std::collections::BTreeSet<String> = Default::default();
            for p in &patterns {
                index.insert(p, ());
                live.insert(p.clone());
            }
            for r in removed {
                if patterns.is_empty() { break; }
                let p = r.get(&patterns);
                index.remove(p);
                live.remove(p);
            }
            prop_assert_eq!(index.len(), live.len());
            for t in &topics {
                let mut found = Vec::new();
                index.for_each_match(t, |p, _| found.push(p.to_string()));
                found.sort();
                let expected: Vec<String> =
                    live.iter().filter(|p| matches(p, t)).cloned().collect();
                prop_assert_eq!(found, expected, "topic {}", t);
            }
        }
    }
}
