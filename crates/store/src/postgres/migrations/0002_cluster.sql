-- Ferry PostgreSQL schema, version 2: several nodes over one database.
--
-- A client's live session is (node, session) on its clients row, set by a conditional UPDATE
-- so that only one node can hold it. Each node heartbeats its row of `nodes`; a node silent
-- for longer than the timeout is reaped by another: its claims end and its leases return.

ALTER TABLE clients ADD COLUMN session bigint;
-- Unused: liveness is per node, in `nodes`.
ALTER TABLE clients DROP COLUMN heartbeat_at;
CREATE INDEX clients_by_node ON clients (node) WHERE node IS NOT NULL;

CREATE TABLE nodes (
    name          text PRIMARY KEY,
    heartbeat_at  timestamptz NOT NULL
);
