#!/usr/bin/env bash
# bench/sendvariants.sh — versions of chat_send_batch against each other on
# one database (docs/benchmarks.md, "the lifecycle as the send function now
# runs it").
#
#   bench/sendvariants.sh VARIANT [VARIANT ...]
#   bench/sendvariants.sh migrations/functions.sql 979424e:migrations/functions.sql
#
# A VARIANT is a SQL file that replaces chat_send_batch (CREATE OR REPLACE),
# a FILE.patch, migrations/functions.sql with that patch applied (e.g.
# bench/patches/no-lifecycle.patch), or REV:PATH, a file as git holds it at REV, of which only
# chat_send_batch is applied (the other functions of an old file would
# not fit this schema), or db:NAME, a function of chat_send_batch's
# arguments that the database already has (PAIRED only; e.g.
# db:chat_send_batch_plain, which migrations/functions.sql makes from
# chat_send_batch for plain batches, or db:chat_send_batch_plain_distinct,
# for plain batches with one change a conversation). Before the message lifecycle (979424e and older)
# it took four arrays and left msg_no, a column the lifecycle added as NOT
# NULL, unset: such a function is given msg_no = seq, so it runs on this
# schema, and is called with four arrays (both signatures coexist, so
# variants of either kind take turns).
#
# Builds and starts this checkout's chatd once (fresh embedded PostgreSQL,
# fsync on), creates BATCH direct conversations with chatbench, then for
# ROUNDS rounds applies each file in turn and runs pgbench: CALLS calls of
# chat_send_batch with BATCH 100-byte messages, one into each conversation,
# one client, synchronous_commit off. It prints the pgbench backend's CPU
# per call (utime + stime from /proc) for every pass and the medians.
# PSS=1 loads pg_stat_statements (track = all) and prints, per pass, the
# time of the function's statements (decide = the judging statement,
# write = the one that writes the entries). Tunables: ROUNDS=6 CALLS=400 BATCH=64; keep
# a pass a second or longer (more CALLS for small batches, e.g. BATCH=2
# CALLS=3000): the backend is found by sampling, and its CPU is counted
# in clock ticks.
#
# PAIRED=CHUNK times the variants inside one backend instead, where the
# machine's drift (20-60% within minutes here) cancels out: each variant's
# function is created under a name of its own, and one DO block calls
# them in turn, CHUNK calls of each (a commit after every call), ROUNDS
# rounds after a round of warm-up, and prints the wall time in µs per
# call and commit for every round and over all rounds. E.g. a lone send:
#   PAIRED=300 BATCH=1 bench/sendvariants.sh migrations/functions.sql bench/patches/979424e-send-function.sql
# PAUSE_MS=N sleeps N ms after each call, untimed, as a lone sender's
# backend idles between sends (its caches and the core go cold): e.g.
# PAUSE_MS=20 PAIRED=100 is 50 sends a second.
# OUTBOX_WANTED=1 turns outbox rows on (functions.sql, chat_want_outbox)
# before the passes, as a node with Kafka does: this checkout's functions
# write outbox rows only then (chatd runs here without Kafka).
# CPU=1 times the backend's own CPU instead of the wall (the run time
# /proc/self/schedstat counts in ns, read before and after each chunk):
# on a loaded machine the wall time also holds the waits for a core,
# which swamp a difference of a few percent.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/sendvariants.sh VARIANT [VARIANT ...]" >&2; exit 2; }
ROUNDS=${ROUNDS:-6}
PAUSE_MS=${PAUSE_MS:-0}
CALLS=${CALLS:-400}
BATCH=${BATCH:-64}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21963}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21960}
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_init sendvariants
files=()
for v in "$@"; do
	f=$WORK/$(tr '/:' '__' <<<"$v")
	if [[ $v == db:* ]]; then
		[ -n "${PAIRED:-}" ] || { echo "sendvariants: $v needs PAIRED" >&2; exit 2; }
		f=$v
	elif [ -f "$v" ] && [[ $v == *.patch ]]; then
		patch -s -o "$f" migrations/functions.sql "$v" || { echo "sendvariants: $v does not apply to migrations/functions.sql" >&2; exit 2; }
	elif [ -f "$v" ]; then
		cp "$v" "$f"
	elif git cat-file -e "$v" 2>/dev/null; then
		git show "$v" | sed -n '/^CREATE OR REPLACE FUNCTION chat_send_batch/,/^\$\$;/p' >"$f"
		[ -s "$f" ] || { echo "sendvariants: $v defines no chat_send_batch" >&2; exit 2; }
		if grep -q 'FUNCTION chat_send_batch(p_conv bigint\[\], p_sender bigint\[\], p_id uuid\[\], p_body text\[\])' "$f"; then
			sed -i '1i -- call4' "$f"
			sed -i 's/INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at)/INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)/; s/SELECT t.c, t.q, t.s, t.id, t.b, v_at$/SELECT t.c, t.q, t.s, t.id, t.b, v_at, t.q/' "$f"
			grep -q 'created_at, msg_no)' "$f" || { echo "sendvariants: $v: could not give its message insert msg_no" >&2; exit 2; }
		fi
	else
		echo "sendvariants: $v is neither a file nor REV:PATH" >&2
		exit 2
	fi
	files+=("$f")
done
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR"
limits_off
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench
start_chatd run >/dev/null
if [ -n "${PSS:-}" ]; then
	stop_chatd
	printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n" >>"$CHATD_DIR/data/pg/postgresql.auto.conf"
	start_chatd run >/dev/null
	"$PSQL" "$DBURL" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
fi
"$WORK/bin/chatbench" -clients "$((BATCH < 20 ? 40 : BATCH))" -conversations "$BATCH" -direct 1 -rate 100 -duration 2s -progress off \
	-broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" -data-dir "$CHATD_DIR/data" -json >/dev/null 2>&1 || true
if [ -n "${OUTBOX_WANTED:-}" ]; then
	"$PSQL" "$DBURL" -qAtc "SELECT chat_want_outbox()" >/dev/null
fi
pairs="FROM (SELECT DISTINCT ON (conversation_id) conversation_id c, user_id u FROM conversation_member ORDER BY conversation_id, user_id LIMIT $BATCH) x"
n=$("$PSQL" "$DBURL" -Atc "SELECT count(*) $pairs")
[ "$n" = "$BATCH" ] || { echo "sendvariants: chatbench made $n conversations, want $BATCH" >&2; exit 1; }
arr() { echo "ARRAY[' || string_agg($1, ',') || ']"; }
"$PSQL" "$DBURL" -Atc "SELECT 'SELECT * FROM chat_send_batch($(arr "quote_literal('message')")::text[], $(arr 'c::text')::bigint[], $(arr 'u::text')::bigint[], $(arr "'gen_random_uuid()'")::uuid[], $(arr "quote_literal(repeat('x', 100))")::text[], $(arr "'0'")::bigint[], $(arr "'NULL'")::bigint[], $(arr "'NULL'")::bigint[], $(arr "'NULL'")::text[], $(arr "'false'")::boolean[], NULL, NULL);' $pairs" >"$WORK/send.sql"
"$PSQL" "$DBURL" -Atc "SELECT 'SELECT * FROM chat_send_batch($(arr 'c::text')::bigint[], $(arr 'u::text')::bigint[], $(arr "'gen_random_uuid()'")::uuid[], $(arr "quote_literal(repeat('x', 100))")::text[]);' $pairs" >"$WORK/send4.sql"

# paired: every variant under a name of its own, timed in turn by one DO
# block (PAIRED above).
paired() {
	local i=0 f fn calls="" names=() unit="wall"
	[ -n "${CPU:-}" ] && unit="backend CPU"
	for f in "${files[@]}"; do
		i=$((i + 1))
		fn=chat_send_batch_v$i
		local args="k, c, u, ids(), b, t, fc, fs, e, o, NULL, NULL"
		if [[ $f == db:* ]]; then
			fn=${f#db:}
		else
			sed -n '/^CREATE OR REPLACE FUNCTION chat_send_batch(/,/^\$\$;/p' "$f" | sed "1s/chat_send_batch(/$fn(/" >"$WORK/v$i.sql"
			"$PSQL" "$DBURL" -q -v ON_ERROR_STOP=1 -f "$WORK/v$i.sql"
			head -1 "$f" | grep -q call4 && args="c, u, ids(), b"
		fi
		names+=("v$i=${f##*/}")
		calls+="
		us := 0;
		IF cpu THEN ns0 := split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint; END IF;
		FOR i IN 1..$PAIRED LOOP
			t0 := clock_timestamp();
			PERFORM * FROM $fn(${args//ids()/array(SELECT gen_random_uuid() FROM generate_series(1, $BATCH))});
			COMMIT;
			us := us + extract(epoch FROM clock_timestamp() - t0) * 1e6;
			IF $PAUSE_MS > 0 THEN PERFORM pg_sleep($PAUSE_MS / 1000.0); END IF;
		END LOOP;
		IF cpu THEN us := (split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - ns0) / 1e3; END IF;
		us := us / $PAIRED;
		line := line || ' v$i=' || round(us);
		IF r > 0 THEN tot[$i] := COALESCE(tot[$i], 0) + us; END IF;"
	done
	echo "variants: ${names[*]}"
	echo "round µs-per-call-and-commit-of-$BATCH ($unit, in the backend; round 0 is the warm-up)"
	"$PSQL" "$DBURL" -q -v ON_ERROR_STOP=1 <<SQL 2>&1 | sed -n 's/.*NOTICE: *//p'
SET synchronous_commit = off;
SET chat.defer_notify = on;
DO \$\$
DECLARE
	t0 timestamptz; us float8; line text; tot float8[] := '{}';
	cpu boolean := $([ -n "${CPU:-}" ] && echo true || echo false); ns0 bigint;
	k text[]; c bigint[]; u bigint[]; b text[]; t bigint[]; fc bigint[]; fs bigint[]; e text[]; o boolean[];
BEGIN
	SELECT array_agg('message'::text), array_agg(x.c), array_agg(x.u), array_agg(repeat('x', 100)), array_agg(0::bigint),
	       array_agg(NULL::bigint), array_agg(NULL::bigint), array_agg(NULL::text), array_agg(false)
	INTO k, c, u, b, t, fc, fs, e, o
	$pairs;
	FOR r IN 0..$ROUNDS LOOP
		line := r::text;
		$calls
		RAISE NOTICE '%', line;
	END LOOP;
	line := 'mean over the rounds:';
	FOR i IN 1..cardinality(tot) LOOP
		line := line || ' v' || i || '=' || round(tot[i] / $ROUNDS);
	END LOOP;
	RAISE NOTICE '%', line;
END
\$\$;
SQL
}
# medians: the rounds' medians (a round the machine disturbed moves the
# mean), and each variant's median difference from v1, round by round,
# with how many rounds it was higher.
medians() {
	awk '
		/^[0-9]+ v1=/ && $1 > 0 { n++; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[i, n] = kv[2]; if (i == 2) base[n] = kv[2] } ; nf = NF }
		function med(a, m,   i, j, t) { for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
		END { line = "median over the rounds:"; for (i = 2; i <= nf; i++) { delete a; delete d; for (r = 1; r <= n; r++) { a[r] = v[i, r]; d[r] = v[i, r] - base[r] }; line = line " v" i - 1 "=" med(a, n); if (i > 2) { up = 0; for (r = 1; r <= n; r++) if (d[r] > 0) up++; diff = diff " v" i - 1 "-v1=" med(d, n) " (higher in " up " of " n ")" } }; print line; if (diff != "") print "median of the rounds'"'"' differences:" diff }'
}
if [ -n "${PAIRED:-}" ]; then
	paired | tee "$WORK/paired.txt"
	medians <"$WORK/paired.txt"
	exit 0
fi

# pass FILE: applies FILE, then prints the pgbench backend's CPU µs per call.
pass() {
	local script=$WORK/send.sql
	head -1 "$1" | grep -q call4 && script=$WORK/send4.sql
	"$PSQL" "$DBURL" -q -v ON_ERROR_STOP=1 -f "$1" >/dev/null
	[ -n "${PSS:-}" ] && "$PSQL" "$DBURL" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
	backend_cpu_per_call "$script"
}

statements() {
	"$PSQL" "$DBURL" -Atc "SELECT string_agg(CASE WHEN query LIKE 'WITH req%' THEN 'decide' WHEN query LIKE 'WITH fresh%' OR query LIKE 'WITH ins%' THEN 'write' WHEN query LIKE 'SELECT * FROM chat_send_batch%' THEN 'total' ELSE 'other' END || '=' || round((total_exec_time / calls * 1000)::numeric), ' ' ORDER BY total_exec_time DESC) FROM pg_stat_statements WHERE calls >= $CALLS AND calls < $CALLS * 2 AND total_exec_time / calls > 0.005"
}

for f in "${files[@]}"; do pass "$f" >/dev/null; done # warm-up
declare -A RESULTS
echo "file round µs-CPU-per-call-of-$BATCH [statements, µs wall]"
for round in $(seq 1 "$ROUNDS"); do
	for f in "${files[@]}"; do
		us=$(pass "$f")
		RESULTS[$f]="${RESULTS[$f]:-} $us"
		printf '%-28s %2d %6s %s\n' "${f##*/}" "$round" "$us" "$([ -n "${PSS:-}" ] && statements || true)"
	done
done
echo
echo "medians over $ROUNDS rounds (µs of the backend's CPU per call of $BATCH messages):"
for f in "${files[@]}"; do
	printf '  %-28s %s   (%s)\n' "${f##*/}" "$(tr ' ' '\n' <<<"${RESULTS[$f]}" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')" "${RESULTS[$f]# }"
done
