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
#      pgbench against that same PostgreSQL; then one bare commit (pgbench,
#      one client, a transaction that only commits);
#   4. a single sender on the idle chatd: PUBACK p50 against the bare commit,
#      and its transaction alone (pgbench calling chat_send_batch as chatd
#      does), which splits the difference into PostgreSQL's part and chatd's;
#      and the seed's send transaction alone at the same rate (the reference);
#   5. per workload (WORKLOADS: mixed = half direct, half groups of 2-50;
#      direct = one-to-one only), chatbench against chatd: CLIENTS clients,
#      CONVERSATIONS conversations, QoS 1, BODY-byte bodies, as fast as
#      PUBACKs allow for DURATION, every delivery verified, then verified in
#      the database; then a run at half the maximum rate it measured
#      (SUSTAINED_RATE overrides) for the latencies;
#   6. chatd stopped, plainbroker (mochi, allow-all, no chat hooks) and
#      chatbench -plain with the same workloads: the broker's ceiling, its
#      latencies at chatd's half-maximum rate, and a lone sender on it (the
#      MQTT hop alone);
#   7. the ratios.
# Tunables (environment): DURATION=20s PG_DURATION=10s CLIENTS=200
# CONVERSATIONS=1000 BODY=100 INFLIGHT=4 PGBENCH_CLIENTS=8
# WORKLOADS="mixed direct" SUSTAINED_RATE=(half the measured maximum)
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
WORKLOADS=${WORKLOADS:-mixed direct}
DRAIN=${DRAIN:-180s}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-31883}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-28080}
PLAIN_ADDR=127.0.0.1:${PLAIN_PORT:-31884}

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init bench

step "build"
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench ./cmd/plainbroker ./cmd/sendbench

step "machine"
print_machine

step "start chatd (rate limits off)"
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR" "$PLAIN_ADDR"
limits_off
start_chatd chatd

step "the database's ceiling: pgbench, seed send transaction, $PGBENCH_CLIENTS clients, $PG_DURATION"
# The seed's schema has no trigger on outbox. chatd's (the relay's NOTIFY)
# would make every pgbench commit queue on PostgreSQL's notify lock through
# the previous one's WAL flush (migration 0006) and read the ceiling about
# 20% low; chatd's own sends do not pay it. So pgbench runs the seed's
# transaction as the seed has it: user triggers on outbox off meanwhile
# (chatd is idle; its relay polls).
"$WORK/bin/sendbench" -database-url "$DBURL" -senders "$PGBENCH_CLIENTS" -duration "$PG_DURATION" -pgbench -outbox-triggers=false | tee "$WORK/sendbench.txt"
PGBENCH_TPS=$(awk '/^pgbench +[0-9]+ clients:/ {print $4}' "$WORK/sendbench.txt")

# workload_args prints chatbench's layout flags for a workload: mixed (half
# direct, half groups of 2-50: the default) or direct (one-to-one only).
workload_args() {
	case "$1" in
	mixed) echo "-direct 0.5" ;;
	direct) echo "-direct 1" ;;
	*) echo "run.sh: unknown workload $1" >&2; exit 1 ;;
	esac
}

step "one bare commit: pgbench, 1 client, one-row INSERT transactions (the smallest commit that flushes WAL), 5s back to back, then 10s at 50/s like the lone sender below"
# A transaction must write WAL for its commit to wait for the flush:
# SELECT txid_current() alone commits without one.
printf 'CREATE TABLE IF NOT EXISTS bench_bare_commit (x int);\n' >"$WORK/commit-setup.sql"
printf 'INSERT INTO bench_bare_commit VALUES (1);\n' >"$WORK/commit.sql"
printf 'DROP TABLE bench_bare_commit;\n' >"$WORK/commit-teardown.sql"
"$PGBENCH" -n -f "$WORK/commit-setup.sql" -c 1 -t 1 "$DBURL" >/dev/null
"$PGBENCH" -n -M prepared -f "$WORK/commit.sql" -c 1 -T 5 "$DBURL" 2>&1 | tee "$WORK/commit-b2b.txt" | grep -E "latency average|tps ="
# At 50/s both processes sleep between commits, as chatd does for a lone
# sender: the wake-ups are part of what a lone send costs.
"$PGBENCH" -n -M prepared -f "$WORK/commit.sql" -c 1 -R 50 -T 10 -l --log-prefix="$WORK/commit-log" "$DBURL" 2>&1 | tee "$WORK/commit.txt" | grep -E "latency average|tps ="
"$PGBENCH" -n -f "$WORK/commit-teardown.sql" -c 1 -t 1 "$DBURL" >/dev/null
COMMIT_MS=$(exec_p50 "$WORK/commit-log")
echo "p50 $COMMIT_MS ms (execution: pgbench's latency less its schedule lag)"

BENCH=(-clients "$CLIENTS" -conversations "$CONVERSATIONS" -body-bytes "$BODY" -inflight "$INFLIGHT" -drain "$DRAIN" -progress off)
J_SAT='"acked \(.acked) msgs in \(.sendSeconds|floor)s: \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s; lost \(.lost), gaps \(.gaps), duplicates \(.duplicates), resent after 0x80 \(.retried); PUBACK p50/p99 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99) ms; delivery p50/p99 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99) ms; drained \(.drained) after \(.drainSeconds|floor)s; db gapless \(.database.gapless); ok \(.ok)\nmachine busy \(.machine.busyPercent|floor)% (chatbench \(.machine.chatbenchPercent|floor)% of a core), chatd CPU \(.server.cpuPercent|floor)% of a core, RSS max \(.server.rssMaxMiB|floor) MiB; chatd metrics: send tx avg \(.serverMetrics.sendAvgMs) ms, delivery avg \(.serverMetrics.deliveryAvgMs) ms, pool acquire wait \(.serverMetrics.poolAcquireWaitSecs) s, queue overflows \(.serverMetrics.queueOverflows), replayed \(.serverMetrics.replayed)"'
J_LAT='"acked \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s; PUBACK p50/p99/p99.9 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99)/\(.ackLatencyMs.p999) ms; delivery p50/p99/p99.9 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99)/\(.deliveryLatencyMs.p999) ms; lost \(.lost); ok \(.ok)\nmachine busy \(.machine.busyPercent|floor)%, chatd CPU \(.server.cpuPercent|floor)% of a core; chatd metrics: send tx avg \(.serverMetrics.sendAvgMs) ms, delivery avg \(.serverMetrics.deliveryAvgMs) ms, pool acquire wait \(.serverMetrics.poolAcquireWaitSecs) s, queue overflows \(.serverMetrics.queueOverflows)"'

step "a single sender on an idle server: chatbench, 2 clients, 1 direct conversation, 50 msgs/s, 10s"
"$WORK/bin/chatbench" -clients 2 -conversations 1 -direct 1 -body-bytes "$BODY" -rate 50 -duration 10s -progress off \
	-broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" -data-dir "$CHATD_DIR/data" -chatd-pid "$CHATD_PID" -json >"$WORK/lone.json" || true
jq -r "$J_LAT" "$WORK/lone.json"
LONE_P50=$(jq '.ackLatencyMs.p50' "$WORK/lone.json")

step "the lone sender's transaction alone: pgbench, 1 client, chat_send_batch with one message (the call chatd makes), 10s at 50/s"
# Splits the lone sender's latency into PostgreSQL's part (this) and chatd's
# (the rest).
sendtx_alone
grep -E "latency average|tps =" "$WORK/sendtx.txt"
echo "p50 $SENDTX_MS ms (execution)"

step "the seed's send transaction alone: pgbench, 1 client, the reference's statements (one round trip each) on the same conversation, 10s at 50/s"
# The issue's reference for what one send costs PostgreSQL; set beside the
# bare commit it shows what the reference itself adds at this rate.
"$WORK/bin/sendbench" -print-script >"$WORK/seed.sql"
sed -e "1,2d" -e "s/:c\b/$LONE_CONV/g" -e "s/:u\b/$LONE_USER/g" "$WORK/seed.sql" >"$WORK/seed-lone.sql"
PGOPTIONS="-c chat.defer_notify=on" "$PGBENCH" -n -M prepared -f "$WORK/seed-lone.sql" -c 1 -R 50 -T 10 -l --log-prefix="$WORK/seed-log" "$DBURL" 2>&1 | tee "$WORK/seed-lone.txt" | grep -E "latency average|tps ="
SEED_MS=$(exec_p50 "$WORK/seed-log")
echo "p50 $SEED_MS ms (execution)"

for WL in $WORKLOADS; do
	WARGS=$(workload_args "$WL")
	step "[$WL] chatbench against chatd: as fast as PUBACKs allow, $DURATION"
	# shellcheck disable=SC2086
	"$WORK/bin/chatbench" "${BENCH[@]}" $WARGS -duration "$DURATION" -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
		-data-dir "$CHATD_DIR/data" -chatd-pid "$CHATD_PID" -verify-db "$DBURL" -json >"$WORK/chatd-$WL.json" || true
	jq -r "$J_SAT" "$WORK/chatd-$WL.json"

	RATE=${SUSTAINED_RATE:-$(jq '(.ackedPerSec / 2) | floor' "$WORK/chatd-$WL.json")}
	echo "$RATE" >"$WORK/half-$WL.rate"
	step "[$WL] chatbench against chatd: half the maximum rate, $RATE msgs/s, 10s"
	# shellcheck disable=SC2086
	"$WORK/bin/chatbench" "${BENCH[@]}" $WARGS -rate "$RATE" -duration 10s -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
		-data-dir "$CHATD_DIR/data" -chatd-pid "$CHATD_PID" -json >"$WORK/chatd-$WL-half.json" || true
	jq -r "$J_LAT" "$WORK/chatd-$WL-half.json"
done

step "stop chatd"
stop_chatd

step "the broker's ceiling: plainbroker + chatbench -plain, $DURATION, a fresh broker for each run"
for WL in $WORKLOADS; do
	WARGS=$(workload_args "$WL")
	step "[$WL] plain mochi: chatbench -plain, $DURATION"
	plain_restart
	# shellcheck disable=SC2086
	"$WORK/bin/chatbench" "${BENCH[@]}" $WARGS -plain -duration "$DURATION" -broker "$PLAIN_ADDR" -chatd-pid "$PLAIN_PID" -json >"$WORK/plain-$WL.json" || true
	jq -r '"acked \(.ackedPerSec|floor) msgs/s, \(.deliveriesPerSec|floor) deliveries/s; lost \(.lost); PUBACK p50/p99 \(.ackLatencyMs.p50)/\(.ackLatencyMs.p99) ms; delivery p50/p99 \(.deliveryLatencyMs.p50)/\(.deliveryLatencyMs.p99) ms; ok \(.ok)\nmachine busy \(.machine.busyPercent|floor)% (chatbench \(.machine.chatbenchPercent|floor)% of a core), broker CPU \(.server.cpuPercent|floor)% of a core, RSS max \(.server.rssMaxMiB|floor) MiB"' "$WORK/plain-$WL.json"

	# The same rate chatd's latencies were taken at: what the broker and
	# chatbench alone give on this machine at that load.
	RATE=$(cat "$WORK/half-$WL.rate")
	step "[$WL] plain mochi at chatd's half-maximum rate, $RATE msgs/s, 10s"
	plain_restart
	# shellcheck disable=SC2086
	"$WORK/bin/chatbench" "${BENCH[@]}" $WARGS -plain -rate "$RATE" -duration 10s -broker "$PLAIN_ADDR" -chatd-pid "$PLAIN_PID" -json >"$WORK/plain-$WL-half.json" || true
	jq -r "$J_LAT" "$WORK/plain-$WL-half.json"
done

step "a single sender on plain mochi: chatbench -plain, 2 clients, 1 direct conversation, 50 msgs/s, 10s (the MQTT hop alone)"
plain_restart
"$WORK/bin/chatbench" -clients 2 -conversations 1 -direct 1 -body-bytes "$BODY" -rate 50 -duration 10s -progress off -plain \
	-broker "$PLAIN_ADDR" -chatd-pid "$PLAIN_PID" -json >"$WORK/plain-lone.json" || true
jq -r "$J_LAT" "$WORK/plain-lone.json"
PLAIN_LONE_P50=$(jq '.ackLatencyMs.p50' "$WORK/plain-lone.json")

step "ratios"
{
	printf "pgbench (seed send transaction, %s clients)   %8.0f tps\n" "$PGBENCH_CLIENTS" "$PGBENCH_TPS"
	printf "one bare commit, back to back (pgbench)        %8.3f ms\n" "$(awk '/latency average/ {print $4}' "$WORK/commit-b2b.txt")"
	printf "one bare commit at 50/s (pgbench -R 50), p50   %8.3f ms\n" "$COMMIT_MS"
	printf "lone sender's transaction alone at 50/s, p50   %8.3f ms   (%+.3f ms over a bare commit at 50/s)\n" "$SENDTX_MS" "$(awk -v a="$SENDTX_MS" -v b="$COMMIT_MS" 'BEGIN {print a - b}')"
	printf "seed's send transaction alone at 50/s, p50     %8.3f ms   (%+.3f ms over a bare commit at 50/s)\n" "$SEED_MS" "$(awk -v a="$SEED_MS" -v b="$COMMIT_MS" 'BEGIN {print a - b}')"
	printf "plain mochi, lone sender PUBACK p50 (50/s)     %8.3f ms   (the MQTT hop without chat hooks)\n" "$PLAIN_LONE_P50"
	printf "lone sender, PUBACK p50 (50 msgs/s)            %8.3f ms   (%+.3f ms over a bare commit at 50/s)\n" "$LONE_P50" "$(awk -v a="$LONE_P50" -v b="$COMMIT_MS" 'BEGIN {print a - b}')"
	for WL in $WORKLOADS; do
		jq -rn --slurpfile c "$WORK/chatd-$WL.json" --slurpfile h "$WORK/chatd-$WL-half.json" --slurpfile p "$WORK/plain-$WL.json" \
			--slurpfile ph "$WORK/plain-$WL-half.json" --arg wl "$WL" --argjson pt "$PGBENCH_TPS" '
			($c[0]) as $c | ($h[0]) as $h | ($p[0]) as $p | ($ph[0]) as $ph |
			"[\($wl)] chatd acked \($c.ackedPerSec|floor) msgs/s, \($c.deliveriesPerSec|floor) deliveries/s; plain mochi \($p.ackedPerSec|floor) msgs/s, \($p.deliveriesPerSec|floor) deliveries/s",
			"[\($wl)] chatd acked / pgbench tps           \(($c.ackedPerSec / $pt * 100 | floor) / 100)",
			"[\($wl)] chatd / plain mochi, acked msgs/s   \(($c.ackedPerSec / $p.ackedPerSec * 100 | floor) / 100)",
			"[\($wl)] chatd / plain mochi, deliveries/s   \(($c.deliveriesPerSec / $p.deliveriesPerSec * 100 | floor) / 100)",
			"[\($wl)] at half the maximum (\($h.ackedPerSec|floor) msgs/s): PUBACK p99 \($h.ackLatencyMs.p99) ms, delivery p99 \($h.deliveryLatencyMs.p99) ms; machine busy \($h.machine.busyPercent|floor)%",
			"[\($wl)] plain mochi at that rate (\($ph.ackedPerSec|floor) msgs/s): PUBACK p99 \($ph.ackLatencyMs.p99) ms, delivery p99 \($ph.deliveryLatencyMs.p99) ms; machine busy \($ph.machine.busyPercent|floor)%"'
	done
} | tee "$WORK/ratios.txt"
echo
echo "reports: $WORK/*.json (kept with KEEP=1)"
