-- Presence (issue 10). Online state is kept as state, never per event:
--   chat_session.node_id: the node holding the session's live connection,
--     NULL while it has none. Each node sets and clears its own.
--   chat_node: each node's heartbeat. A node that stops beating (crashed)
--     no longer counts, so its connections stop making users online.
--   user_presence: when the user was last connected, one row per user
--     (chat_session rows of clean sessions are deleted on disconnect).
ALTER TABLE chat_session ADD COLUMN IF NOT EXISTS node_id TEXT;
CREATE INDEX IF NOT EXISTS chat_session_node_idx ON chat_session (node_id) WHERE node_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS chat_node (
    node_id      TEXT        PRIMARY KEY,
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS user_presence (
    user_id      BIGINT      PRIMARY KEY,
    last_seen_at TIMESTAMPTZ NOT NULL
);
