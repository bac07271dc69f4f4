-- chat_search_document in time linear in its text, and within what a
-- tsvector holds. The same document as 0033's for every text that could
-- be stored: the stored search column stays as it is, no rewrite.
--
-- 0033 cut a run of CJK characters into bigrams with substr(run, i, 2),
-- which walks the run from its start for every i: a run of n characters
-- cost n²/2 steps. For the 5,461 characters of a 16 KiB message written
-- without punctuation (the default max_body_bytes) the function took
-- 141 ms, 10 ms now (SELECT of each on the same text, 7 interleaved
-- rounds on the shared 2-core test machine, medians; the old one was
-- slower by 86 to 230 ms in every round), and 42,000 characters took 6 s,
-- over a send's statement timeout. The run is now split into its
-- characters once, each paired with the next (lead).
--
-- A tsvector holds at most 1 MB, and a message may be as long as
-- max_body_bytes (up to 32 MiB): the document of a long message of many
-- distinct words, or of a few hundred kilobytes of CJK text (two tokens a
-- character), exceeded it, and PostgreSQL refused the whole message
-- ("string is too long for tsvector"). A document over 128 KiB is tried
-- (to_tsvector); when it does not fit, the document is that of the
-- text's first half, halved again until it fits: the words of as much
-- of the message's beginning as a tsvector holds. A 128 KiB document
-- always fits (a token and its separator, two bytes at least, take at
-- most ten in a tsvector). Substring terms (three characters or more)
-- match the whole body (search_body, the trigram index) regardless.
-- The exception block is a subtransaction, which parallel workers may not
-- start: PARALLEL RESTRICTED (the function is only computed for the
-- stored column, by inserts and updates, which never run in parallel).
CREATE OR REPLACE FUNCTION chat_search_document(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL RESTRICTED STRICT AS $$
DECLARE
    d text;
BEGIN
    IF t !~ '[\u1100-\u11ff\u3005-\u3006\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]' THEN
        d := t;
    ELSE
        d := regexp_replace(t, '[\u1100-\u11ff\u3000-\u303f\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff]+', ' ', 'g')
            || ' ' || (
                SELECT string_agg(b.c || COALESCE(b.nx, ''), ' ' ORDER BY b.n, b.i)
                FROM (SELECT r.n, u.i, u.c, lead(u.c) OVER (PARTITION BY r.n ORDER BY u.i) AS nx
                      FROM regexp_matches(t, '[\u1100-\u11ff\u3005-\u3006\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]+', 'g') WITH ORDINALITY AS r(m, n)
                      CROSS JOIN LATERAL unnest(string_to_array(r.m[1], NULL)) WITH ORDINALITY AS u(c, i)) b)
            || ' ' || (
                SELECT string_agg(c.m[1], ' ' ORDER BY c.n)
                FROM regexp_matches(t, '[\u1100-\u11ff\u3005-\u3006\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]', 'g') WITH ORDINALITY AS c(m, n));
    END IF;
    IF octet_length(d) > 131072 THEN
        BEGIN
            PERFORM to_tsvector('simple'::regconfig, d);
        EXCEPTION WHEN program_limit_exceeded THEN
            RETURN chat_search_document(left(t, char_length(t) / 2));
        END;
    END IF;
    RETURN d;
END
$$;
