-- Search folds accents away (chat.FoldForSearch): "cafe" finds "Café",
-- "naive" finds "naïve", "tieng viet" finds "Tiếng Việt", "strasse"
-- finds "Straße", and a query typed with its accents finds the text
-- written without them.
--
-- chat_search_fold(t) is 0025's fold (NFKC, lower case in every script)
-- followed by:
--   - "ё" made "е" (Russian text mostly writes ё without its dots; й, a
--     letter of its own, stays, as does Ukrainian ї);
--   - the text decomposed (NFD), and every run of combining marks of
--     U+0300–U+036F that follows a Latin or Greek letter dropped: the
--     accents of French, German, Spanish, Portuguese, Polish, Czech,
--     Turkish, Vietnamese (its tones and the horn of ơ and ư), the Greek
--     tonos and dialytika. Marks on other letters stay, as does every
--     mark outside that block: the Japanese voicing marks (が is not か),
--     Indic vowel signs; Hangul, decomposed into jamo, is composed again;
--   - ß, æ, œ and þ made ss, ae, oe and th, and ø, ł, đ, ð and ı made
--     o, l, d, d and i: letters without a decomposition that are read,
--     and typed on a keyboard without them, as those (search engines'
--     folding does the same);
--   - the text composed again (NFC).
-- The letter class is Go's unicode tables' letters of the Latin and
-- Greek scripts (Unicode 15.0), as chat.isLatinOrGreekLetter has it;
-- store/searchnorm_test.go checks that Go and the database fold every
-- character, and every letter with a mark, alike.
--
-- It is built-in PostgreSQL (normalize(), regexp_replace(), translate())
-- rather than the unaccent extension: unaccent() is only STABLE (its
-- rules file may change) so a generated column cannot call it, its rules
-- are a file of the server's that Go's query fold could not be kept
-- equal to, and it would be one more extension to install on every
-- database.
--
-- Like 0025 this recomputes both stored columns, search_body and search,
-- from the new fold, and rebuilds both search indexes: the message table
-- is rewritten once under an exclusive lock, its indexes rebuilt
-- (docs/operations.md has the measured time). The function is replaced
-- with the columns dropped, so no stored value ever comes from another
-- fold than the function's. Both functions live here, not in
-- functions.sql: the stored columns are their output, and an edit there
-- would change the fold of new messages alone
-- (TestNoStoredColumnOrIndexIsComputedByAFunctionEveryMigrateRedefines).
DROP INDEX message_search_idx;
DROP INDEX message_body_trgm_idx;
ALTER TABLE message DROP COLUMN search, DROP COLUMN search_body;

-- chat_search_fold stays a single SQL expression, inlined into both
-- generated columns, so an ASCII body (most of them) still costs a
-- comparison of two lengths; any other body is folded by
-- chat_search_fold_unicode, PL/pgSQL so that each step is computed once
-- (an inlined expression would compute the fold once per use of it) and
-- the costly ones, PostgreSQL's normalize() above all, are skipped where
-- they change nothing.
-- Decomposing can only matter to a text holding a character of
-- U+00C0–U+03FF or U+1E00–U+1FFF (every Latin or Greek letter with a
-- canonical decomposition, every mark it drops, ß and the other letters
-- it maps), so a Cyrillic, CJK, Korean, Arabic or Indic text skips it;
-- and the text is composed again only when it is not NFC already (a
-- French or Vietnamese one, its marks all dropped, is). Measured on the
-- test machine (40,000 bodies of 60-70 characters each, no parallel
-- workers, best of five), per body: French 1.6 µs before, 11 µs now;
-- Vietnamese 2 and 28 (its every word decomposed); Russian 2 and 5;
-- Chinese 7 and 7; Korean 2 and 4; ASCII unchanged. A send computes it
-- for each of the two columns.
CREATE FUNCTION chat_search_fold_unicode(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $f$
DECLARE
    f text := translate(replace(lower(replace(CASE WHEN t IS NFKC NORMALIZED THEN t ELSE normalize(t, NFKC) END, 'İ', 'i')
                                      COLLATE "und-x-icu"), 'ς', 'σ') COLLATE "C",
                        'ё', 'е');
BEGIN
    IF f ~ '[\u00c0-\u03ff\u1e00-\u1fff]' THEN
        f := replace(replace(replace(replace(translate(regexp_replace(normalize(f, NFD),
            '([A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02b8\u02e0-\u02e4\u0370-\u0373\u0376-\u0377'
            '\u037a-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03e1\u03f0-\u03f5\u03f7-\u03ff'
            '\u1d00-\u1d2a\u1d2c-\u1d77\u1d79-\u1dbf\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d'
            '\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4'
            '\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2071\u207f'
            '\u2090-\u209c\u2126\u212a-\u212b\u2132\u214e\u2183-\u2184\u2c60-\u2c7f\ua722-\ua787\ua78b-\ua7ca'
            '\ua7d0-\ua7d1\ua7d3\ua7d5-\ua7d9\ua7f2-\ua7ff\uab30-\uab5a\uab5c-\uab69\ufb00-\ufb06\uff21-\uff3a'
            '\uff41-\uff5a\U00010780-\U00010785\U00010787-\U000107b0\U000107b2-\U000107ba\U0001df00-\U0001df1e'
            '\U0001df25-\U0001df2a])[\u0300-\u036f]+', '\1', 'g'),
            'øłđðı', 'olddi'), 'ß', 'ss'), 'æ', 'ae'), 'œ', 'oe'), 'þ', 'th');
    END IF;
    IF f IS NOT NFC NORMALIZED THEN
        f := normalize(f, NFC);
    END IF;
    RETURN NULLIF(f, lower(t COLLATE "C"));
END
$f$;

CREATE OR REPLACE FUNCTION chat_search_fold(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN octet_length(t) = char_length(t) THEN NULL -- ASCII
    ELSE chat_search_fold_unicode(t) END
$$;

ALTER TABLE message
    ADD COLUMN search_body text GENERATED ALWAYS AS (
        CASE WHEN kind = 'message' THEN chat_search_fold(body) END) STORED,
    ADD COLUMN search tsvector GENERATED ALWAYS AS (
        CASE WHEN kind = 'message' THEN to_tsvector('simple'::regconfig, chat_search_document(chat_search_words(COALESCE(chat_search_fold(body), body)))) END) STORED;

CREATE INDEX message_search_idx ON message USING gin (search) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;
CREATE INDEX message_body_trgm_idx ON message USING gin ((COALESCE(search_body, body)) gin_trgm_ops) WITH (gin_pending_list_limit = 16384)
    WHERE kind = 'message' AND recalled_at IS NULL;

-- As in 0025: the new columns have no statistics until the next ANALYZE,
-- and a search's plan reads them.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM message) THEN
        ANALYZE message;
    END IF;
END
$$;
