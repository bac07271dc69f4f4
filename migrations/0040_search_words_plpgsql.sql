-- chat_search_words in PL/pgSQL: the same words, at a fraction of the
-- cost to every message written.
--
-- As a LANGUAGE sql function it was never inlined into the message
-- table's generated search column: its argument (the folded body) is a
-- function call, which PostgreSQL does not copy into a body that names
-- the parameter more than once. So every statement that inserts
-- messages parsed and planned the function's body twice (the planner's
-- inlining attempt and the SQL function's own set-up, neither cached
-- across statements) and ran one executor per row: about 45 µs of
-- backend CPU per insert statement on the test machine, against 19 µs
-- for everything else the generated columns compute
-- (docs/benchmarks.md, "The answer's aggregates, and the search
-- column's SQL function"). A PL/pgSQL function keeps its compiled body and
-- its expression's plan for the session.
--
-- The result is the same for every text, so the stored search column
-- stays as it is: no rewrite of the message table, no index rebuilt.

CREATE OR REPLACE FUNCTION chat_search_words(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN CASE WHEN octet_length(t) = char_length(t) -- ASCII
    THEN regexp_replace(t, '[!-/:-@[-`{-~]', ' ', 'g')
    ELSE regexp_replace(t, '['
        '\u0001-\u002f\u003a-\u0040\u005b-\u0060\u007b-\u00a9\u00ab-\u00b4\u00b6-\u00b9\u00bb-\u00bf\u00d7\u00f7'
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
        ']', ' ', 'g') END;
END
$$;
