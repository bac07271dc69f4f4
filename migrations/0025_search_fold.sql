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
-- COALESCE(search_body, body), the text substring terms match.
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
-- The document is made of the folded text with every character above
-- ASCII that is not a letter, digit or mark (what splits a query into
-- terms, chat.isWordRune) made a space (chat_search_words): the 'simple'
-- parser splits at ASCII punctuation only and, with the C collation,
-- takes every other character for a letter, so "¿Sí?", "“Hi”", "«Ок»",
-- "wait—no" or "👍ok" were tokens of their own ('¿sí', '“hi”', ...) and a
-- short term, which matches at a token's start, never found "sí", "hi",
-- "ок", "no" or "ok" there. The character class is Go's unicode tables
-- (Unicode 15.0): the runs of such characters, joined over code points
-- unassigned there (store/searchnorm_test.go checks every one).
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

-- Both functions are single SQL expressions (not PL/pgSQL): PostgreSQL
-- inlines them into the generated columns' expressions, so an ASCII
-- body, most of them, costs a comparison of two lengths instead of a
-- function call per column (measured on 200,000 bodies: 0.1-0.3 µs a
-- body against 1.3-3.3 µs, and every send computes both columns).
CREATE FUNCTION chat_search_fold(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN octet_length(t) = char_length(t) THEN NULL -- ASCII
    ELSE NULLIF(replace(lower(replace(CASE WHEN t IS NFKC NORMALIZED THEN t ELSE normalize(t, NFKC) END, 'İ', 'i')
                              COLLATE "und-x-icu"), 'ς', 'σ') COLLATE "C",
                lower(t COLLATE "C")) END
$$;

CREATE FUNCTION chat_search_words(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN octet_length(t) = char_length(t) THEN t -- ASCII: the parser splits it
    ELSE regexp_replace(t, '['
        '\u0080-\u00a9\u00ab-\u00b4\u00b6-\u00b9\u00bb-\u00bf\u00d7\u00f7'
        '\u02c2-\u02c5\u02d2-\u02df\u02e5-\u02eb\u02ed\u02ef-\u02ff\u0375'
        '\u037e\u0384-\u0385\u0387\u03f6\u0482\u055a-\u055f'
        '\u0589-\u058f\u05be\u05c0\u05c3\u05c6\u05f3-\u060f'
        '\u061b-\u061f\u066a-\u066d\u06d4\u06dd-\u06de\u06e9\u06fd-\u06fe'
        '\u0700-\u070f\u07f6-\u07f9\u07fe-\u07ff\u0830-\u083e\u085e\u0888'
        '\u0890-\u0891\u08e2\u0964-\u0965\u0970\u09f2-\u09fb\u09fd'
        '\u0a76\u0af0-\u0af1\u0b70\u0b72-\u0b77\u0bf0-\u0bfa\u0c77-\u0c7f'
        '\u0c84\u0d4f\u0d58-\u0d5e\u0d70-\u0d79\u0df4\u0e3f'
        '\u0e4f\u0e5a-\u0e5b\u0f01-\u0f17\u0f1a-\u0f1f\u0f2a-\u0f34\u0f36'
        '\u0f38\u0f3a-\u0f3d\u0f85\u0fbe-\u0fc5\u0fc7-\u0fda\u104a-\u104f'
        '\u109e-\u109f\u10fb\u1360-\u137c\u1390-\u1399\u1400\u166d-\u166e'
        '\u1680\u169b-\u169c\u16eb-\u16f0\u1735-\u1736\u17d4-\u17d6\u17d8-\u17db'
        '\u17f0-\u180a\u180e\u1940-\u1945\u19da-\u19ff\u1a1e-\u1a1f\u1aa0-\u1aa6'
        '\u1aa8-\u1aad\u1b5a-\u1b6a\u1b74-\u1b7e\u1bfc-\u1bff\u1c3b-\u1c3f\u1c7e-\u1c7f'
        '\u1cc0-\u1cc7\u1cd3\u1fbd\u1fbf-\u1fc1\u1fcd-\u1fcf\u1fdd-\u1fdf'
        '\u1fed-\u1fef\u1ffd-\u2070\u2074-\u207e\u2080-\u208e\u20a0-\u20c0\u2100-\u2101'
        '\u2103-\u2106\u2108-\u2109\u2114\u2116-\u2118\u211e-\u2123\u2125'
        '\u2127\u2129\u212e\u213a-\u213b\u2140-\u2144\u214a-\u214d'
        '\u214f-\u2182\u2185-\u2bff\u2ce5-\u2cea\u2cf9-\u2cff\u2d70\u2e00-\u2e2e'
        '\u2e30-\u3004\u3007-\u3029\u3030\u3036-\u303a\u303d-\u303f\u309b-\u309c'
        '\u30a0\u30fb\u3190-\u319f\u31c0-\u31e3\u3200-\u33ff\u4dc0-\u4dff'
        '\ua490-\ua4c6\ua4fe-\ua4ff\ua60d-\ua60f\ua673\ua67e\ua6e6-\ua6ef'
        '\ua6f2-\ua716\ua720-\ua721\ua789-\ua78a\ua828-\ua82b\ua830-\ua839\ua874-\ua877'
        '\ua8ce-\ua8cf\ua8f8-\ua8fa\ua8fc\ua92e-\ua92f\ua95f\ua9c1-\ua9cd'
        '\ua9de-\ua9df\uaa5c-\uaa5f\uaa77-\uaa79\uaade-\uaadf\uaaf0-\uaaf1\uab5b'
        '\uab6a-\uab6b\uabeb\ufb29\ufbb2-\ufbc2\ufd3e-\ufd4f\ufdcf'
        '\ufdfc-\ufdff\ufe10-\ufe19\ufe30-\ufe6b\ufeff-\uff0f\uff1a-\uff20\uff3b-\uff40'
        '\uff5b-\uff65\uffe0-\ufffd\U00010100-\U000101fc\U000102e1-\U000102fb\U00010320-\U00010323\U00010341'
        '\U0001034a\U0001039f\U000103d0-\U000103d5\U0001056f\U00010857-\U0001085f\U00010877-\U0001087f'
        '\U000108a7-\U000108af\U000108fb-\U000108ff\U00010916-\U0001091f\U0001093f\U000109bc-\U000109bd\U000109c0-\U000109ff'
        '\U00010a40-\U00010a58\U00010a7d-\U00010a7f\U00010a9d-\U00010a9f\U00010ac8\U00010aeb-\U00010af6\U00010b39-\U00010b3f'
        '\U00010b58-\U00010b5f\U00010b78-\U00010b7f\U00010b99-\U00010baf\U00010cfa-\U00010cff\U00010e60-\U00010e7e\U00010ead'
        '\U00010f1d-\U00010f26\U00010f51-\U00010f59\U00010f86-\U00010f89\U00010fc5-\U00010fcb\U00011047-\U00011065\U000110bb-\U000110c1'
        '\U000110cd\U00011140-\U00011143\U00011174-\U00011175\U000111c5-\U000111c8\U000111cd\U000111db'
        '\U000111dd-\U000111f4\U00011238-\U0001123d\U000112a9\U0001144b-\U0001144f\U0001145a-\U0001145d\U000114c6'
        '\U000115c1-\U000115d7\U00011641-\U00011643\U00011660-\U0001166c\U000116b9\U0001173a-\U0001173f\U0001183b'
        '\U000118ea-\U000118f2\U00011944-\U00011946\U000119e2\U00011a3f-\U00011a46\U00011a9a-\U00011a9c\U00011a9e-\U00011aa2'
        '\U00011b00-\U00011b09\U00011c41-\U00011c45\U00011c5a-\U00011c71\U00011ef7-\U00011ef8\U00011f43-\U00011f4f\U00011fc0-\U00011fff'
        '\U00012400-\U00012474\U00012ff1-\U00012ff2\U00013430-\U0001343f\U00016a6e-\U00016a6f\U00016af5\U00016b37-\U00016b3f'
        '\U00016b44-\U00016b45\U00016b5b-\U00016b61\U00016e80-\U00016e9a\U00016fe2\U0001bc9c\U0001bc9f-\U0001bca3'
        '\U0001cf50-\U0001d164\U0001d16a-\U0001d16c\U0001d173-\U0001d17a\U0001d183-\U0001d184\U0001d18c-\U0001d1a9\U0001d1ae-\U0001d241'
        '\U0001d245-\U0001d378\U0001d6c1\U0001d6db\U0001d6fb\U0001d715\U0001d735'
        '\U0001d74f\U0001d76f\U0001d789\U0001d7a9\U0001d7c3\U0001d800-\U0001d9ff'
        '\U0001da37-\U0001da3a\U0001da6d-\U0001da74\U0001da76-\U0001da83\U0001da85-\U0001da8b\U0001e14f\U0001e2ff'
        '\U0001e8c7-\U0001e8cf\U0001e95e-\U0001ed3d\U0001eef0-\U0001fbca\U000e0001-\U000e007f'
        ']', ' ', 'g') END
$$;

DROP INDEX message_search_idx;
DROP INDEX message_body_trgm_idx;

ALTER TABLE message DROP COLUMN search,
    ADD COLUMN search_body text GENERATED ALWAYS AS (
        CASE WHEN kind = 'message' THEN chat_search_fold(body) END) STORED,
    ADD COLUMN search tsvector GENERATED ALWAYS AS (
        CASE WHEN kind = 'message' THEN to_tsvector('simple'::regconfig, chat_search_document(chat_search_words(COALESCE(chat_search_fold(body), body)))) END) STORED;

CREATE INDEX message_search_idx ON message USING gin (search) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
CREATE INDEX message_body_trgm_idx ON message USING gin ((COALESCE(search_body, body)) gin_trgm_ops) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;

-- The new columns have no statistics until the next ANALYZE, which
-- autovacuum may not run for long (a rewrite counts no changed rows), and
-- the plan of a search reads them (store/searchplan.go: how common a
-- word is). ANALYZE reads a sample of 30,000 rows, seconds on any table;
-- an empty table (a new database) is left as it was, never analyzed.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM message) THEN
        ANALYZE message;
    END IF;
END
$$;
