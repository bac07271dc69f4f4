-- Search compares folded text: Unicode NFKC, then lower case in every
-- script, as the query is folded (chat.FoldForSearch).
--
-- Until now the search document and the trigram index were the body as
-- sent. A word typed with a decomposed accent ("e" and U+0301, as macOS
-- and iOS keyboards and copy and paste produce), Hangul as conjoining
-- jamo, full-width Latin or a ligature was not found by its usual form,
-- nor the other way round; and since the cluster's collation is C,
-- to_tsvector and ILIKE lower-case ASCII alone, so "Привет" or "ÉCOLE"
-- was found by neither "привет" nor "école" (the query is lower-cased).
--
-- chat_search_fold(t) is the fold of t, or NULL when it differs from t
-- in ASCII case alone (every ASCII body, and most others written in
-- lower case): to_tsvector and ILIKE fold ASCII case themselves, so the
-- body serves as it is and only the messages that need one store a
-- second text. search_body keeps it, so that a search reads it rather
-- than folding every message it tests (normalize() and lower() cost
-- about 2 µs a message, as much as the rest of the direct scan); search,
-- the document, and the trigram index are made from
-- COALESCE(search_body, body), the text search matches.
--
-- The steps, as Go's: NFKC (normalize(), skipped for text already in
-- NFKC, most of it), "İ" made "i" (Go's one-character lower case of it;
-- ICU's full mapping is "i" and a combining dot), lower() with the ICU
-- root collation (the C collation's lower() is ASCII only, and ICU's
-- does not depend on the operating system's locales), "ς" made "σ"
-- (ICU writes a final sigma where Go writes σ). PostgreSQL must be built
-- with ICU (Debian's, Ubuntu's, the official images' and the cloud
-- services' are); without it this migration stops, changing nothing.
--
-- Like 0020 this recomputes the stored column: the message table is
-- rewritten once under an exclusive lock, its indexes rebuilt, then the
-- two search indexes built (docs/operations.md has the measured time).
-- chat_search_fold lives here, not in functions.sql: the stored columns
-- are its output.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu') THEN
        RAISE EXCEPTION 'chatd search needs a PostgreSQL built with ICU (the collation "und-x-icu" is missing)';
    END IF;
END
$$;

CREATE FUNCTION chat_search_fold(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $$
DECLARE
    f text := t;
BEGIN
    IF octet_length(t) = char_length(t) THEN
        RETURN NULL; -- ASCII
    END IF;
    IF f IS NOT NFKC NORMALIZED THEN
        f := normalize(f, NFKC);
    END IF;
    f := replace(lower(replace(f, 'İ', 'i') COLLATE "und-x-icu"), 'ς', 'σ');
    IF f = lower(t COLLATE "C") THEN
        RETURN NULL;
    END IF;
    RETURN f;
END
$$;

DROP INDEX message_search_idx;
DROP INDEX message_body_trgm_idx;

ALTER TABLE message DROP COLUMN search,
    ADD COLUMN search_body text GENERATED ALWAYS AS (
        CASE WHEN kind = 'message' THEN chat_search_fold(body) END) STORED,
    ADD COLUMN search tsvector GENERATED ALWAYS AS (
        CASE WHEN kind = 'message' THEN to_tsvector('simple'::regconfig, chat_search_document(COALESCE(chat_search_fold(body), body))) END) STORED;

CREATE INDEX message_search_idx ON message USING gin (search) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
CREATE INDEX message_body_trgm_idx ON message USING gin ((COALESCE(search_body, body)) gin_trgm_ops) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
