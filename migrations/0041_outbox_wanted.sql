-- Whether outbox rows are wanted: a row here means a relay may read them
-- (a node with Kafka configured), and every writer of outbox rows writes
-- them only while it is here (functions.sql, "outbox_wanted", has the
-- contract). Without Kafka nothing ever reads the outbox, and its rows,
-- their notify trigger, their WAL and the pruner's deletes were a good
-- part of a message's cost to PostgreSQL (docs/benchmarks.md,
-- "outbox rows only for a relay").
--
-- seen_at: when a node with Kafka last said it relays (at its start, in
-- the transaction that migrates it, and while its relay holds the lease).
-- A pruner (a node without Kafka) deletes the row only when no relay has
-- said so for its retention and none holds the lease or is connected.
CREATE TABLE outbox_wanted (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    seen_at timestamptz NOT NULL DEFAULT now()
);

-- A database a relay reads now (an older chatd with Kafka, which knows
-- nothing of this table, holds the relay lease or stands by for it on
-- a session of its own) keeps its outbox rows: a node without Kafka
-- migrating beside such nodes must not silence their relay. The lease is
-- the session advisory lock relay.DefaultLockKey ("chat_rly"), seen as
-- internal/relay's relayLeaseHeld sees it; a relay's session, leading
-- or standing by, is named chatd-relay. A fresh database, or one without
-- Kafka anywhere, starts without the row; a node with Kafka adds it
-- when it migrates, before its relay starts (store.Migrate).
INSERT INTO outbox_wanted (one, seen_at)
SELECT true, now()
WHERE EXISTS (SELECT 1 FROM pg_locks
              WHERE locktype = 'advisory' AND granted AND objsubid = 1
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND classid = ((x'636861745f726c79'::bigint >> 32) & 4294967295)::oid
                AND objid = (x'636861745f726c79'::bigint & 4294967295)::oid)
   OR EXISTS (SELECT 1 FROM pg_stat_activity
              WHERE application_name = 'chatd-relay' AND datname = current_database());
