-- Ferry PostgreSQL schema, version 5: per-queue maximum delivery count and dead-letter queue.
--
-- A client-ack delivery that comes back (nack with requeue, lease expiry, released session or
-- dead node) after max_deliveries deliveries on its queue is moved, in the same transaction,
-- to the queue dead_letter_queue_id names as a new message carrying its history in its
-- properties; without a dead-letter queue it is dropped. 0 = unlimited.

ALTER TABLE queues ADD COLUMN max_deliveries integer NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN dead_letter_queue_id bigint;
