#!/usr/bin/env bash
# bench/ab.sh — is one build of chatd's send path slower than another?
# (docs/benchmarks.md, "Sends without attachments").
#
#   bench/ab.sh BASE_DIR NEW_DIR        # each holds a chatd and a chatbench binary
#
# Builds nothing: give it two directories of binaries, e.g. main's and a
# branch's (`git archive main | tar -x -C /tmp/main && (cd /tmp/main &&
# go build -o /tmp/ab/base/ ./cmd/chatd ./cmd/chatbench)`). On a shared
# machine the load moves by a factor of two within minutes, so the builds
# take turns, ROUNDS times (base, new, new, base, ...: the order is
# balanced), each round on a fresh chatd with a fresh embedded PostgreSQL
# (fsync on), and the report gives every round's figures and the medians:
#   - lone: a lone sender, 2 clients, 1 direct conversation, 50 msgs/s for
#     LONE_DURATION: PUBACK p50 and p99 (ms);
#   - sat: CLIENTS clients, CONVERSATIONS direct conversations, as fast as
#     PUBACKs allow for SAT_DURATION: acked msgs/s.
# Messages carry no attachments: what is measured is what the attachment
# feature costs sends that do not use it.
# A directory may also hold send.sql, a chat_send_batch that replaces
# chatd's own once chatd is ready (before chatbench makes its
# conversations), so two versions of the send function take turns in the
# same chatd: e.g. bench/patches/979424e-send-function.sql, the function
# before the message lifecycle (docs/benchmarks.md).
# Tunables: ROUNDS=4 LONE_DURATION=10s SAT_DURATION=15s CLIENTS=100
# CONVERSATIONS=500 BODY=100.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bench/ab.sh BASE_DIR NEW_DIR" >&2; exit 2; }
BASE=$1 NEW=$2
ROUNDS=${ROUNDS:-4}
LONE_DURATION=${LONE_DURATION:-10s}
SAT_DURATION=${SAT_DURATION:-15s}
CLIENTS=${CLIENTS:-100}
CONVERSATIONS=${CONVERSATIONS:-500}
BODY=${BODY:-100}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21983}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21980}
for b in "$BASE" "$NEW"; do
	[ -x "$b/chatd" ] && [ -x "$b/chatbench" ] || { echo "ab.sh: $b must hold chatd and chatbench" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "ab.sh: jq is required" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"
find_pgbin

WORK=$(mktemp -d /tmp/chatd-ab.XXXXXX)
chmod 755 "$WORK"
PID=""
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
limits_off

# one BIN_DIR NAME ROUND: a fresh chatd, the two measurements, a line of
# results in $WORK/results.
one() {
	local bin=$1 name=$2 round=$3 data="$WORK/data-$2-$3"
	local log="$WORK/chatd-$name-$round.log"
	CHAT_DATA_DIR="$data" CHAT_MQTT_ADDR="$MQTT_ADDR" CHAT_HTTP_ADDR="$HTTP_ADDR" CHAT_LOG_LEVEL=warn "$bin/chatd" >"$log" 2>&1 &
	PID=$!
	for _ in $(seq 1 120); do
		curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null 2>&1 && break
		sleep 0.5
	done
	if [ -f "$bin/send.sql" ]; then
		local pm="$data/pg/postmaster.pid"
		"$PSQL" "host=$(sed -n 5p "$pm") port=$(sed -n 4p "$pm") user=postgres dbname=chat sslmode=disable" \
			-q -v ON_ERROR_STOP=1 -f "$bin/send.sql" >/dev/null
	fi
	local common=(-broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" -data-dir "$data" -progress off -json -metrics off -body-bytes "$BODY")
	local lone sat load
	load=$(cut -d' ' -f1 /proc/loadavg)
	lone=$( ("$bin/chatbench" "${common[@]}" -clients 2 -conversations 1 -direct 1 -rate 50 -duration "$LONE_DURATION" || true) |
		jq -r '"\(.ackLatencyMs.p50) \(.ackLatencyMs.p99)"')
	sat=$( ("$bin/chatbench" "${common[@]}" -clients "$CLIENTS" -conversations "$CONVERSATIONS" -direct 1 -duration "$SAT_DURATION" -drain 60s || true) |
		jq -r '"\(.ackedPerSec|floor) \(.ok)"')
	if ! kill "$PID" 2>/dev/null; then
		echo "ab.sh: chatd ($name, round $round) died during the run:" >&2
		tail -30 "$log" >&2
	fi
	wait "$PID" 2>/dev/null || true
	PID=""
	rm -rf "$data"
	echo "$name $round $lone $sat $load" | tee -a "$WORK/results"
}

echo "build round lone_p50_ms lone_p99_ms sat_acked_per_s ok load_1m"
for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then
		one "$BASE" base "$r"
		one "$NEW" new "$r"
	else
		one "$NEW" new "$r"
		one "$BASE" base "$r"
	fi
done

median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo
echo "medians over $ROUNDS rounds: build lone_p50_ms lone_p99_ms sat_acked_per_s"
for b in base new; do
	echo "$b $(awk -v b=$b '$1 == b {print $3}' "$WORK/results" | median) $(awk -v b=$b '$1 == b {print $4}' "$WORK/results" | median) $(awk -v b=$b '$1 == b {print $5}' "$WORK/results" | median)"
done
