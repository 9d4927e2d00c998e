-- Ferry PostgreSQL schema, version 12: users.
--
-- One row per user, shared by every node: the stored credential's text form (a salted
-- SCRAM-SHA-256 verifier, never the password) and the user's grants, one line of text each.

CREATE TABLE users (
    name       text PRIMARY KEY,
    credential text NOT NULL,
    grants     text[] NOT NULL DEFAULT '{}'
);
