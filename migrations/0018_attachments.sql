-- Attachments: photos, voice notes, videos and files carried by messages.
-- The bytes live in a blob store (local disk or S3-compatible); this schema
-- says what they are, who may see them and when they go.
--
-- attachment: one row per upload, from the ticket (pending) through its
-- checked bytes (complete) to the message carrying it (attached) or that
-- message's recall (recalled: the bytes are deleted, the row stays so a
-- fetch answers 410). id is what clients name (128 random bits, base32);
-- blob_key where the bytes are (160 random bits, independent of id), and
-- blob_key || '.thumb' where an image's thumbnail is. An upload is for one
-- conversation and one uploader, so a send can only attach what its
-- sender uploaded for that conversation, once (seq set).
--
-- No foreign key to conversation: its KEY SHARE check would wait for group
-- commit's FOR UPDATE of the conversation row (see member_delivery).
CREATE TABLE attachment (
    id              text        PRIMARY KEY,
    blob_key        text        NOT NULL UNIQUE,
    uploader_id     bigint      NOT NULL,
    conversation_id bigint      NOT NULL,
    name            text        NOT NULL,
    declared_type   text        NOT NULL,
    declared_size   bigint      NOT NULL CHECK (declared_size > 0),
    state           text        NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'complete', 'attached', 'recalled')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    url_expires_at  timestamptz NOT NULL,
    completed_at    timestamptz,
    -- What chatd read from the bytes (complete and attached).
    content_type    text,
    size            bigint,
    sha256          text,
    width           integer,
    height          integer,
    duration_ms     bigint,
    thumb_state     text CHECK (thumb_state IN ('pending', 'ready', 'failed')),
    thumb_width     integer,
    thumb_height    integer,
    thumb_size      bigint,
    -- The message carrying it (attached, recalled).
    seq             bigint,
    position        smallint,
    caption         text,
    CHECK ((state IN ('attached', 'recalled')) = (seq IS NOT NULL)),
    CHECK (state = 'pending' OR size IS NOT NULL OR state = 'recalled')
);

-- A message's attachments, in order.
CREATE INDEX attachment_message_idx ON attachment (conversation_id, seq, position) WHERE seq IS NOT NULL;
-- Uploads never attached, oldest first (CHAT_UPLOAD_TTL expiry).
CREATE INDEX attachment_unattached_idx ON attachment (created_at) WHERE seq IS NULL;
-- Thumbnails still to make (after a restart).
CREATE INDEX attachment_thumb_pending_idx ON attachment (completed_at) WHERE thumb_state = 'pending';

-- Blobs to delete, written in the transaction that drops what referenced
-- them (an expired upload, a recalled message, a refused upload): a crash
-- between PostgreSQL and the blob store leaves a row here, never an orphan
-- blob. A worker deletes the blob (and its thumbnail), then the row, in one
-- transaction holding the row's lock; deleting a missing blob succeeds, so
-- an interrupted deletion is run again. not_before keeps a key whose
-- presigned PUT URL is still valid until it expires (the client could
-- still write it).
CREATE TABLE blob_deletion (
    blob_key   text        PRIMARY KEY,
    reason     text        NOT NULL,
    not_before timestamptz NOT NULL DEFAULT now(),
    attempts   integer     NOT NULL DEFAULT 0,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blob_deletion_due_idx ON blob_deletion (not_before);

-- Declared upload bytes per user and UTC day (CHAT_UPLOAD_BYTES_PER_DAY).
CREATE TABLE upload_quota (
    user_id bigint NOT NULL,
    day     date   NOT NULL,
    bytes   bigint NOT NULL,
    uploads integer NOT NULL,
    PRIMARY KEY (user_id, day)
);

-- A message's type by its first attachment; NULL is text.
ALTER TABLE message ADD COLUMN msg_type text CHECK (msg_type IN ('image', 'audio', 'video', 'file'));

-- chat_send_batch takes each change's attachments and the allowed types
-- (functions.sql, after the trace context of 0016) and answers each
-- message's type and attachments: a new result needs the old function
-- dropped. Its decisions carry them to the writing statement. (A fresh
-- database has no function yet: functions.sql runs after the numbered
-- migrations.)
DROP FUNCTION IF EXISTS chat_send_batch(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[]);
ALTER TYPE chat_batch_row ADD ATTRIBUTE att jsonb, ADD ATTRIBUTE msg_type text;
