#!/usr/bin/env bash
# bench/run.sh — chatd against its database's ceiling and against a plain
# MQTT broker, in one go on one machine (see docs/benchmarks.md).
#
#   bench/run.sh                      # embedded PostgreSQL (fsync on) in a temp dir
#   CHAT_DATABASE_URL=postgres://... bench/run.sh
#
# Steps:
#   1. build chatd, chatbench, plainbroker, sendbench;
#   2. start chatd (rate limits off) on CHAT_DATABASE_URL or on its embedded
#      PostgreSQL in a temp data dir;
#   3. the database's ceiling: sendbench -pgbench runs the seed's send
#      transaction (/work/shared/reference, adapted to this schema) through
#      pgbench against that same PostgreSQL;
#   4. chatbench against chatd: CLIENTS clients, CONVERSATIONS conversations,
#      QoS 1, BODY-byte bodies, as fast as PUBACKs allow for DURATION, every
#      delivery verified, then verified in the database; then a run at a
#      sustainable rate (SUSTAINED_RATE msgs/s) for the latencies;
#   5. chatd stopped, plainbroker (mochi, allow-all, no chat hooks) and
#      chatbench -plain with the same workload: the broker's ceiling;
#   6. the ratios.
# Tunables (environment): DURATION=20s PG_DURATION=10s CLIENTS=200
# CONVERSATIONS=1000 BODY=100 INFLIGHT=4 PGBENCH_CLIENTS=8 SUSTAINED_RATE=300
# DRAIN=180s KEEP=1 (keep the work dir).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20s}
PG_DURATION=${PG_DURATION:-10s}
CLIENTS=${CLIENTS:-200}
CONVERSATIONS=${CONVERSATIONS:-1000}
BODY=${BODY:-100}
INFLIGHT=${INFLIGHT:-4}
PGBENCH_CLIENTS=${PGBENCH_CLIENTS:-8}
SUSTAINED_RATE=${SUSTAINED_RATE:-300}
DRAIN=${DRAIN:-180s}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-31883}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-38080}
PLAIN_ADDR=127.0.0.1:${PLAIN_PORT:-31884}

for tool in go jq curl; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/chatd-bench.XXXXXX)
chmod 755 "$WORK" # PostgreSQL runs as an unprivileged account when we are root
CHATD_PID=""
PLAIN_PID=""
cleanup() {
	[ -n "$PLAIN_PID" ] && kill "$PLAIN_PID" 2>/dev/null && wait "$PLAIN_PID" 2>/dev/null || true
	[ -n "$CHATD_PID" ] && kill "$CHATD_PID" 2>/dev/null && wait "$CHATD_PID" 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# step prints a heading with the load average: other work on the machine
# skews every figure, so the report shows it.
step() { printf '\n== %s   [load average %s]\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

step "build"
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench ./cmd/plainbroker ./cmd/sendbench

step "machine"
PGBIN=$(dirname "$(command -v pg_config || echo /usr/lib/postgresql/bin/x)")
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/postgres" ] && PGBIN=$d; done
{
	echo "nproc: $(nproc)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "memory: $(free -h | awk '/^Mem:/ {print $2}')"
	echo "kernel: $(uname -r)"
	echo "go: $(go version | awk '{print $3}')"
	echo "postgresql: $("$PGBIN/postgres" --version 2>/dev/null || echo unknown)"
} | tee "$WORK/machine.txt"

step "start chatd (rate limits off)"
export CHAT_LIMIT_SEND_RATE=0 CHAT_LIMIT_CONV_RATE=0 CHAT_LIMIT_READ_RATE=0 CHAT_LIMIT_API_RATE=0 CHAT_LIMIT_CONNECT_RATE=0
CHAT_DATA_DIR="$WORK/data" CHAT_MQTT_ADDR="$MQTT_ADDR" CHAT_HTTP_ADDR="$HTTP_ADDR" CHAT_LOG_LEVEL=warn \
	"$WORK/bin/chatd" >"$WORK/chatd.log" 2>&1 &
CHATD_PID=$!
for _ in $(seq 1 120); do
	curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null 2>&1 && break
	kill -0 "$CHATD_PID" 2>/dev/null || { cat "$WORK/chatd.log" >&2; echo "run.sh: chatd exited" >&2; exit 1; }
	sleep 0.5
done
curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null || { cat "$WORK/chatd.log" >&2; exit 1; }
if [ -n "${CHAT_DATABASE_URL:-}" ]; then
	DBURL=$CHAT_DATABASE_URL
	echo "PostgreSQL: CHAT_DATABASE_URL"
else
	PM="$WORK/data/pg/postmaster.pid"
	DBURL="host=$(sed -n 5p "$PM") port=$(sed -n 4p "$PM") user=postgres dbname=chat sslmode=disable"
	echo "PostgreSQL: chatd's embedded cluster, $DBURL (fsync on)"
fi
echo "chatd pid $CHATD_PID on mqtt://$MQTT_ADDR, http://$HTTP_ADDR"

step "the database's ceiling: pgbench, seed send transaction, $PGBENCH_CLIENTS clients, $PG_DURATION"
"$WORK/bin/sendbench" -database-url "$DBURL" -senders "$PGBENCH_CLIENTS" -duration "$PG_DURATION" -pgbench | tee "$WORK/sendbench.txt"
PGBENCH_TPS=$(awk '/^pgbench +[0-9]+ clients:/ {print $4}' "$WORK/sendbench.txt")

BENCH=(-clients "$CLIENTS" -conversations "$CONVERSATIONS" -body-bytes "$BODY" -inflight "$INFLIGHT" -drain "$DRAIN" -progress off)
step "chatbench against chatd: as fast as PUBACKs allow, $DURATION"
"$WORK/bin/chatbench" "${BENCH[@]}" -duration "$DURATION" -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
	-data-dir "$WORK/data" -chatd-pid "$CHATD_PID" -verify-db "$DBURL" -json >"$WORK/chatd.json" || true
jq -r '"acked \(.acked) msgs in \(.sendSeconds|floor)s: \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s; lost \(.lost), gaps \(.gaps), duplicates \(.duplicates), resent after 0x80 \(.retried); PUBACK p50/p99 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99) ms; delivery p50/p99 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99) ms; drained \(.drained) after \(.drainSeconds|floor)s; db gapless \(.database.gapless); ok \(.ok)\nmachine busy \(.machine.busyPercent|floor)% (chatbench \(.machine.chatbenchPercent|floor)% of a core), chatd CPU \(.server.cpuPercent|floor)% of a core, RSS max \(.server.rssMaxMiB|floor) MiB; chatd metrics: send tx avg \(.serverMetrics.sendAvgMs) ms, delivery avg \(.serverMetrics.deliveryAvgMs) ms, pool acquire wait \(.serverMetrics.poolAcquireWaitSecs) s, queue overflows \(.serverMetrics.queueOverflows), replayed \(.serverMetrics.replayed)"' "$WORK/chatd.json"

step "chatbench against chatd: sustainable rate $SUSTAINED_RATE msgs/s, 10s"
"$WORK/bin/chatbench" "${BENCH[@]}" -rate "$SUSTAINED_RATE" -duration 10s -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
	-data-dir "$WORK/data" -chatd-pid "$CHATD_PID" -json >"$WORK/chatd-sustained.json" || true
jq -r '"acked \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s; PUBACK p50/p99/p99.9 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99)/\(.ackLatencyMs.p999) ms; delivery p50/p99/p99.9 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99)/\(.deliveryLatencyMs.p999) ms; lost \(.lost); ok \(.ok)\nmachine busy \(.machine.busyPercent|floor)%, chatd CPU \(.server.cpuPercent|floor)% of a core; chatd metrics: send tx avg \(.serverMetrics.sendAvgMs) ms, delivery avg \(.serverMetrics.deliveryAvgMs) ms, pool acquire wait \(.serverMetrics.poolAcquireWaitSecs) s, queue overflows \(.serverMetrics.queueOverflows)"' "$WORK/chatd-sustained.json"

step "stop chatd"
kill "$CHATD_PID"
wait "$CHATD_PID" 2>/dev/null || true
CHATD_PID=""

step "the broker's ceiling: plainbroker + chatbench -plain, $DURATION"
"$WORK/bin/plainbroker" -addr "$PLAIN_ADDR" >"$WORK/plainbroker.log" 2>&1 &
PLAIN_PID=$!
sleep 1
"$WORK/bin/chatbench" "${BENCH[@]}" -plain -duration "$DURATION" -broker "$PLAIN_ADDR" -chatd-pid "$PLAIN_PID" -json >"$WORK/plain.json" || true
jq -r '"acked \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s; lost \(.lost); PUBACK p50/p99 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99) ms; delivery p50/p99 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99) ms; ok \(.ok)\nmachine busy \(.machine.busyPercent|floor)% (chatbench \(.machine.chatbenchPercent|floor)% of a core), broker CPU \(.server.cpuPercent|floor)% of a core, RSS max \(.server.rssMaxMiB|floor) MiB"' "$WORK/plain.json"

step "ratios"
CHATD_ACKED=$(jq '.ackedPerSec' "$WORK/chatd.json")
CHATD_DELIV=$(jq '.deliveriesPerSec' "$WORK/chatd.json")
PLAIN_ACKED=$(jq '.ackedPerSec' "$WORK/plain.json")
PLAIN_DELIV=$(jq '.deliveriesPerSec' "$WORK/plain.json")
awk -v ca="$CHATD_ACKED" -v cd="$CHATD_DELIV" -v pt="$PGBENCH_TPS" -v pa="$PLAIN_ACKED" -v pd="$PLAIN_DELIV" 'BEGIN {
	printf "pgbench (seed send transaction)      %8.0f tps\n", pt
	printf "chatd acked                          %8.0f msgs/s   %8.0f deliveries/s\n", ca, cd
	printf "plain mochi acked                    %8.0f msgs/s   %8.0f deliveries/s\n", pa, pd
	printf "chatd acked msgs/s / pgbench tps     %8.2f\n", ca / pt
	printf "chatd / plain mochi, acked msgs/s    %8.2f\n", ca / pa
	printf "chatd / plain mochi, deliveries/s    %8.2f\n", cd / pd
}' | tee "$WORK/ratios.txt"
echo
echo "reports: $WORK/{chatd,chatd-sustained,plain}.json (kept with KEEP=1)"
