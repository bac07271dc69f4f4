-- Durable MQTT chat sessions: a client id belongs to one user, and a
-- persistent session keeps, per conversation, the highest seq its client
-- acknowledged (PUBACK), so a reconnect replays exactly what it missed.
CREATE TABLE IF NOT EXISTS chat_session (
    client_id       TEXT        PRIMARY KEY,
    user_id         BIGINT      NOT NULL,
    persistent      BOOLEAN     NOT NULL DEFAULT false,
    expiry_seconds  BIGINT      NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS chat_session_user_idx ON chat_session (user_id);

CREATE TABLE IF NOT EXISTS session_cursor (
    client_id       TEXT   NOT NULL REFERENCES chat_session (client_id) ON DELETE CASCADE,
    conversation_id BIGINT NOT NULL,
    delivered_seq   BIGINT NOT NULL,
    PRIMARY KEY (client_id, conversation_id)
);
