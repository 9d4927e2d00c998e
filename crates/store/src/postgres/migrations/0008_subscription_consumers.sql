-- Ferry PostgreSQL schema, version 8: who consumes each topic subscription, on every node.
--
-- A subscription that is not shared admits one consuming session at a time across all the
-- nodes sharing the database, so each consumer is a row here: (subscription queue, node,
-- session), with how many consumers that session has on it. Attaching locks the
-- subscription's row (FOR NO KEY UPDATE: publishes, which lock it FOR KEY SHARE, go on), so two
-- nodes attaching at once are serialised. Rows go when the consumer ends, with their session,
-- with their node (taken for dead, or leaving), and with the subscription (no foreign key, as
-- for message_queue: the engine deletes them with it).

CREATE TABLE subscription_consumers (
    queue_id   bigint NOT NULL,
    node       text NOT NULL,
    session    bigint NOT NULL,
    shared     boolean NOT NULL,
    consumers  integer NOT NULL,
    PRIMARY KEY (queue_id, node, session)
);
CREATE INDEX subscription_consumers_by_node ON subscription_consumers (node, session);
