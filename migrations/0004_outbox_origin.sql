-- Which node committed an outbox row: the committing connection's
-- application_name ("chatd:<node id>"). The relay forwards it as a Kafka
-- header so each node can skip its own events, which it already delivered
-- in-process.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS origin TEXT NOT NULL DEFAULT current_setting('application_name');
