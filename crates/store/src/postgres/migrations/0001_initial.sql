-- Ferry PostgreSQL schema, version 1.
--
-- message_queue repeats a message's priority, sender and receiver so that every retrieval
-- (by queue in either order, by sender, addressed) is one index scan of one table.
-- A message_queue row is ready when lease_delivery_id is NULL, in flight otherwise.

CREATE TABLE clients (
    id            bigserial PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    -- The node holding the client's live session and its last heartbeat (multi-node; unused
    -- by a single node).
    node          text,
    heartbeat_at  timestamptz
);

CREATE TABLE queues (
    id    bigserial PRIMARY KEY,
    name  text NOT NULL UNIQUE
);

CREATE TABLE messages (
    id          bigint PRIMARY KEY,
    sender_id   bigint NOT NULL REFERENCES clients (id),
    receiver_id bigint REFERENCES clients (id),
    priority    smallint NOT NULL,
    context     bigint NOT NULL,
    -- ms since the Unix epoch, as the broker stamped it.
    created_at  bigint NOT NULL,
    properties  jsonb NOT NULL,
    body        bytea NOT NULL
);

CREATE SEQUENCE message_ids AS bigint;
CREATE SEQUENCE delivery_ids AS bigint;

CREATE TABLE message_queue (
    message_id        bigint NOT NULL REFERENCES messages (id),
    queue_id          bigint NOT NULL REFERENCES queues (id),
    priority          smallint NOT NULL,
    sender_id         bigint NOT NULL,
    receiver_id       bigint,
    -- Client-ack deliveries started so far (the one in flight included).
    delivery_count    integer NOT NULL DEFAULT 0,
    -- The lease of an in-flight delivery: all NULL when ready.
    lease_node        text,
    lease_session     bigint,
    lease_until       bigint,
    lease_delivery_id bigint UNIQUE,
    PRIMARY KEY (message_id, queue_id)
);

CREATE INDEX mq_ready_priority ON message_queue (queue_id, priority DESC, message_id)
    WHERE lease_delivery_id IS NULL;
CREATE INDEX mq_ready_time ON message_queue (queue_id, message_id)
    WHERE lease_delivery_id IS NULL;
CREATE INDEX mq_ready_sender_priority ON message_queue (sender_id, priority DESC, message_id)
    WHERE lease_delivery_id IS NULL;
CREATE INDEX mq_ready_sender_time ON message_queue (sender_id, message_id)
    WHERE lease_delivery_id IS NULL;
CREATE INDEX mq_ready_receiver ON message_queue (receiver_id, queue_id)
    WHERE lease_delivery_id IS NULL AND receiver_id IS NOT NULL;
CREATE INDEX mq_leases_by_session ON message_queue (lease_node, lease_session)
    WHERE lease_delivery_id IS NOT NULL;
CREATE INDEX mq_leases_by_deadline ON message_queue (lease_until)
    WHERE lease_delivery_id IS NOT NULL;
CREATE INDEX mq_queue ON message_queue (queue_id);
