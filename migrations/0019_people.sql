-- People and groups (issue 23): profiles, privacy settings, blocks, group
-- settings, and message search.
--
-- user_profile: what others see of a user. display_name is 1-64 characters
--   (the Service validates); avatar_url an https URL the user set (until
--   attachments can hold avatars); about free text. No row: the user never
--   set a profile (clients show "User <id>").
-- user_settings: privacy. read_receipts false: nobody else learns this
--   user's read watermark and the user learns nobody's (reciprocal);
--   presence false: the same for online state and last seen. No row: both on.
-- user_block: blocker_id blocked blocked_id. A blocked user cannot open a
--   direct conversation with the blocker nor write into an existing one
--   (chat_send_batch refuses with status 21); the push decider
--   (internal/push/decider.go) asks the same table.
CREATE TABLE user_profile (
    user_id      bigint      PRIMARY KEY CHECK (user_id > 0),
    display_name text        NOT NULL,
    avatar_url   text,
    about        text        NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_settings (
    user_id       bigint      PRIMARY KEY CHECK (user_id > 0),
    read_receipts boolean     NOT NULL DEFAULT true,
    presence      boolean     NOT NULL DEFAULT true,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- The few users who hide something, found from a conversation's members.
CREATE INDEX user_settings_private_idx ON user_settings (user_id) WHERE NOT read_receipts OR NOT presence;

CREATE TABLE user_block (
    blocker_id bigint      NOT NULL CHECK (blocker_id > 0),
    blocked_id bigint      NOT NULL CHECK (blocked_id > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blocker_id, blocked_id),
    CHECK (blocker_id <> blocked_id)
);
CREATE INDEX user_block_blocked_idx ON user_block (blocked_id);

-- Group settings. history_visible says what a member added later reads:
-- 'joined' the entries from the one announcing their join on, 'all' the
-- whole history. Groups created before this migration keep what their
-- members could read until now ('all'); new ones start 'joined'.
-- archived_at is set when the last member leaves.
ALTER TABLE conversation ADD COLUMN about text NOT NULL DEFAULT '';
ALTER TABLE conversation ADD COLUMN avatar_url text;
ALTER TABLE conversation ADD COLUMN history_visible text NOT NULL DEFAULT 'all'
    CHECK (history_visible IN ('joined', 'all'));
ALTER TABLE conversation ALTER COLUMN history_visible SET DEFAULT 'joined';
ALTER TABLE conversation ADD COLUMN archived_at timestamptz;

-- # Search
--
-- A message's search document is its body with every run of Chinese,
-- Japanese or Korean characters replaced by the run's overlapping bigrams
-- and its last character (亄哹伴 -> 亄哹 哹伴 伴): the 'simple' parser
-- cuts text at spaces and punctuation only, so without this a sentence of
-- Han characters is one word and a two-character query finds nothing.
-- Every character begins some token, so a one-character query is a prefix
-- query, a two-character one a token, a longer one a phrase of bigrams.
-- pg_trgm cannot stand in: with the C locale chatd's cluster uses it
-- ignores every non-ASCII character, and it needs three characters.
--
-- chat_search_text is defined here, not in functions.sql: the stored
-- column and its index are its output, so changing it needs a migration
-- that recomputes them.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE FUNCTION chat_search_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
SELECT CASE WHEN t !~ '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]' THEN t
ELSE regexp_replace(t, '[\u1100-\u11ff\u3000-\u303f\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff]+', ' ', 'g')
    || ' ' || COALESCE((
        SELECT string_agg(substr(r[1], i, 2), ' ')
        FROM regexp_matches(t, '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]+', 'g') AS r
        CROSS JOIN LATERAL generate_series(1, char_length(r[1])) AS i), '') END
$$;

-- search: the document of a message's current body (edits rewrite body,
-- so it follows them; a recall empties it). Other kinds have none.
-- Stored rather than an expression index so ranking and the direct scan of
-- a user's own conversations (store/search.go) read it instead of
-- recomputing it per row. Adding it rewrites the table once
-- (docs/operations.md has the measured time).
ALTER TABLE message ADD COLUMN search tsvector GENERATED ALWAYS AS (
    CASE WHEN kind = 'message' THEN to_tsvector('simple'::regconfig, chat_search_text(body)) END) STORED;

-- Whole-word, prefix and CJK matches; and substrings of three characters
-- or more (ILIKE '%...%'), through trigrams.
-- Fast update with a 16 MB pending list: sends append, chatd's search
-- maintainer merges (store/searchmaint.go).
CREATE INDEX message_search_idx ON message USING gin (search) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
CREATE INDEX message_body_trgm_idx ON message USING gin (body gin_trgm_ops) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
