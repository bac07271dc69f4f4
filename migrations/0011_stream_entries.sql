-- Every change members see is an entry of the conversation's stream: it
-- takes the conversation's next seq, like a message. The message table
-- holds every entry; kind says which:
--
--   message   a message (what every row was before this migration);
--   edit      target_seq's new body (body), by its sender;
--   recall    target_seq taken back for everyone (by sender_id);
--   reaction  sender_id set (reaction_on) or removed emoji on target_seq;
--             reaction_count is how many carried it after the change.
--
-- A message row also holds its current state: edited_at (last edit),
-- recalled_at/recalled_by, reply_to (a message of the same conversation),
-- and forwarded_* (the message it copies). A recall erases the body of the
-- message and of every edit of it: what was recalled cannot be read back.
--
-- msg_no is the number of message entries up to and including the entry's
-- seq, and conversation.message_count the conversation's total: unread
-- counts (messages after a read watermark, whatever seq it points at) are
-- two key lookups. conversation.last_message_seq is the newest message
-- entry, what the inbox shows; last_message_at moves with messages only.
ALTER TABLE message ADD COLUMN kind text NOT NULL DEFAULT 'message'
    CHECK (kind IN ('message', 'edit', 'recall', 'reaction', 'system'));
ALTER TABLE message ADD COLUMN target_seq bigint;
ALTER TABLE message ADD COLUMN msg_no bigint;
ALTER TABLE message ADD COLUMN reply_to bigint;
ALTER TABLE message ADD COLUMN forwarded_conversation_id bigint;
ALTER TABLE message ADD COLUMN forwarded_seq bigint;
ALTER TABLE message ADD COLUMN forwarded_sender_id bigint;
ALTER TABLE message ADD COLUMN edited_at timestamptz;
ALTER TABLE message ADD COLUMN recalled_at timestamptz;
ALTER TABLE message ADD COLUMN recalled_by bigint;
ALTER TABLE message ADD COLUMN emoji text;
ALTER TABLE message ADD COLUMN reaction_on boolean;
ALTER TABLE message ADD COLUMN reaction_count integer;
UPDATE message SET msg_no = seq;
ALTER TABLE message ALTER COLUMN msg_no SET NOT NULL;
ALTER TABLE message ADD CONSTRAINT message_entry_shape CHECK (
    (kind = 'message' AND target_seq IS NULL)
    OR (kind IN ('edit', 'recall', 'reaction') AND target_seq IS NOT NULL AND target_seq < seq)
    OR kind = 'system');
ALTER TABLE message ADD CONSTRAINT message_recalled_is_empty CHECK (recalled_at IS NULL OR body = '');

-- The edits and reactions of a message, found from the message.
CREATE INDEX message_target_idx ON message (conversation_id, target_seq) WHERE target_seq IS NOT NULL;

ALTER TABLE conversation ADD COLUMN message_count bigint NOT NULL DEFAULT 0;
ALTER TABLE conversation ADD COLUMN last_message_seq bigint NOT NULL DEFAULT 0;
UPDATE conversation SET message_count = last_seq, last_message_seq = last_seq;

-- The reactions on each message now: one row per (message, user, emoji).
CREATE TABLE reaction (
    conversation_id bigint      NOT NULL,
    seq             bigint      NOT NULL,
    user_id         bigint      NOT NULL,
    emoji           text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, seq, user_id, emoji),
    FOREIGN KEY (conversation_id, seq) REFERENCES message (conversation_id, seq)
);

-- chat_send_batch changes its arguments and result (functions.sql). Its
-- decisions pass from the deciding statement to the writing one as an
-- array of this type (a temporary table would cost catalog writes per
-- batch).
DROP FUNCTION chat_send_batch(bigint[], bigint[], uuid[], text[]);
CREATE TYPE chat_batch_row AS (
    ord        int,         -- position in the batch
    kind       text,
    conv       bigint,
    sender     bigint,
    id         uuid,
    body       text,        -- the body written (a forward's copy)
    target     bigint,      -- edit/recall/reaction target; a message's reply_to
    emoji      text,
    is_on      boolean,
    status     smallint,    -- the outcome (functions.sql lists them)
    seq        bigint,
    msg_no     bigint,
    at         timestamptz,
    st_sender  bigint,      -- a duplicate's stored entry
    st_body    text,
    st_at      timestamptz,
    t_sender   bigint,      -- the target's (replied-to, forwarded) message
    t_snippet  text,
    t_recalled boolean,
    cnt        int,         -- a reaction's count after the change
    fwd_conv   bigint,
    fwd_seq    bigint,
    fwd_sender bigint
);
