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
#   - the slowest 1% of PUBACKs lined up with what ran while they waited
#     (chatbench -ack-log against the statement log and chatd's
#     GODEBUG=gctrace=1): the cursor and delivered-watermark flushes, the
#     search merges, autovacuum, Go's collections, new WAL segments, slow
#     send statements and COMMITs, each against the same slow spans moved
#     to other moments of the run;
#   - WAL: flushes (fsyncs) per acked message and the share of the run they
#     took (pg_stat_wal, track_wal_io_timing);
#   - then, with chatd idle, a bare commit's latency on this disk: pgbench
#     running SELECT txid_current() (one WAL flush each) at 200/s for 10 s.
# Logging every statement costs PostgreSQL some CPU: compare the
# percentiles with bench/efficiency.sh's only in kind.
# Tunables (environment): RATE=1000 DURATION=20s CLIENTS=200
# CONVERSATIONS=1000 BODY=100 INFLIGHT=4 (bench/lib.sh,
# efficiency_workload) PGCONF=(postgresql.conf lines;
# what chatd sets on the postmaster's command line, wal_init_zero, wins
# over them) CHATD_BIN=(a chatd built elsewhere, to take turns with this
# tree's) KEEP=1 (keep the work dir).
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21993}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21990}

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init tail
efficiency_workload

step "build"
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench
# CHATD_BIN: a chatd built elsewhere (another commit: A/B runs taking turns).
[ -z "${CHATD_BIN:-}" ] || cp "$CHATD_BIN" "$WORK/bin/chatd"
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR"

step "start chatd (rate limits off) on a cluster logging every statement"
limits_off
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
GODEBUG=${GODEBUG:+$GODEBUG,}gctrace=1 start_chatd run
"$PSQL" "$DBURL" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# chatd's start as seconds of the UTC day (10 ms ticks): its collector's
# trace counts from it.
CHATD_T0=$(awk -v tck="$(getconf CLK_TCK)" -v bt="$(awk '/^btime/ {print $2}' /proc/stat)" \
	'{printf "%.3f\n", (bt + $22 / tck) % 86400}' "/proc/$CHATD_PID/stat")
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
"$WORK/bin/chatbench" "${BENCH[@]}" -rate "$RATE" -duration "$DURATION" -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
	-data-dir "$CHATD_DIR/data" -ack-log "$WORK/acks.txt" -json >"$WORK/chatbench.json" || true
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

step "the slow PUBACKs and what ran while they waited"
# Each acknowledged publish is the span from its send to its PUBACK
# (chatbench -ack-log); each event below a span of time (seconds of the UTC
# day). For each kind: how many of all PUBACKs and of the slowest 1% (at or
# above the run's p99) were in flight while one ran, and ("slow, shifted")
# how many of those slow spans would overlap one at other moments of the
# run (each moved by ±0.37 to ±1.66 s, 8 moves): a long span overlaps more
# by its length alone. A kind the slow spans overlap far more often where
# they are than where they are moved to is a cause of the tail.
#   cursor-flush      the cursor writer's statement (Sessions.SaveCursors)
#   delivered-flush   the delivered watermarks' statements (plan, upsert, outbox)
#   search-merge      gin_clean_pending_list (store.RunSearchMaintenance)
#   autovacuum        an autovacuum or autoanalyze run
#   gc-cycle          a Go collection in chatd (GODEBUG=gctrace=1), start to end
#   new-segment       150 ms after PostgreSQL created a WAL segment
#   send-stmt>5ms     a send transaction's chat_send_batch statement over 5 ms
#   send-commit>5ms   a send transaction's COMMIT over 5 ms (its WAL flush)
{
	# A logged statement's text may begin on the line after its header, and
	# an autovacuum run's elapsed time comes a few lines after its own.
	awk -v s="$(cat "$WORK/start")" -v e="$(cat "$WORK/end")" '
		function sod(t, a) { split(t, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
		function classify(q, k) {
			k = ""
			if (q ~ /^[ \t]*WITH s AS MATERIALIZED/) k = "cursor-flush"
			else if (q ~ /^[ \t]*(SELECT r\.conversation_id|INSERT INTO member_delivery|INSERT INTO outbox)/) k = "delivered-flush"
			else if (q ~ /^[ \t]*SELECT gin_clean_pending_list/) k = "search-merge"
			else if (q ~ /^[ \t]*SELECT o_status/) { if (d > .005) k = "send-stmt>5ms"; stmt[pid] = 1 }
			else if (q ~ /^COMMIT$/ && (pid in stmt)) { delete stmt[pid]; if (d > .005) k = "send-commit>5ms" }
			if (k != "") printf "%.3f %.3f %s\n", t - d, t, k
		}
		/^20[0-9][0-9]-/ {
			pend = 0; inw = $2 >= s && $2 <= e
			if (!inw) next
			t = sod($2); pid = $4
			if (/ LOG:  automatic (aggressive )?(vacuum|analyze) /) av = t
			if (!/ duration: .* execute [^ ]*: /) next
			for (i = 1; i <= NF; i++) if ($i == "duration:") d = $(i + 1) / 1000
			q = $0; sub(/^.* execute [^ ]*: /, "", q)
			if (q == "") pend = 1; else classify(q)
			next
		}
		!inw { next }
		pend { pend = 0; classify($0) }
		av && /elapsed: / { for (i = 1; i <= NF; i++) if ($i == "elapsed:") printf "%.3f %.3f autovacuum\n", av - $(i + 1), av; av = 0 }' "$PGLOG"
	awk -v t0="$CHATD_T0" '/^gc [0-9]+ @/ {
		s = t0 + substr($3, 2) + 0; split($5, p, "+")
		printf "%.3f %.3f gc-cycle\n", s, s + (p[1] + p[2] + p[3]) / 1000 }' "$CHATD_DIR/chatd.log"
	awk '{split($1, t, ":"); s = t[1] * 3600 + t[2] * 60 + t[3]; printf "%.3f %.3f new-segment\n", s, s + .15}' "$WORK/births.txt"
} | sort -n >"$WORK/events.txt"
sort -k2,2n "$WORK/acks.txt" | awk '{v[NR] = $2} END {print v[int((NR - 1) * .99) + 1]}' >"$WORK/p99us"
awk -v p99="$(cat "$WORK/p99us")" '
	NR == FNR { es[++m] = $1; ee[m] = $2; ek[m] = $3; kinds[$3]++; dur[$3] += $2 - $1; if ($2 - $1 > long) long = $2 - $1; lo = 1; next }
	{
		s = $1 % 86400; e = s + $2 / 1e6; slow = $2 >= p99; n++; nslow += slow; any = 0
		over[5] += $2 > 5000; over[10] += $2 > 10000; over[20] += $2 > 20000; over[50] += $2 > 50000
		delete hit
		while (lo <= m && es[lo] < s - long) lo++ # the acks come in send order
		for (j = lo; j <= m && es[j] < e; j++) if (ee[j] > s && !(ek[j] in hit)) { hit[ek[j]] = 1; any = 1 }
		for (k in hit) { all[k]++; sl[k] += slow }
		if (!any) { all["(none)"]++; sl["(none)"] += slow }
		if (!slow) next
		# The same span at other moments of the run: a long span overlaps
		# more by its length alone, and a busy minute stretches everything.
		for (o = 1; o <= 8; o++) {
			delete hit; any = 0; sh = (o % 2 ? 1 : -1) * (.37 + .43 * int((o - 1) / 2))
			for (j = 1; j <= m && es[j] < e + sh; j++) if (ee[j] > s + sh && !(ek[j] in hit)) { hit[ek[j]] = 1; any = 1 }
			for (k in hit) shifted[k]++
			if (!any) shifted["(none)"]++
		}
	}
	END {
		printf "%d PUBACKs, p99 %.1f ms: %d at or above it; over 5 / 10 / 20 / 50 ms: %d / %d / %d / %d\n", n, p99 / 1000, nslow, over[5], over[10], over[20], over[50]
		printf "%-16s %7s %9s %14s %16s %16s\n", "kind", "events", "mean ms", "all in flight", "slow in flight", "slow, shifted"
		kinds["(none)"] = 0
		for (k in kinds) printf "%-16s %7d %9.1f %13.1f%% %15.1f%% %15.1f%%\n", k, kinds[k], kinds[k] ? dur[k] / kinds[k] * 1000 : 0, 100 * all[k] / n,
			nslow ? 100 * sl[k] / nslow : 0, nslow ? 100 * shifted[k] / nslow / 8 : 0
	}' "$WORK/events.txt" <(sort -n "$WORK/acks.txt") | { IFS= read -r l; echo "$l"; IFS= read -r l; echo "$l"; sort; }

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
