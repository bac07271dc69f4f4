#!/usr/bin/env bash
# bench/pgstat.sh — where PostgreSQL's time goes under a chatbench load.
#
#   bench/pgstat.sh [chatbench flags...]      e.g. bench/pgstat.sh -direct 1 -rate 2000
#
# Starts chatd on a fresh embedded PostgreSQL with pg_stat_statements
# loaded, runs chatbench (200 clients, 1000 conversations, 25 s unless the
# flags say otherwise), resets the statistics 20 s in, samples the wait
# events of active backends 50 times over the next 10 s, and prints:
#   - the wait-event histogram (Lock:* = lock waits, IO:WALSync = fsync,
#     cpu = running);
#   - sequential scans per table (a key lookup planned as a scan shows here)
#     and rows inserted, updated (HOT: without an index entry), deleted;
#   - the seconds since the reset, commits and WAL written meanwhile;
#   - the statements by total execution time;
#   - the CPU seconds each kind of PostgreSQL process spent meanwhile
#     (chatd's pool, its push decider's, the WAL writer, autovacuum ...),
#     from /proc, and chatd's own.
#   - the delivered-watermark flush: its two statements' calls, mean time
#     and rows, and the (conversation, user) pairs per flush.
# BIN=dir runs the chatd and chatbench in dir instead of building them.
# Needs jq, curl, psql and the pg_stat_statements module (postgresql-contrib).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
W=$(mktemp -d /tmp/chatd-pgstat.XXXXXX)
chmod 755 "$W"
P=""
cleanup() { [ -n "$P" ] && kill "$P" 2>/dev/null && wait "$P" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
if [ -n "${BIN:-}" ]; then # prebuilt chatd and chatbench, for A/B runs of two builds
	mkdir -p "$W/bin" && cp "$BIN/chatd" "$BIN/chatbench" "$W/bin/"
else
	go build -o "$W/bin/" ./cmd/chatd ./cmd/chatbench
fi
limits_off
MQTT=127.0.0.1:${MQTT_PORT:-21783} HTTP=127.0.0.1:${HTTP_PORT:-21780}
start() {
	CHAT_DATA_DIR="$W/data" CHAT_MQTT_ADDR=$MQTT CHAT_HTTP_ADDR=$HTTP CHAT_LOG_LEVEL=warn "$W/bin/chatd" >"$W/chatd.log" 2>&1 &
	P=$!
	for _ in $(seq 1 120); do curl -fsS "http://$HTTP/readyz" >/dev/null 2>&1 && return; sleep 0.5; done
	cat "$W/chatd.log" >&2
	exit 1
}
start # initdb and migrations
kill "$P"; wait "$P" || true
printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n" >>"$W/data/pg/postgresql.auto.conf"
start
PM="$W/data/pg/postmaster.pid"
DB="host=$(sed -n 5p "$PM") port=$(sed -n 4p "$PM") user=postgres dbname=chat"
psql "$DB" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
"$W/bin/chatbench" -clients 200 -conversations 1000 -duration 25s -drain 120s -progress off -broker "$MQTT" \
	-http "http://$HTTP" -data-dir "$W/data" -chatd-pid "$P" -settle 60s -json "$@" >"$W/out.json" 2>"$W/chatbench.err" &
B=$!
sleep 20
psql "$DB" -qc "SELECT pg_stat_statements_reset(), pg_stat_reset(), pg_stat_reset_shared('wal')" >/dev/null
T0=$(date +%s.%N)
# cpu_by_process prints "pid|kind|CPU ticks" for every process of the
# cluster that pg_stat_activity names (chatd's pools by application name).
cpu_by_process() {
	psql "$DB" -Atc "SELECT pid, backend_type || ' ' || coalesce(nullif(application_name, ''), '-') FROM pg_stat_activity WHERE pid <> pg_backend_pid()" |
		while IFS='|' read -r pid kind; do
			[ -r "/proc/$pid/stat" ] && echo "$pid|$kind|$(awk '{print $14 + $15}' "/proc/$pid/stat")"
		done || true
}
cpu_by_process | sort -t"|" -k1,1 >"$W/cpu1"
C1=$(awk '{print $14 + $15}' "/proc/$P/stat")
echo "== wait events of active backends (50 samples over 10 s)"
for _ in $(seq 1 50); do
	psql "$DB" -Atc "SELECT coalesce(wait_event_type, 'cpu') || ':' || coalesce(wait_event, '-') || '  ' ||
		left(regexp_replace(query, '\s+', ' ', 'g'), 60) FROM pg_stat_activity
		WHERE state = 'active' AND pid <> pg_backend_pid()"
	sleep 0.2
done | sort | uniq -c | sort -rn | head -20
cpu_by_process | sort -t"|" -k1,1 >"$W/cpu2"
C2=$(awk '{print $14 + $15}' "/proc/$P/stat")
T1=$(date +%s.%N)
echo "== since the reset: $(awk -v a="$T0" -v b="$T1" 'BEGIN {printf "%.1f", b - a}') s; commits, WAL"
psql "$DB" -c "SELECT d.xact_commit AS commits, w.wal_records, w.wal_fpi, pg_size_pretty(w.wal_bytes) AS wal
	FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()"
echo "== sequential scans and row writes (HOT: updates that wrote no index entry)"
psql "$DB" -c "SELECT relname, seq_scan, seq_tup_read, idx_scan, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del, n_live_tup
	FROM pg_stat_user_tables ORDER BY seq_tup_read + n_tup_ins + n_tup_upd + n_tup_del DESC LIMIT 10"
echo "== statements by total execution time (since the reset)"
psql "$DB" -c "SELECT calls, round(total_exec_time::numeric) AS ms, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS query
	FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15"
echo "== CPU seconds over those 10 s, by process kind (chatd itself: $(awk -v a="$C1" -v b="$C2" 'BEGIN {printf "%.2f", (b - a) / 100}'))"
join -t'|' "$W/cpu1" "$W/cpu2" | awk -F'|' '{s[$2] += $5 - $3} END {for (k in s) printf "%8.2f  %s\n", s[k] / 100, k}' | sort -rn
echo "== the delivered-watermark flush: its plan and upsert (since the reset), (conversation, user) pairs per flush (whole run)"
psql "$DB" -Atc "SELECT CASE WHEN query LIKE 'INSERT INTO member_delivery%' THEN 'upsert' ELSE 'plan' END || ' calls=' || calls ||
	' mean_ms=' || round(mean_exec_time::numeric, 2) || ' rows=' || rows FROM pg_stat_statements
	WHERE query LIKE '%LEAST(r.seq, c.last_seq), s.sender_id%' OR query LIKE 'INSERT INTO member_delivery%' ORDER BY 1"
curl -fsS "http://$HTTP/metrics" | awk '/^chat_receipt_batch_size_sum\{kind="delivered"\}/ {s = $2} /^chat_receipt_batch_size_count\{kind="delivered"\}/ {c = $2}
	END {if (c > 0) printf "pairs per flush %.1f (%d flushes)\n", s / c, c}'
wait "$B" || true
jq -r '"chatbench: acked \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s, PUBACK p50/p99 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99) ms, ok \(.ok)"' "$W/out.json"
