-- A persistent session's MQTT subscriptions, so that its whole state is in
-- PostgreSQL: the broker keeps nothing for an offline session, and a
-- session resumes with its subscriptions (session present) on any node and
-- after a restart. NULL: recorded before this column existed, or never
-- persistent; such a session resumes its cursors but not its
-- subscriptions (the client is told the session is not present and
-- subscribes again).
ALTER TABLE chat_session ADD COLUMN subscriptions jsonb;
