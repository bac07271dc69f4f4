-- Push hand-off (package push): devices, per-member conversation settings,
-- and the durable state of push decisions and sends.
--
-- push_device       a user's registered push targets. (platform, address)
--                   is unique: a token or endpoint belongs to one user, and
--                   registering it again (as anyone) updates that row.
-- member_settings   per-member mute and mention settings; rows go with the
--                   member (trigger), like member_delivery, and so do the
--                   member's push_job and push_last rows.
-- push_cursor       per conversation, the highest seq the push decider has
--                   decided. Seeded here with every conversation's
--                   last_seq, so an upgrade pushes nothing from the past.
-- push_job          a decided push for (user, conversation): state
--                   'pending' while it waits (it merges later messages:
--                   coalescing, and the minimum interval through
--                   not_before), 'sending' once a node claimed it (lease_until
--                   bounds the claim; a node that died leaves it to be
--                   claimed again). device_ids NULL means every device of
--                   the user; a retry names the devices still owed.
-- push_last         per (user, conversation): when it was last pushed (the
--                   minimum interval is measured from it) and the highest
--                   seq a push covers, so no message is counted twice.
--
-- Nothing here is written by the send path: the decider reads committed
-- messages after the fact (push/doc.go).

CREATE TABLE push_device (
    id          bigserial   PRIMARY KEY,
    user_id     bigint      NOT NULL CHECK (user_id > 0),
    platform    text        NOT NULL CHECK (platform IN ('webpush', 'unifiedpush', 'fcm', 'apns')),
    address     text        NOT NULL,
    p256dh      text        NOT NULL DEFAULT '',
    auth        text        NOT NULL DEFAULT '',
    app_id      text        NOT NULL DEFAULT '',
    locale      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (platform, address)
);
CREATE INDEX push_device_user_idx ON push_device (user_id, updated_at);

CREATE TABLE member_settings (
    conversation_id bigint      NOT NULL,
    user_id         bigint      NOT NULL,
    muted           boolean     NOT NULL DEFAULT false,
    muted_until     timestamptz,
    mentions        boolean     NOT NULL DEFAULT true,
    PRIMARY KEY (conversation_id, user_id)
);

CREATE TABLE push_cursor (
    conversation_id bigint PRIMARY KEY,
    seq             bigint NOT NULL CHECK (seq >= 0)
);
INSERT INTO push_cursor (conversation_id, seq) SELECT id, last_seq FROM conversation;

CREATE TABLE push_job (
    id              bigserial   PRIMARY KEY,
    user_id         bigint      NOT NULL,
    conversation_id bigint      NOT NULL,
    seq             bigint      NOT NULL,
    count           integer     NOT NULL CHECK (count > 0),
    sender_id       bigint      NOT NULL,
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending')),
    not_before      timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    attempts        integer     NOT NULL DEFAULT 0,
    device_ids      bigint[],
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX push_job_pending_idx ON push_job (user_id, conversation_id) WHERE state = 'pending';
CREATE INDEX push_job_due_idx ON push_job (not_before);

CREATE TABLE push_last (
    user_id         bigint      NOT NULL,
    conversation_id bigint      NOT NULL,
    pushed_at       timestamptz NOT NULL,
    seq             bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, conversation_id)
);

CREATE FUNCTION chat_member_push_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM member_settings WHERE conversation_id = OLD.conversation_id AND user_id = OLD.user_id;
    DELETE FROM push_job WHERE user_id = OLD.user_id AND conversation_id = OLD.conversation_id;
    DELETE FROM push_last WHERE user_id = OLD.user_id AND conversation_id = OLD.conversation_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER member_push_forget
    AFTER DELETE ON conversation_member
    FOR EACH ROW EXECUTE FUNCTION chat_member_push_forget();
