-- Ferry PostgreSQL schema, version 3: fewer index entries and no per-row triggers on the hot
-- path (every message is inserted, leased and deleted once; each index entry and foreign-key
-- check costs the database CPU and WAL for every message).
--
-- - Foreign keys go: the engine keeps the references itself (a batch locks the queues it
--   writes to FOR KEY SHARE, so delete_queue waits for it; clients are never deleted; a
--   message row goes with its last queue row). Their per-row checks were a large share of the
--   cost of a send and of an ack.
-- - message_queue loses its primary key (queue_id, message_id) and mq_queue: every row version
--   paid an entry in each, yet the hot path finds rows through the ready indexes, by `ctid`
--   (rows it locked itself) or by delivery id. The pair stays unique by construction (one
--   insert per message and queue). What counted or deleted a queue's rows uses the ready index
--   by time plus the leased rows; the lookup by message id, needed only for messages on several
--   queues, is a partial index on the rows that are not `alone`.
-- - `alone`: the message is on this one queue only (set on insert; rows from before this
--   version count as not alone). Removing an alone row removes its message at once, without
--   locking the message row and looking for its other queue rows.
-- - One index over leased rows, by delivery id, replaces the unique constraint on the delivery
--   id (an entry for every ready row too) and the indexes by session and by deadline: acks and
--   nacks look leases up by delivery id; releasing a session, expiring leases and freeing a
--   dead node scan the leased rows, which the prefetch windows keep few. Fewer indexes over
--   the same rows also leave the planner no worse path for the lookups made at every ack.

ALTER TABLE message_queue DROP CONSTRAINT message_queue_message_id_fkey;
ALTER TABLE message_queue DROP CONSTRAINT message_queue_queue_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_sender_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_receiver_id_fkey;

ALTER TABLE message_queue ADD COLUMN alone boolean NOT NULL DEFAULT false;

ALTER TABLE message_queue DROP CONSTRAINT message_queue_pkey;
DROP INDEX mq_queue;
CREATE INDEX mq_shared_by_message ON message_queue (message_id) WHERE NOT alone;

ALTER TABLE message_queue DROP CONSTRAINT message_queue_lease_delivery_id_key;
DROP INDEX mq_leases_by_session;
DROP INDEX mq_leases_by_deadline;
CREATE UNIQUE INDEX mq_leased ON message_queue (lease_delivery_id)
    WHERE lease_delivery_id IS NOT NULL;
