#!/usr/bin/env bash
# bench/efficiency.sh — what chatd and its PostgreSQL spend per message and
# what chatd holds per connection, each against plain mochi on the same
# workload in the same run (docs/benchmarks.md, "Efficiency").
#
#   bench/efficiency.sh                # about 12 minutes
#   RATES="1000" SCALE_CLIENTS=4000 bench/efficiency.sh   # a quick look
#
# Steps:
#   1. build chatd, chatbench, connbench, plainbroker, sendbench;
#   2. chatd (rate limits off) on a fresh embedded PostgreSQL (fsync on);
#      the seed's send transaction through pgbench (the database's
#      ceiling); a lone sender's PUBACK p50 against its transaction run
#      alone by pgbench, LONE_ROUNDS rounds taking turns (the median of
#      the rounds' differences);
#   3. CPU per message: for each rate in RATES, chatbench with CLIENTS
#      clients, CONVERSATIONS direct conversations, QoS 1, BODY-byte
#      bodies, at that fixed rate for DURATION, every delivery checked:
#      CPU seconds of chatd, of PostgreSQL (postmaster and every backend)
#      and of chatbench, each divided by the
#      acked messages, and the PUBACK and delivery p99; then the direct
#      maximum (as fast as PUBACKs allow) against pgbench's rate;
#   4. the same rates against plainbroker (mochi, no chat hooks);
#   5. memory: chatd restarted with its default limits on a fresh
#      database, connbench with SCALE_CLIENTS persistent sessions from
#      several loopback addresses at CONNECT_RATE/s (connect, one message
#      each, disconnect, a second device each, a message owed each while
#      offline, resume); then plainbroker the same;
#   6. the tables.
# Tunables (environment): RATES="1000 2000" DURATION=20s CLIENTS=200
# CONVERSATIONS=1000 BODY=100 INFLIGHT=4 PGBENCH_CLIENTS=8 LONE_ROUNDS=3
# SCALE_CLIENTS=(the open-files limit less 200, even) CONNECT_RATE=1000
# SOURCES=127.0.0.2-127.0.0.9 AT_RATE= (chatbench flags at the fixed
# rates, e.g. "-procs 1") KEEP=1 (keep the work dir).
set -euo pipefail
cd "$(dirname "$0")/.."

LONE_ROUNDS=${LONE_ROUNDS:-3}
PGBENCH_CLIENTS=${PGBENCH_CLIENTS:-8}
# Each process here may hold its open-files limit of descriptors: chatd
# needs some beside the connections (listeners, PostgreSQL, logs).
SCALE_CLIENTS=${SCALE_CLIENTS:-$(( ($(ulimit -n) - 200) / 2 * 2 ))}
CONNECT_RATE=${CONNECT_RATE:-1000}
SOURCES=${SOURCES:-127.0.0.2-127.0.0.9}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21883}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21880}
PPROF_ADDR=127.0.0.1:${PPROF_PORT:-21860}
PLAIN_ADDR=127.0.0.1:${PLAIN_PORT:-21884}
PLAIN_METRICS=127.0.0.1:${PLAIN_METRICS_PORT:-21885}

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init efficiency
efficiency_workload
T0=$(date +%s)

step "build"
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench ./cmd/connbench ./cmd/plainbroker ./cmd/sendbench

step "machine"
print_machine
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR" "$PPROF_ADDR" "$PLAIN_ADDR" "$PLAIN_METRICS"

step "start chatd (rate limits off)"
limits_off
start_chatd cpu
PGP=()
[ -n "$PG_PID" ] && PGP=(-pg-pid "$PG_PID")

step "the database's ceiling: pgbench, seed send transaction, $PGBENCH_CLIENTS clients, 10s"
# As in bench/run.sh: user triggers on outbox off meanwhile (chatd idle).
"$WORK/bin/sendbench" -database-url "$DBURL" -senders "$PGBENCH_CLIENTS" -duration 10s -pgbench -outbox-triggers=false | tee "$WORK/sendbench.txt"
PGBENCH_TPS=$(awk '/^pgbench +[0-9]+ clients:/ {print $4}' "$WORK/sendbench.txt")

# chatbench keeps every core (AT_RATE="-procs 1" would put it on one at the
# fixed rates: 10-20 µs less of its CPU a message, but on a quiet machine
# chatd's PUBACK p50/p99 as chatbench sees them were as high or higher in
# 6 of 6 pairs; docs/benchmarks.md, "a lighter load generator").
read -r -a AT_RATE <<<"${AT_RATE:-}"
J_CPU='"acked \(.acked) (\(.ackedPerSec|floor)/s), lost \(.lost), ok \(.ok); CPU per message: server \(.cpuPerMessageUs.server) µs, PostgreSQL \(.cpuPerMessageUs.postgres // 0) µs, chatbench \(.cpuPerMessageUs.chatbench) µs; PUBACK p50/p99 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99) ms; delivery p50/p99 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99) ms; machine busy \(.machine.busyPercent|floor)%"'

step "a lone sender on the idle chatd: 2 clients, 1 direct conversation, 50 msgs/s, 10s, $LONE_ROUNDS rounds"
# The commit's flush time on this machine drifts from minute to minute by
# more than the difference sought, so the two take turns and each round's
# difference counts: the figure is their median.
LONE_DIFFS=()
for i in $(seq 1 "$LONE_ROUNDS"); do
	"$WORK/bin/chatbench" -clients 2 -conversations 1 -direct 1 -body-bytes "$BODY" -rate 50 -duration 10s -progress off \
		-broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" -data-dir "$CHATD_DIR/data" -json >"$WORK/lone.json" || true
	LONE_P50=$(jq '.ackLatencyMs.p50' "$WORK/lone.json")
	sendtx_alone
	LONE_DIFFS+=("$(awk -v a="$LONE_P50" -v b="$SENDTX_MS" 'BEGIN {printf "%.3f", a - b}')")
	echo "round $i: PUBACK p50 $LONE_P50 ms; its transaction alone (pgbench, 50/s) p50 $SENDTX_MS ms (${LONE_DIFFS[-1]} ms)"
	rm -f "$WORK"/sendtx-log.*
done
LONE_DIFF=$(printf '%s\n' "${LONE_DIFFS[@]}" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')

for R in $RATES; do
	step "chatd at $R msgs/s: $CLIENTS clients, $CONVERSATIONS direct conversations, $DURATION"
	"$WORK/bin/chatbench" "${BENCH[@]}" "${AT_RATE[@]}" -rate "$R" -duration "$DURATION" -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
		-data-dir "$CHATD_DIR/data" -chatd-pid "$CHATD_PID" "${PGP[@]}" -verify-db "$DBURL" -json >"$WORK/chatd-$R.json" || true
	jq -r "$J_CPU" "$WORK/chatd-$R.json"
done

step "chatd at the direct maximum (as fast as PUBACKs allow), $DURATION"
"$WORK/bin/chatbench" "${BENCH[@]}" -duration "$DURATION" -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
	-data-dir "$CHATD_DIR/data" -chatd-pid "$CHATD_PID" "${PGP[@]}" -verify-db "$DBURL" -json >"$WORK/chatd-max.json" || true
jq -r "$J_CPU" "$WORK/chatd-max.json"
stop_chatd

for R in $RATES; do
	step "plain mochi at $R msgs/s, $DURATION"
	plain_restart
	"$WORK/bin/chatbench" "${BENCH[@]}" "${AT_RATE[@]}" -plain -rate "$R" -duration "$DURATION" -broker "$PLAIN_ADDR" -chatd-pid "$PLAIN_PID" -json >"$WORK/plain-$R.json" || true
	jq -r "$J_CPU" "$WORK/plain-$R.json"
done
plain_stop

step "memory: chatd with its default limits, fresh database, $SCALE_CLIENTS persistent sessions at $CONNECT_RATE/s from $SOURCES"
limits_on
export CHAT_PPROF_ADDR="$PPROF_ADDR"
start_chatd mem
PGP=()
[ -n "$PG_PID" ] && PGP=(-pg-pid "$PG_PID")
"$WORK/bin/connbench" -clients "$SCALE_CLIENTS" -connect-rate "$CONNECT_RATE" -sources "$SOURCES" -broker "$MQTT_ADDR" \
	-http "http://$HTTP_ADDR" -data-dir "$CHATD_DIR/data" -pprof "http://$PPROF_ADDR" -server-pid "$CHATD_PID" "${PGP[@]}" \
	-step-timeout 3m -json >"$WORK/mem-chatd.json" || true
jq -r '.steps[] | "\(.name)\t\(.seconds * 10 | round / 10)s\tok \(.ok)\t\(.detail // "")\t\(.error // "")"' "$WORK/mem-chatd.json"
stop_chatd
unset CHAT_PPROF_ADDR

step "memory: plain mochi, $SCALE_CLIENTS persistent sessions"
plain_restart -metrics "$PLAIN_METRICS"
"$WORK/bin/connbench" -plain -clients "$SCALE_CLIENTS" -connect-rate "$CONNECT_RATE" -sources "$SOURCES" -broker "$PLAIN_ADDR" \
	-metrics "http://$PLAIN_METRICS/metrics" -pprof "http://$PLAIN_METRICS" -server-pid "$PLAIN_PID" -step-timeout 3m -json >"$WORK/mem-plain.json" || true
jq -r '.steps[] | "\(.name)\t\(.seconds * 10 | round / 10)s\tok \(.ok)\t\(.detail // "")\t\(.error // "")"' "$WORK/mem-plain.json"
plain_stop

step "tables"
{
	echo "CPU per acked message (µs), direct, $CLIENTS clients, $CONVERSATIONS conversations, QoS 1, $BODY-byte bodies, $DURATION at each rate"
	printf "%-8s %9s %9s %9s %9s %11s %9s %9s %7s %13s %13s %5s\n" rate chatd postgres total chatbench "plain mochi" plain-gen ratio lost "PUBACK p99" "deliv. p99" ok
	for R in $RATES; do
		jq -rn --slurpfile c "$WORK/chatd-$R.json" --slurpfile p "$WORK/plain-$R.json" --arg r "$R" '
			($c[0]) as $c | ($p[0]) as $p |
			"\($r)/s \($c.cpuPerMessageUs.server) \($c.cpuPerMessageUs.postgres // 0) \($c.cpuPerMessageUs.total) \($c.cpuPerMessageUs.chatbench) \($p.cpuPerMessageUs.server) \($p.cpuPerMessageUs.chatbench) \(($c.cpuPerMessageUs.total / $p.cpuPerMessageUs.server * 100 | round) / 100)x \($c.lost) \($c.ackLatencyMs.p99)ms \($c.deliveryLatencyMs.p99)ms \($c.ok and $p.ok)"' |
			awk '{printf "%-8s %9s %9s %9s %9s %11s %9s %9s %7s %13s %13s %5s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12}'
	done
	echo
	echo "plain mochi latencies at the same rates:"
	for R in $RATES; do
		jq -r --arg r "$R" '"  \($r)/s: PUBACK p99 \(.ackLatencyMs.p99) ms, delivery p99 \(.deliveryLatencyMs.p99) ms"' "$WORK/plain-$R.json"
	done
	echo
	jq -rn --slurpfile m "$WORK/chatd-max.json" --argjson pt "$PGBENCH_TPS" '($m[0]) as $m |
		"direct maximum: chatd acked \($m.ackedPerSec|floor) msgs/s = \(($m.ackedPerSec / $pt * 100 | floor) / 100)x pgbench (\($pt|floor) tps, seed send transaction, '"$PGBENCH_CLIENTS"' clients); lost \($m.lost), database check gapless \($m.database.gapless // "n/a"); CPU per message \($m.cpuPerMessageUs.total) µs"'
	printf "lone sender: PUBACK p50 over its transaction alone, rounds taking turns: %+.3f ms (median of %s)\n" "$LONE_DIFF" "${LONE_DIFFS[*]}"
	echo
	echo "memory per session ($SCALE_CLIENTS persistent MQTT v5 sessions; heap in use after 4 collections + stacks, less the step before any connection):"
	printf "%-11s %-7s %9s %6s %15s %15s %13s %12s %12s\n" step target seconds ok "heap+stack KiB" "heap KiB" "stack KiB" "RSS KiB" "PG PSS MiB"
	for t in chatd plain; do
		jq -r --arg t "$t" '.steps[] | select(.perClient != null) |
			"\(.name) \($t) \(.seconds * 10 | round / 10) \(.ok) \(.perClient.totalKiB) \(.perClient.heapInuseKiB) \(.perClient.stackKiB) \(.perClient.rssKiB) \(.mem.pgPssMiB // 0 | floor)"' "$WORK/mem-$t.json" |
			awk '{printf "%-11s %-7s %9s %6s %15s %15s %13s %12s %12s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}'
	done
	echo "(park: a second device per user connected and disconnected; its figure is one more offline session, less the disconnect step)"
	for t in chatd plain; do
		jq -r --arg t "$t" '"\($t): lost \(.lost), duplicates \(.duplicates), ok \(.ok)"' "$WORK/mem-$t.json"
	done
	echo
	echo "elapsed $(( $(date +%s) - T0 )) s"
} | tee "$WORK/tables.txt"
echo
echo "reports: $WORK/*.json (kept with KEEP=1)"
