#!/usr/bin/env bash
# bench/tail.sh — where the PUBACK tail at a fixed rate comes from (issue
# 24): the figures that do not depend on how busy the machine is.
#
#   bench/tail.sh                     # 1,000 msgs/s, 20 s, about 1.5 minutes
#   RATE=2000 DURATION=30s bench/tail.sh
#
# Starts chatd on a fresh embedded PostgreSQL (fsync on) that logs every
# statement's duration, lock waits past 5 ms, checkpoints and autovacuum
# runs, runs chatbench (CLIENTS clients, CONVERSATIONS direct
# conversations, QoS 1, BODY-byte bodies, RATE msgs/s for DURATION) and
# prints, over the sending only:
#   - chatbench's PUBACK percentiles;
#   - each send transaction split into its statement (chat_send_batch) and
#     its COMMIT (the WAL flush), p50/p90/p99/max, and what the slowest 2%
#     of them spent in each;
#   - lock waits past 5 ms, checkpoints, autovacuum runs, the search
#     indexes' pending-list merges (count, mean, max), and the statements
#     by total time (pg_stat_statements; the flush writers' among them);
#   - the WAL segments PostgreSQL created meanwhile and the slowest COMMIT
#     of the 150 ms after each (the commit crossing into a new segment
#     creates it holding the WAL write lock);
#   - WAL: flushes (fsyncs) per acked message and the share of the run they
#     took (pg_stat_wal, track_wal_io_timing);
#   - then, with chatd idle, a bare commit's latency on this disk: pgbench
#     running SELECT txid_current() (one WAL flush each) at 200/s for 10 s.
# Logging every statement costs PostgreSQL some CPU: compare the
# percentiles with bench/efficiency.sh's only in kind.
# Tunables (environment): RATE=1000 DURATION=20s CLIENTS=200
# CONVERSATIONS=1000 BODY=100 INFLIGHT=4 PGCONF=(postgresql.conf lines;
# what chatd sets on the postmaster's command line, wal_init_zero, wins
# over them) KEEP=1 (keep the work dir).
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
DURATION=${DURATION:-20s}
CLIENTS=${CLIENTS:-200}
CONVERSATIONS=${CONVERSATIONS:-1000}
BODY=${BODY:-100}
INFLIGHT=${INFLIGHT:-4}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21993}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21990}

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init tail

step "build"
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR"

step "start chatd (rate limits off) on a cluster logging every statement"
export CHAT_LIMIT_SEND_RATE=0 CHAT_LIMIT_CONV_RATE=0 CHAT_LIMIT_READ_RATE=0 CHAT_LIMIT_API_RATE=0 CHAT_LIMIT_CONNECT_RATE=0 \
	CHAT_LIMIT_CONNECT_USER_RATE=0 CHAT_MAX_CONNECTIONS_PER_USER=0 CHAT_CONNECT_BUDGET_RATE=0
start_chatd run >/dev/null # initdb and migrations
stop_chatd
cat >>"$WORK/run/data/pg/postgresql.auto.conf" <<'CONF'
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
log_min_duration_statement = 0
log_lock_waits = on
deadlock_timeout = '5ms'
log_checkpoints = on
log_autovacuum_min_duration = 0
track_wal_io_timing = on
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %a: '
CONF
# PGCONF: more settings for the run, e.g. "synchronous_commit = off" to
# see what the commit's WAL flush is worth (not a setting to deploy).
printf '%s\n' "${PGCONF:-}" >>"$WORK/run/data/pg/postgresql.auto.conf"
start_chatd run
"$PSQL" "$DBURL" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
PGLOG=$WORK/run/data/pg/postgres.log

step "chatbench: $CLIENTS clients, $CONVERSATIONS direct conversations, $RATE msgs/s, $DURATION"
# The statistics start with the first stored message (the setup before it
# creates users and conversations) and the window of the log with them.
(
	for _ in $(seq 1 1200); do
		n=$("$PSQL" "$DBURL" -Atc "SELECT count(*) FROM message" 2>/dev/null || echo 0)
		[ "${n:-0}" -gt 0 ] && break
		sleep 0.1
	done
	"$PSQL" "$DBURL" -Atc "SELECT pg_stat_reset_shared('wal'), pg_stat_reset_shared('bgwriter'), pg_stat_statements_reset()" >/dev/null
	date -u +%T.%3N >"$WORK/start"
) &
WATCH=$!
"$WORK/bin/chatbench" -clients "$CLIENTS" -conversations "$CONVERSATIONS" -direct 1 -body-bytes "$BODY" -inflight "$INFLIGHT" \
	-rate "$RATE" -duration "$DURATION" -drain 120s -progress off -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
	-data-dir "$CHATD_DIR/data" -json >"$WORK/chatbench.json" || true
wait "$WATCH" || true
date -u +%T.%3N >"$WORK/end"
"$PSQL" "$DBURL" -AtF' ' -c "SELECT wal_sync, round(wal_sync_time::numeric), wal_bytes, round(extract(epoch FROM now() - stats_reset)) FROM pg_stat_wal" >"$WORK/wal.txt"
"$PSQL" "$DBURL" -c "SELECT calls, round(max_exec_time::numeric, 1) AS max_ms, round(mean_exec_time::numeric, 2) AS mean_ms,
	round(total_exec_time::numeric) AS total_ms, left(regexp_replace(query, '\s+', ' ', 'g'), 70) AS query
	FROM pg_stat_statements WHERE query !~* '^\s*(commit|begin)' ORDER BY total_exec_time DESC LIMIT 12" >"$WORK/statements.txt"
ACKED=$(jq '.acked' "$WORK/chatbench.json")
jq -r '"acked \(.acked), lost \(.lost), ok \(.ok); PUBACK p50/p90/p99/max \(.ackLatencyMs.p50)/\(.ackLatencyMs.p90)/\(.ackLatencyMs.p99)/\(.ackLatencyMs.max) ms; delivery p99 \(.deliveryLatencyMs.p99) ms; machine busy \(.machine.busyPercent|floor)%"' "$WORK/chatbench.json"

# window prints the log lines of the sending (timestamps are UTC, HH:MM:SS.mmm).
window() { awk -v s="$(cat "$WORK/start")" -v e="$(cat "$WORK/end")" '$2 >= s && $2 <= e' "$PGLOG"; }

step "send transactions: statement and COMMIT (ms)"
# A send transaction is chat_send_batch's statement and the COMMIT that
# follows it on the same backend.
window | awk '/ duration: / {
		for (i = 1; i <= NF; i++) if ($i == "duration:") d = $(i + 1)
		pid = $4
		if ($0 ~ /execute [^ ]*: SELECT o_status/) { stmt[pid] = d; next }
		if ($0 ~ /execute [^ ]*: COMMIT$/ && (pid in stmt)) { print stmt[pid], d, stmt[pid] + d; delete stmt[pid] }
	}' >"$WORK/sends.txt"
# pcts prints p50, p90, p99 and max of the numbers on stdin.
pcts() { sort -g | awk '{v[NR] = $1} END {if (NR) printf "%7.2f %7.2f %7.2f %7.2f\n", v[int((NR - 1) * .5) + 1], v[int((NR - 1) * .9) + 1], v[int((NR - 1) * .99) + 1], v[NR]}'; }
printf "%-22s %7s %7s %7s %7s\n" "($(wc -l <"$WORK/sends.txt") transactions)" p50 p90 p99 max
printf "%-22s %s\n" statement "$(awk '{print $1}' "$WORK/sends.txt" | pcts)"
printf "%-22s %s\n" COMMIT "$(awk '{print $2}' "$WORK/sends.txt" | pcts)"
printf "%-22s %s\n" both "$(awk '{print $3}' "$WORK/sends.txt" | pcts)"
sort -k3,3gr "$WORK/sends.txt" | awk -v n="$(wc -l <"$WORK/sends.txt")" 'NR <= n / 50 {k++; a += $1; b += $2; cut = $3}
	END {if (k) printf "the slowest 2%% (%d, from %.1f ms): statement %.1f ms, COMMIT %.1f ms on average\n", k, cut, a / k, b / k}'

step "lock waits, checkpoints, autovacuum, search index merges, flush writers"
echo "lock waits past 5 ms: $(window | grep -c 'still waiting for' || true)"
echo "checkpoints started: $(window | grep -c 'checkpoint starting' || true)"
echo "autovacuum/autoanalyze runs: $(window | grep -c 'automatic \(vacuum\|analyze\)' || true)"
window | awk '/ duration: / && /execute [^ ]*: SELECT gin_clean_pending_list/ {
		for (i = 1; i <= NF; i++) if ($i == "duration:") d = $(i + 1)
		n++; s += d; if (d > m) m = d }
	END { printf "pending-list merges (store.RunSearchMaintenance): %d, mean %.1f ms, max %.1f ms\n", n, n ? s / n : 0, m }'
echo "statements by total time over the sending (pg_stat_statements; the cursor writer is WITH s AS MATERIALIZED, the delivered watermarks' plan SELECT r.conversation_id):"
cat "$WORK/statements.txt"

step "WAL segments created during the sending"
# A commit that crosses into a segment PostgreSQL has to create (no
# recycled one left: a new cluster's first minutes) creates it holding the
# WAL write lock; the commits in flight wait. Birth times need statx.
window | awk '/ duration: / && /execute [^ ]*: COMMIT$/ {
		for (i = 1; i <= NF; i++) if ($i == "duration:") d = $(i + 1)
		split($2, t, ":"); print t[1] * 3600 + t[2] * 60 + t[3], d }' >"$WORK/commits.txt"
for f in "$WORK"/run/data/pg/pg_wal/0000*; do stat -c '%w' "$f"; done | awk '{print $2}' | cut -c1-12 |
	awk -v s="$(cat "$WORK/start")" -v e="$(cat "$WORK/end")" '$1 >= s && $1 <= e' | sort >"$WORK/births.txt"
echo "segments created: $(wc -l <"$WORK/births.txt") (wal_init_zero $("$PSQL" "$DBURL" -Atc "SHOW wal_init_zero"))"
while read -r b; do
	awk -v b="$b" 'BEGIN {bs = b; split(b, t, ":"); b = t[1] * 3600 + t[2] * 60 + t[3]}
		$1 >= b && $1 < b + 0.15 && $2 > m {m = $2} END {printf "  %s: the slowest COMMIT of the next 150 ms %.1f ms\n", bs, m}' "$WORK/commits.txt"
done <"$WORK/births.txt"

step "WAL flushes"
read -r SYNCS SYNC_MS WAL_BYTES SECS <"$WORK/wal.txt"
awk -v n="$SYNCS" -v ms="$SYNC_MS" -v b="$WAL_BYTES" -v s="$SECS" -v a="$ACKED" 'BEGIN {
	printf "%d fsyncs (%.2f per acked message), %.2f ms each on average, %.0f%% of the %.0f s; %.0f WAL bytes per acked message\n",
		n, a ? n / a : 0, n ? ms / n : 0, s ? ms / 10 / s : 0, s, a ? b / a : 0 }'

step "a bare commit on this disk (chatd idle): pgbench SELECT txid_current(), 200/s, 10 s"
echo "SELECT txid_current();" >"$WORK/commit.sql"
"$PGBENCH" -n -f "$WORK/commit.sql" -c 1 -R 200 -T 10 -l --log-prefix="$WORK/commit-log" "$DBURL" >"$WORK/commit.txt" 2>&1
# Execution time without the schedule lag (see exec_p50 in bench/lib.sh).
cat "$WORK"/commit-log.* | awk '{print ($3 - $7) / 1000}' | sort -n | awk '
	{ v[NR] = $1 } END { if (NR) printf "commit latency p50 %.2f, p90 %.2f, p99 %.2f, p99.9 %.2f, max %.2f ms (%d commits)\n",
		v[int((NR - 1) * .5) + 1], v[int((NR - 1) * .9) + 1], v[int((NR - 1) * .99) + 1], v[int((NR - 1) * .999) + 1], v[NR], NR }'
