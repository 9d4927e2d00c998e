//! Publishing: which subscription queues a message published to a topic goes to: those of the
//! topic's subscriptions and of the subscriptions on every pattern the topic matches (found by
//! a walk over the topic's words in the same statement; see migration 9), each once.
//!
//! Other nodes may subscribe or unsubscribe at any moment, so a batch that publishes reads the
//! subscriptions of its topics in its own transaction, with one statement that also locks them
//! `FOR KEY SHARE`: an unsubscribe (or a topic's deletion) waits until the batch commits, so no
//! message is placed on a queue being deleted. A subscription created while the batch runs is
//! either seen or not, and then gets only later messages, which is what "published after it
//! exists" allows.
//!
//! Selectors are evaluated in Rust over the message as the store was handed it. Parsing is
//! done once per selector text and kept in [`Selectors`], keyed by that text: the text is the
//! whole of a parsed selector's meaning, so an entry can never be stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferry_protocol::subscription_queue;
use ferry_selector::{Header, Selector, SelectorSource, Value};

use super::tx::TxResult;
use crate::api::NewMessage;
use crate::error::StoreError;
use crate::select;

/// Parsed selectors kept before the cache is cleared (texts of dropped subscriptions would
/// otherwise pile up).
const MAX_CACHED: usize = 4096;

/// Parsed selectors by their text.
#[derive(Debug, Default)]
pub struct Selectors {
    parsed: Mutex<HashMap<String, Arc<Selector>>>,
}

impl Selectors {
    /// The parsed form of `text`; `None` for the empty selector (every message).
    /// `InvalidArgument` when it does not parse.
    pub fn get(&self, text: &str) -> Result<Option<Arc<Selector>>, StoreError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        if let Ok(parsed) = self.parsed.lock() {
            if let Some(s) = parsed.get(text) {
                return Ok(Some(s.clone()));
            }
        }
        let s = Arc::new(
            Selector::parse(text)
                .map_err(|e| StoreError::InvalidArgument(format!("bad selector: {e}")))?,
        );
        if let Ok(mut parsed) = self.parsed.lock() {
            if parsed.len() >= MAX_CACHED {
                parsed.clear();
            }
            parsed.insert(text.to_owned(), s.clone());
        }
        Ok(Some(s))
    }
}

/// One subscription of a topic, as a publish needs it.
#[derive(Debug, Clone)]
pub struct Subscriber {
    /// Its queue's id.
    pub queue_id: i64,
    /// Its queue's name (`topic:name`).
    pub queue: String,
    /// `None`: it takes every message.
    pub selector: Option<Arc<Selector>>,
}

impl Subscriber {
    /// Whether `m` goes to this subscription.
    pub fn wants(&self, m: &NewMessage) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|s| s.matches(&NewMessageSource(m)))
    }
}

/// Finds the subscriptions a publish to each topic of `$1` reaches: the topic's own and those
/// of every pattern it matches, one row per (topic, subscription) with the topic or pattern the
/// subscription names, and one row without a subscription per existing topic (so that a topic
/// without subscriptions is known to exist). Every subscription row is locked `FOR KEY SHARE`.
///
/// `walk` holds, per topic, the prefixes of its words (with `*` for any word) that begin some
/// pattern, found by range probes of the `topics_patterns` index; `candidates` the pattern
/// names that match if they exist: a full-length prefix, or a prefix followed by `>` while
/// words remain.
///
/// The subscriptions are locked in queue id order, as every statement that locks several
/// does (no deadlocks), but found through their primary key by topic: ordering by the
/// expression `queue_id + 0`, which no index provides, leaves the planner (whose sorts are
/// priced out on Ferry's connections) only the sort of the few rows found, instead of a walk
/// of the queue id index over every subscription of every topic.
const SUBSCRIBERS: &str = "\
WITH RECURSIVE pub AS ( \
  SELECT id, name, string_to_array(name, '.') AS words FROM topics \
  WHERE name = ANY($1) AND NOT is_pattern), \
walk (topic, depth, prefix) AS ( \
  SELECT name, 0, ''::text FROM pub \
  UNION ALL \
  SELECT w.topic, w.depth + 1, c.prefix FROM walk w JOIN pub p ON p.name = w.topic \
  CROSS JOIN LATERAL unnest(ARRAY[p.words[w.depth + 1], '*']) AS x (word) \
  CROSS JOIN LATERAL (SELECT CASE WHEN w.depth = 0 THEN x.word \
                      ELSE w.prefix || '.' || x.word END AS prefix) c \
  WHERE w.depth + 1 < cardinality(p.words) \
    AND EXISTS (SELECT 1 FROM topics t WHERE t.is_pattern \
                AND t.name COLLATE \"C\" >= c.prefix || '.' \
                AND t.name COLLATE \"C\" < c.prefix || '/')), \
candidates (topic, name) AS ( \
  SELECT w.topic, CASE WHEN w.depth = 0 THEN x.word ELSE w.prefix || '.' || x.word END \
  FROM walk w JOIN pub p ON p.name = w.topic \
  CROSS JOIN LATERAL unnest(ARRAY[p.words[w.depth + 1], '*']) AS x (word) \
  WHERE w.depth + 1 = cardinality(p.words) \
  UNION ALL \
  SELECT w.topic, CASE WHEN w.depth = 0 THEN '>' ELSE w.prefix || '.>' END FROM walk w), \
targets (topic, topic_id, filter) AS ( \
  SELECT name, id, name FROM pub \
  UNION ALL \
  SELECT c.topic, t.id, t.name FROM candidates c \
  JOIN topics t ON t.name = c.name AND t.is_pattern), \
s AS (SELECT s.topic_id, s.queue_id, s.name, s.selector FROM subscriptions s \
  WHERE s.topic_id = ANY(ARRAY(SELECT topic_id FROM targets)) \
  ORDER BY s.queue_id + 0 FOR KEY SHARE) \
SELECT g.topic, s.queue_id, s.name, s.selector, g.filter \
FROM targets g LEFT JOIN s ON s.topic_id = g.topic_id";

/// The subscriptions a publish to each of `topics` that exists reaches (its own and its
/// patterns'; a topic without any maps to an empty list), locked `FOR KEY SHARE` within `tx`.
pub async fn subscribers(
    tx: &deadpool_postgres::Transaction<'_>,
    selectors: &Selectors,
    topics: &[&str],
) -> TxResult<HashMap<String, Vec<Subscriber>>> {
    let stmt = tx.prepare_cached(SUBSCRIBERS).await?;
    let mut out: HashMap<String, Vec<Subscriber>> = HashMap::new();
    for row in tx.query(&stmt, &[&topics]).await? {
        let topic: String = row.try_get(0)?;
        let queue_id: Option<i64> = row.try_get(1)?;
        let subs = out.entry(topic.clone()).or_default();
        let Some(queue_id) = queue_id else {
            continue;
        };
        let name: String = row.try_get(2)?;
        let text: String = row.try_get(3)?;
        let filter: String = row.try_get(4)?;
        // Checked when the subscription was made; a text that no longer parses (a newer
        // binary's syntax) selects nothing rather than everything.
        let selector = match selectors.get(&text) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(topic = %topic, subscription = %name, error = %e,
                    "a subscription's selector does not parse; it gets no messages");
                continue;
            }
        };
        subs.push(Subscriber {
            queue_id,
            queue: subscription_queue(&filter, &name),
            selector,
        });
    }
    Ok(out)
}

/// A message about to be stored, as a selector sees it.
#[derive(Debug, Clone, Copy)]
pub struct NewMessageSource<'a>(pub &'a NewMessage);

impl SelectorSource for NewMessageSource<'_> {
    fn header(&self, h: Header) -> Value<'_> {
        let m = self.0;
        select::header(
            h,
            m.priority,
            &m.sender,
            m.receiver.as_deref(),
            m.context,
            m.created_at,
        )
    }

    fn property(&self, name: &str) -> Value<'_> {
        select::property(&self.0.properties, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_protocol::PropertyValue;

    fn message() -> NewMessage {
        NewMessage {
            queues: Vec::new(),
            topic: Some("t".into()),
            persistent: true,
            sender: "shop".into(),
            receiver: None,
            priority: 7,
            context: 9,
            properties: vec![("region".into(), PropertyValue::Str("eu".into()))].into(),
            body: Bytes::new(),
            created_at: 1_700_000_000_000,
            deliver_at_ms: 0,
            expires_at_ms: 0,
        }
    }

    #[test]
    fn selectors_are_parsed_once_and_bad_ones_refused() {
        let cache = Selectors::default();
        assert!(cache.get("").unwrap().is_none());
        assert!(cache.get("  ").unwrap().is_none());
        let a = cache.get("region = 'eu'").unwrap().unwrap();
        let b = cache.get("region = 'eu'").unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "the second lookup reuses the parsed selector"
        );
        assert!(matches!(
            cache.get("region = "),
            Err(StoreError::InvalidArgument(_))
        ));
    }

    #[test]
    fn subscribers_select_on_headers_and_properties() {
        let cache = Selectors::default();
        let sub = |text: &str| Subscriber {
            queue_id: 1,
            queue: "t:s".into(),
            selector: cache.get(text).unwrap(),
        };
        let m = message();
        for (text, expected) in [
            ("", true),
            ("region = 'eu' AND priority = 7", true),
            ("sender = 'shop' AND receiver IS NULL AND context = 9", true),
            ("created_at = 1700000000000", true),
            ("region = 'us'", false),
            ("missing > 1", false),
        ] {
            assert_eq!(sub(text).wants(&m), expected, "{text}");
        }
    }
}
