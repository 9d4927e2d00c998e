-- Ferry PostgreSQL schema, version 11: figures per queue for operators.
--
-- body_bytes: the size of the message's body on each of its queue rows, so the bytes a queue
-- holds are summed over its rows without reading the bodies. Rows already stored get theirs
-- once, here.
--
-- queue_counters: messages that entered and left each queue. Each node counts what its own
-- transactions did in memory and adds it here about once a second, to its own row per queue
-- (nodes never wait on each other's rows); a queue's totals are the sum over the nodes. No
-- foreign key, as for message_queue: rows of a deleted queue go with it.

ALTER TABLE message_queue ADD COLUMN body_bytes integer NOT NULL DEFAULT 0;
UPDATE message_queue mq SET body_bytes = octet_length(m.body)
    FROM messages m WHERE m.id = mq.message_id;

CREATE TABLE queue_counters (
    queue_id   bigint NOT NULL,
    node       text NOT NULL,
    entered    bigint NOT NULL DEFAULT 0,
    left_total bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, node)
);
