#!/usr/bin/env bash
# bench/searchwords.sh — a send's cost with chat_search_words as migration
# 0033 wrote it (LANGUAGE sql, never inlined into the message table's
# generated search column) against 0040's PL/pgSQL (docs/benchmarks.md,
# "The answer's aggregates, and the search column's SQL function").
#
#   BATCH=1 ROUNDS=40 bench/searchwords.sh
#
# Builds and starts this checkout's chatd once (fresh embedded PostgreSQL),
# creates BATCH direct conversations with chatbench, then in one backend,
# for ROUNDS rounds after a round of warm-up: replaces the function with
# 0033's definition (v1), then 0040's (v2), each committed, and times
# CHUNK calls of chat_send_batch_plain with BATCH 100-byte messages under
# each (a commit after every call, synchronous_commit off), in µs of the
# backend's own CPU per call (/proc/self/schedstat). Prints every round
# and the median of the rounds' differences. Tunables: BATCH=1 ROUNDS=40
# CHUNK=300.
set -euo pipefail
ROUNDS=${ROUNDS:-40}
BATCH=${BATCH:-1}
CHUNK=${CHUNK:-300}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21953}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21950}
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_init searchwords
def() { sed -n '/^CREATE OR REPLACE FUNCTION chat_search_words(/,/^\$\$;/p' "$1" >"$2"; chmod 644 "$2"; [ -s "$2" ] || { echo "searchwords: no chat_search_words in $1" >&2; exit 1; }; }
def migrations/0033_search_ascii_words.sql "$WORK/v1.sql"
def migrations/0040_search_words_plpgsql.sql "$WORK/v2.sql"
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR"
limits_off
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench
start_chatd run >/dev/null
"$WORK/bin/chatbench" -clients "$((BATCH < 20 ? 40 : BATCH))" -conversations "$BATCH" -direct 1 -rate 100 -duration 2s -progress off \
	-broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" -data-dir "$CHATD_DIR/data" -json >/dev/null 2>&1 || true
echo "round µs-per-call-and-commit-of-$BATCH (backend CPU; v1 = 0033's SQL function, v2 = 0040's PL/pgSQL; round 0 is the warm-up)"
"$PSQL" "$DBURL" -q -v ON_ERROR_STOP=1 <<SQL 2>&1 | sed -n 's/.*NOTICE: *//p' | tee "$WORK/rounds.txt"
SET synchronous_commit = off;
SET chat.defer_notify = on;
DO \$\$
DECLARE
	ns0 bigint; line text;
	k text[]; c bigint[]; u bigint[]; b text[]; t bigint[]; fc bigint[]; fs bigint[]; e text[]; o boolean[];
BEGIN
	SELECT array_agg('message'::text), array_agg(x.c), array_agg(x.u), array_agg(repeat('x', 100)), array_agg(0::bigint),
	       array_agg(NULL::bigint), array_agg(NULL::bigint), array_agg(NULL::text), array_agg(false)
	INTO k, c, u, b, t, fc, fs, e, o
	FROM (SELECT DISTINCT ON (conversation_id) conversation_id c, user_id u FROM conversation_member
	      ORDER BY conversation_id, user_id LIMIT $BATCH) x;
	FOR r IN 0..$ROUNDS LOOP
		line := r::text;
		FOR v IN 1..2 LOOP
			EXECUTE pg_read_file('$WORK/v' || v || '.sql');
			COMMIT;
			ns0 := split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint;
			FOR i IN 1..$CHUNK LOOP
				PERFORM * FROM chat_send_batch_plain(k, c, u, array(SELECT gen_random_uuid() FROM generate_series(1, $BATCH)),
				                                     b, t, fc, fs, e, o, NULL, NULL);
				COMMIT;
			END LOOP;
			line := line || ' v' || v || '=' || round((split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - ns0) / 1e3 / $CHUNK);
		END LOOP;
		RAISE NOTICE '%', line;
	END LOOP;
END
\$\$;
SQL
awk '$1 > 0 { n++; split($2, a, "="); split($3, b, "="); v1[n] = a[2]; v2[n] = b[2]; d[n] = b[2] - a[2]; if (d[n] > 0) up++ }
	function med(x, m,   i, j, s) { for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) { s = x[i]; x[i] = x[j]; x[j] = s }; return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2 }
	END { printf "median over the rounds: v1=%s v2=%s\nmedian of the rounds'"'"' differences: v2-v1=%s (higher in %d of %d)\n", med(v1, n), med(v2, n), med(d, n), up + 0, n }' "$WORK/rounds.txt"
