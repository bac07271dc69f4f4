-- Every CJK character of a message is a token of its search document.
--
-- 0019's document (chat_search_text) held a run's overlapping bigrams and
-- its last character, so a one-character query was the prefix '的':*,
-- which GIN answers by reading and merging the posting list of every
-- bigram that starts with the character: 40–45 ms of CPU for a common
-- character on cmd/searchbench's corpus, the slowest query there, and
-- never the intersection with the caller's conversations (the planner
-- only ANDs bitmaps it can estimate). With the character as a token it is
-- one posting list (docs/benchmarks.md, "Search").
--
-- chat_search_document is 0019's text followed by the message's CJK
-- characters one by one, in order: the bigram part, whose positions the
-- phrase queries of three or more characters depend on, is unchanged,
-- and a phrase of bigrams never matches across into the single
-- characters. string_agg orders explicitly rather than trusting the
-- order of the set-returning functions.
--
-- It is PL/pgSQL, not SQL like 0019's: PostgreSQL prepares a generated
-- column's expression at every INSERT and UPDATE of the table, and a SQL
-- function there is parsed twice each time (once to try inlining it, which
-- a STRICT function with a CASE never is, once to run it), then planned:
-- 27% of chat_send_batch's CPU for a call of two plain messages (perf on
-- the pgbench backend, docs/benchmarks.md). A PL/pgSQL function is
-- compiled once per connection and its one statement planned once; a body
-- without CJK returns at the first test.
--
-- PostgreSQL 15 cannot change a generated column's expression, so the
-- column and its index are made again: the message table is rewritten once
-- (docs/operations.md has the measured time). Like 0019's function this
-- one lives here, not in functions.sql: the stored column is its output.
CREATE FUNCTION chat_search_document(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $$
BEGIN
    IF t !~ '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]' THEN
        RETURN t;
    END IF;
    RETURN regexp_replace(t, '[\u1100-\u11ff\u3000-\u303f\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff]+', ' ', 'g')
        || ' ' || (
            SELECT string_agg(substr(r.m[1], i, 2), ' ' ORDER BY r.n, i)
            FROM regexp_matches(t, '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]+', 'g') WITH ORDINALITY AS r(m, n)
            CROSS JOIN LATERAL generate_series(1, char_length(r.m[1])) AS i)
        || ' ' || (
            SELECT string_agg(c.m[1], ' ' ORDER BY c.n)
            FROM regexp_matches(t, '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]', 'g') WITH ORDINALITY AS c(m, n));
END
$$;

DROP INDEX message_search_idx;
ALTER TABLE message DROP COLUMN search;
DROP FUNCTION chat_search_text(text);

ALTER TABLE message ADD COLUMN search tsvector GENERATED ALWAYS AS (
    CASE WHEN kind = 'message' THEN to_tsvector('simple'::regconfig, chat_search_document(body)) END) STORED;

CREATE INDEX message_search_idx ON message USING gin (search) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
