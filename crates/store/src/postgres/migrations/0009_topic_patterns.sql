-- Ferry PostgreSQL schema, version 9: wildcard subscriptions on topic patterns.
--
-- - A subscription may name a pattern (`prices.*.fish`, `prices.>`) instead of a topic. A
--   pattern is a row of `topics` with `is_pattern` set, made by its first subscription and
--   removed with its last, so every table keyed by a topic id (subscriptions, the queues of
--   subscriptions) serves patterns unchanged. Pattern names contain `*` or `>` and topic names
--   cannot, so the two never collide on `name`.
-- - A publish finds the patterns its topic matches by walking the topic's words: starting from
--   the empty prefix, each step extends every live prefix by the next word and by `*`, and
--   keeps the extensions that begin some pattern, a range probe of `topics_patterns` (byte
--   order, so that the range `prefix.` to `prefix/` holds exactly the names that continue
--   `prefix`). At each step `prefix.>` and, after the last word, the prefix itself are
--   looked up by name. The cost is a few index probes per word of the topic, whatever the
--   number of patterns that do not match.

ALTER TABLE topics ADD COLUMN is_pattern boolean NOT NULL DEFAULT false;
CREATE INDEX topics_patterns ON topics (name COLLATE "C") WHERE is_pattern;
