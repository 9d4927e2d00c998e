-- Ferry PostgreSQL schema, version 10: client names expire.
--
-- - last_seen: when the client's last session ended (ms since the Unix epoch, by the clock of
--   the node that served it), or when the name was registered. A name with no session, offline
--   since before the broker's `client_expiry` and holding nothing (no message sent by it or
--   addressed to it, no durable subscription of its own) is deleted by the upkeep. Rows from
--   before this version count as seen now.
-- - ephemeral: the name was registered for its session only; the upkeep deletes it once the
--   session ended and it holds nothing, whatever last_seen says.
--
-- A deleted name's id is never reused (ids come from a sequence); a node that still has it
-- cached finds out when it locks the row (sends lock their receivers' rows FOR KEY SHARE).

ALTER TABLE clients
    ADD COLUMN last_seen bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint;
ALTER TABLE clients ADD COLUMN ephemeral boolean NOT NULL DEFAULT false;
CREATE INDEX clients_offline ON clients (last_seen) WHERE node IS NULL;
