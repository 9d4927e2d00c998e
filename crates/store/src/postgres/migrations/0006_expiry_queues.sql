-- Ferry PostgreSQL schema, version 6: per-queue expiry queue.
--
-- Expired ready rows of a queue with an expiry queue are moved there (a new message carrying
-- its history in its properties) by the broker's upkeep, instead of being deleted.

ALTER TABLE queues ADD COLUMN expiry_queue_id bigint;
