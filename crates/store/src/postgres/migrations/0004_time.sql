-- Ferry PostgreSQL schema, version 4: delayed delivery and time to live.
--
-- Times are ms since the Unix epoch as the broker's clock gives them; 0 = none.
-- - message_queue.deliver_at: the row is not visible to receives before it. Every receive
--   passes its current time and skips rows not due yet.
-- - message_queue.expires_at: the row is never delivered at or after it (receives skip it; the
--   broker's upkeep deletes expired ready rows). messages.expires_at is the same time, read
--   back with the message (deliveries carry it).
-- - mq_delayed: the rows with a delivery time, so the broker finds the next one due and the
--   queues whose delayed rows became due without scanning the others. mq_expiring: the ready
--   rows with an expiry time, for the upkeep's delete. Both are partial: rows without these
--   times (the usual case) add no entry.

ALTER TABLE messages ADD COLUMN expires_at bigint NOT NULL DEFAULT 0;
ALTER TABLE message_queue ADD COLUMN deliver_at bigint NOT NULL DEFAULT 0;
ALTER TABLE message_queue ADD COLUMN expires_at bigint NOT NULL DEFAULT 0;
CREATE INDEX mq_delayed ON message_queue (deliver_at) WHERE deliver_at > 0;
CREATE INDEX mq_expiring ON message_queue (expires_at)
    WHERE expires_at > 0 AND lease_delivery_id IS NULL;
