#!/usr/bin/env bash
# bench/pgfloor.sh — the least CPU a durable message can cost on this
# machine, beside what chatd and plain mochi spend, in one run
# (docs/benchmarks.md, "The floor under the CPU target").
#
#   bench/pgfloor.sh                  # about 7 minutes
#
# issue 24's CPU target asks chatd + PostgreSQL for at most 2.0× plain
# mochi's CPU per message at 1,000 and 2,000 msgs/s. chatd is mochi with
# hooks, so it spends at least what mochi does; PostgreSQL spends at least
# what the smallest durable write costs it. This measures that smallest
# write on chatd's own embedded cluster (the same settings, fsync on,
# synchronous_commit on), at the same rates, through pgbench (8 clients,
# prepared statements, the CPU of pgbench itself not counted):
#   - insert1: one INSERT of a 100-byte row a transaction (a commit and its
#     WAL flush per message), at RATE transactions a second;
#   - insert2: two such rows a transaction at RATE/2 (chatd's group
#     commit makes 1.5 messages a commit at 1,000/s), per row;
#   - insert10: ten rows a transaction at RATE/10, per row: what a batch
#     of ten would save, a batch that at RATE messages a second keeps its
#     first message waiting 9/RATE s for the other nine;
#   - select1: SELECT 1 at RATE (a round trip and no write);
#   - seed: the seed's send transaction (`sendbench -print-script`: lock
#     the conversation, look for the key, insert the message, move
#     last_seq and the sender's watermark, an outbox row) at RATE, into
#     the conversations chatbench created, per message;
# each as PostgreSQL's CPU (postmaster and every backend, from /proc, its
# CPU while chatd sat idle subtracted) per message. Then chatd itself and
# plain mochi at the same rates, as bench/efficiency.sh runs them. The
# table's floor ratios are (mochi + X) / mochi: a chat server that spends
# no CPU beyond mochi's and asks PostgreSQL for nothing beyond X a
# message (one durable row; a row in batches of ten; the seed's send).
# Tunables: RATES="1000 2000" DURATION=20s CLIENTS=200 CONVERSATIONS=1000
# BODY=100 INFLIGHT=4 (bench/lib.sh, efficiency_workload) KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21893}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21890}
PLAIN_ADDR=127.0.0.1:${PLAIN_PORT:-21894}

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init pgfloor
efficiency_workload
SECS=${DURATION%s}

step "build"
go build -o "$WORK/bin/" ./cmd/chatd ./cmd/chatbench ./cmd/plainbroker ./cmd/sendbench

step "machine"
print_machine
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR" "$PLAIN_ADDR"

# pg_ticks prints the CPU clock ticks the cluster has spent: the
# postmaster's own and those of its children that ended (cutime, cstime),
# and every live child's.
pg_ticks() {
	local t=0 p
	t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$PG_PID/stat")
	for p in $(pgrep -P "$PG_PID"); do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
HZ=$(getconf CLK_TCK)

step "start chatd (rate limits off)"
limits_off
start_chatd floor
[ -n "$PG_PID" ] || { echo "pgfloor: needs chatd's embedded PostgreSQL (unset CHAT_DATABASE_URL)" >&2; exit 1; }
"$PSQL" "$DBURL" -qc "CREATE TABLE floor_msg (id bigserial PRIMARY KEY, conversation_id bigint NOT NULL, body text NOT NULL)"
{
	echo "\\set c random(1, $CONVERSATIONS)"
	printf "INSERT INTO floor_msg (conversation_id, body) VALUES (:c, repeat('x', %s));\n" "$BODY"
} >"$WORK/insert1.sql"
{
	echo "\\set c random(1, $CONVERSATIONS)"
	echo "BEGIN;"
	printf "INSERT INTO floor_msg (conversation_id, body) VALUES (:c, repeat('x', %s));\n" "$BODY" "$BODY"
	echo "COMMIT;"
} >"$WORK/insert2.sql"
{
	echo "\\set c random(1, $CONVERSATIONS)"
	echo "BEGIN;"
	for _ in $(seq 1 10); do printf "INSERT INTO floor_msg (conversation_id, body) VALUES (:c, repeat('x', %s));\n" "$BODY"; done
	echo "COMMIT;"
} >"$WORK/insert10.sql"
"$WORK/bin/sendbench" -print-script >"$WORK/seed.sql"
echo "SELECT 1;" >"$WORK/select1.sql"

step "PostgreSQL idle beside the idle chatd, 10 s"
a=$(pg_ticks)
sleep 10
b=$(pg_ticks)
IDLE_US_PER_S=$(awk -v d=$((b - a)) -v hz="$HZ" 'BEGIN {printf "%.0f", d / hz * 1e6 / 10}')
echo "PostgreSQL idle: $IDLE_US_PER_S µs of CPU a second"

# pg_run NAME FILE RATE ROWS: pgbench at RATE transactions a second for
# DURATION; prints PostgreSQL's CPU per row in µs (idle subtracted). Its
# transactions' execution times are in $WORK/NAME-log.*.
pg_run() {
	local a b tx
	a=$(pg_ticks)
	# shellcheck disable=SC2086 # PGBENCH_ARGS: several words
	"$PGBENCH" -n -M prepared ${PGBENCH_ARGS:-} -f "$2" -c 8 -j 2 -R "$3" -T "$SECS" -l --log-prefix="$WORK/$1-log" "$DBURL" >"$WORK/$1.txt" 2>&1
	sleep 1 # the backends end and are reaped: their CPU moves to cutime
	b=$(pg_ticks)
	tx=$(awk '/number of transactions actually processed/ {print $NF}' "$WORK/$1.txt" | cut -d/ -f1)
	awk -v d=$((b - a)) -v hz="$HZ" -v idle="$IDLE_US_PER_S" -v s="$((SECS + 1))" -v n="$tx" -v rows="$4" \
		'BEGIN {printf "%.1f", (d / hz * 1e6 - idle * s) / (n * rows)}'
}

declare -A IN1 IN2 SEL CHATD CHATPG PLAIN
declare -A IN10 SEED
for R in $RATES; do
	step "chatd at $R msgs/s, $DURATION"
	"$WORK/bin/chatbench" "${BENCH[@]}" -rate "$R" -duration "$DURATION" -broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" \
		-data-dir "$CHATD_DIR/data" -chatd-pid "$CHATD_PID" -pg-pid "$PG_PID" -json >"$WORK/chatd-$R.json" || true
	CHATD[$R]=$(jq '.cpuPerMessageUs.server' "$WORK/chatd-$R.json")
	CHATPG[$R]=$(jq '.cpuPerMessageUs.postgres // 0' "$WORK/chatd-$R.json")
	echo "chatd ${CHATD[$R]} µs, its PostgreSQL ${CHATPG[$R]} µs a message; lost $(jq .lost "$WORK/chatd-$R.json")"

	step "PostgreSQL alone at $R msgs/s (chatd idle), $DURATION each"
	SEL[$R]=$(pg_run "select1-$R" "$WORK/select1.sql" "$R" 1)
	IN1[$R]=$(pg_run "insert1-$R" "$WORK/insert1.sql" "$R" 1)
	IN2[$R]=$(pg_run "insert2-$R" "$WORK/insert2.sql" $((R / 2)) 2)
	IN10[$R]=$(pg_run "insert10-$R" "$WORK/insert10.sql" $((R / 10)) 10)
	read -r CMIN CMAX < <("$PSQL" "$DBURL" -Atc "SELECT min(id), max(id) FROM conversation" | tr '|' ' ')
	SEED[$R]=$(PGBENCH_ARGS="-D cmin=$CMIN -D cmax=$CMAX" pg_run "seed-$R" "$WORK/seed.sql" "$R" 1)
	echo "SELECT 1 ${SEL[$R]} µs; a row a commit ${IN1[$R]} µs; two rows a commit ${IN2[$R]} µs a row; ten ${IN10[$R]} µs a row; the seed's send transaction ${SEED[$R]} µs"
done
stop_chatd

for R in $RATES; do
	step "plain mochi at $R msgs/s, $DURATION"
	plain_restart
	"$WORK/bin/chatbench" "${BENCH[@]}" -plain -rate "$R" -duration "$DURATION" -broker "$PLAIN_ADDR" -chatd-pid "$PLAIN_PID" -json >"$WORK/plain-$R.json" || true
	PLAIN[$R]=$(jq '.cpuPerMessageUs.server' "$WORK/plain-$R.json")
	echo "plain mochi ${PLAIN[$R]} µs a message"
done
plain_stop

echo
echo "latency p50 / p99 (ms): a transaction's execution in pgbench (its schedule lag left out); chatbench's publish to PUBACK"
{
	echo "rate PG:1-row-a-commit PG:seed-send chatd:PUBACK plain-mochi:PUBACK target:PUBACK-p99"
	for R in $RATES; do
		echo "$R/s $(exec_pct "$WORK/insert1-$R-log" 0.5)/$(exec_pct "$WORK/insert1-$R-log" 0.99)" \
			"$(exec_pct "$WORK/seed-$R-log" 0.5)/$(exec_pct "$WORK/seed-$R-log" 0.99)" \
			"$(jq -r '"\(.ackLatencyMs.p50)/\(.ackLatencyMs.p99)"' "$WORK/chatd-$R.json")" \
			"$(jq -r '"\(.ackLatencyMs.p50)/\(.ackLatencyMs.p99)"' "$WORK/plain-$R.json")" \
			"$([ "$R" -le 1000 ] && echo 4 || echo 5)"
	done
} | column -t

echo
echo "CPU per message (µs), direct, $CLIENTS clients, $CONVERSATIONS conversations, $BODY-byte bodies, $DURATION at each rate; PostgreSQL idle $IDLE_US_PER_S µs/s subtracted from its pgbench runs"
{
	echo "rate mochi PG:SELECT-1 PG:1-row-a-commit PG:2-rows,per-row PG:10-rows,per-row PG:seed-send chatd chatd's-PG chatd+PG/mochi (mochi+1-row)/mochi (mochi+10-rows)/mochi (mochi+seed)/mochi target"
	for R in $RATES; do
		awk -v r="$R" -v m="${PLAIN[$R]}" -v s="${SEL[$R]}" -v i1="${IN1[$R]}" -v i2="${IN2[$R]}" -v i10="${IN10[$R]}" -v sd="${SEED[$R]}" \
			-v c="${CHATD[$R]}" -v p="${CHATPG[$R]}" \
			'BEGIN {printf "%s/s %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.2fx %.2fx %.2fx %.2fx <=2.0x\n", r, m, s, i1, i2, i10, sd, c, p, (c + p) / m, (m + i1) / m, (m + i10) / m, (m + sd) / m}'
	done
} | column -t
