-- The seed's model, kept: per-conversation seq, watermark read state, outbox.
CREATE TABLE IF NOT EXISTS conversation (
    id              BIGSERIAL PRIMARY KEY,
    type            TEXT        NOT NULL CHECK (type IN ('DIRECT', 'GROUP')),
    title           TEXT        NOT NULL DEFAULT '',
    last_seq        BIGINT      NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    last_message_at TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS conversation_member (
    conversation_id    BIGINT      NOT NULL REFERENCES conversation (id),
    user_id            BIGINT      NOT NULL CHECK (user_id > 0),
    role               TEXT        NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'admin', 'member')),
    last_read_seq      BIGINT      NOT NULL DEFAULT 0 CHECK (last_read_seq >= 0),
    last_delivered_seq BIGINT      NOT NULL DEFAULT 0 CHECK (last_delivered_seq >= 0),
    -- last_seq when the member joined: where delivery to a new member starts.
    join_seq           BIGINT      NOT NULL DEFAULT 0,
    joined_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, user_id)
);
CREATE INDEX IF NOT EXISTS conversation_member_user_idx ON conversation_member (user_id);

CREATE TABLE IF NOT EXISTS message (
    conversation_id BIGINT      NOT NULL REFERENCES conversation (id),
    seq             BIGINT      NOT NULL CHECK (seq > 0),
    sender_id       BIGINT      NOT NULL,
    client_msg_id   UUID        NOT NULL,
    body            TEXT        NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, seq),
    UNIQUE (conversation_id, client_msg_id)
);

CREATE TABLE IF NOT EXISTS outbox (
    id         BIGSERIAL   PRIMARY KEY,
    msg_key    TEXT        NOT NULL,
    payload    JSONB       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS direct_pair (
    user_low        BIGINT NOT NULL,
    user_high       BIGINT NOT NULL,
    conversation_id BIGINT NOT NULL REFERENCES conversation (id),
    UNIQUE (user_low, user_high),
    CHECK (user_low < user_high)
);
