-- Ferry PostgreSQL schema, version 7: topics and their subscriptions.
--
-- - A subscription is backed by a queue named `topic:name`, an ordinary row of `queues` (with
--   its maximum delivery count, dead-letter and expiry queues), marked by `queues.topic_id` so
--   that listings of queues leave it out.
-- - A publish reads its topic's subscriptions (locking them FOR KEY SHARE, so an unsubscribe or
--   a topic's deletion waits for it), evaluates their selectors in the engine and inserts one
--   message_queue row per matching subscription.
-- - message_queue.sender_id is NULL on the rows of subscription queues: receives by sender
--   look rows up by that column, and a subscription's messages belong to its topic, not to the
--   sender's queues. The message's sender stays in messages.sender_id. The indexes by sender
--   leave those rows out (`sender_id = $1` implies their predicate), so a message published to
--   n subscriptions costs 2 x n index entries fewer than one sent to n queues. Rebuilding them
--   reads message_queue once, while the migration holds its lock.
-- - `owner` is the client whose session made a non-durable subscription: when that client's
--   claim is freed for it (its node died or left), the subscription goes with its messages.

CREATE TABLE topics (
    id    bigserial PRIMARY KEY,
    name  text NOT NULL UNIQUE
);

CREATE TABLE subscriptions (
    topic_id  bigint NOT NULL,
    name      text NOT NULL,
    queue_id  bigint NOT NULL UNIQUE,
    durable   boolean NOT NULL,
    shared    boolean NOT NULL,
    -- '' when every message is selected.
    selector  text NOT NULL,
    owner     text NOT NULL,
    PRIMARY KEY (topic_id, name)
);
CREATE INDEX subscriptions_by_owner ON subscriptions (owner) WHERE NOT durable;

ALTER TABLE queues ADD COLUMN topic_id bigint;
ALTER TABLE message_queue ALTER COLUMN sender_id DROP NOT NULL;

DROP INDEX mq_ready_sender_priority;
DROP INDEX mq_ready_sender_time;
CREATE INDEX mq_ready_sender_priority ON message_queue (sender_id, priority DESC, message_id)
    WHERE lease_delivery_id IS NULL AND sender_id IS NOT NULL;
CREATE INDEX mq_ready_sender_time ON message_queue (sender_id, message_id)
    WHERE lease_delivery_id IS NULL AND sender_id IS NOT NULL;
