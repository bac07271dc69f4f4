#!/usr/bin/env bash
# bench/sendcpu.sh — what chat_send_batch costs PostgreSQL's CPU per call,
# build against build (docs/benchmarks.md, "The send function's CPU").
#
#   bench/sendcpu.sh DIR [DIR ...]     # each holds a chatd and a chatbench binary
#
# For each build in turn (ROUNDS times): a fresh chatd on a fresh embedded
# PostgreSQL (fsync on), a short chatbench run to create direct
# conversations, then pgbench calling chat_send_batch with two 100-byte
# messages into two of them, one client, CALLS calls back to back after a
# warm-up, synchronous_commit off (the commit's flush is not the function's
# cost). The figure is the pgbench backend's own CPU time (utime + stime
# from /proc) divided by the calls: unlike wall time, it is not stretched
# by other processes taking the cores. A build from before the message
# lifecycle (chat_send_batch of four arrays) is recognised and called that
# way. Tunables: ROUNDS=3 CALLS=4000. PERF_DIR=DIR also records each
# measured pass with perf (perf record -g, 2 kHz) into
# DIR/<build>.<round>.data, for `perf report --children -i ...`: where the
# backend's time goes (executor start-up, the writes, ...).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/sendcpu.sh DIR [DIR ...]" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
CALLS=${CALLS:-4000}
MQTT_ADDR=127.0.0.1:${MQTT_PORT:-21973}
HTTP_ADDR=127.0.0.1:${HTTP_PORT:-21970}
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_init sendcpu
refuse_taken "$MQTT_ADDR" "$HTTP_ADDR"
limits_off

declare -A RESULTS
for round in $(seq 1 "$ROUNDS"); do
	for dir in "$@"; do
		name=$(basename "$dir")
		mkdir -p "$WORK/bin"
		cp "$dir/chatd" "$WORK/bin/chatd"
		rm -rf "${WORK:?}/run"
		start_chatd run >/dev/null
		"$dir/chatbench" -clients 20 -conversations 10 -direct 1 -rate 100 -duration 2s -progress off \
			-broker "$MQTT_ADDR" -http "http://$HTTP_ADDR" -data-dir "$CHATD_DIR/data" -json >/dev/null 2>&1 || true
		read -r C1 U1 < <("$PSQL" "$DBURL" -Atc "SELECT conversation_id, user_id FROM conversation_member ORDER BY conversation_id, user_id LIMIT 1" | tr '|' ' ')
		read -r C2 U2 < <("$PSQL" "$DBURL" -Atc "SELECT conversation_id, user_id FROM conversation_member ORDER BY conversation_id DESC, user_id LIMIT 1" | tr '|' ' ')
		[ -n "${C1:-}" ] || { echo "sendcpu: $name: chatbench created no conversations" >&2; exit 1; }
		args=$("$PSQL" "$DBURL" -Atc "SELECT pronargs FROM pg_proc WHERE proname = 'chat_send_batch' ORDER BY pronargs DESC LIMIT 1")
		common="ARRAY[$C1,$C2]::bigint[], ARRAY[$U1,$U2]::bigint[], ARRAY[gen_random_uuid(),gen_random_uuid()], ARRAY[repeat('x',100),repeat('y',100)]"
		if [ "$args" = 4 ]; then
			echo "SELECT * FROM chat_send_batch($common);" >"$WORK/send.sql"
		else
			echo "SELECT * FROM chat_send_batch(ARRAY['message','message'], $common, ARRAY[0,0]::bigint[], ARRAY[NULL,NULL]::bigint[], ARRAY[NULL,NULL]::bigint[], ARRAY[NULL,NULL]::text[], ARRAY[false,false], NULL, NULL);" >"$WORK/send.sql"
		fi
		backend_cpu_per_call "$WORK/send.sql" >/dev/null # warm-up
		us=$(PERF_OUT=${PERF_DIR:+$PERF_DIR/$name.$round.data} backend_cpu_per_call "$WORK/send.sql")
		stop_chatd
		RESULTS[$name]="${RESULTS[$name]:-} $us"
		printf 'round %d  %-12s %6s µs CPU per call of two messages   [load average %s]\n' "$round" "$name" "$us" "$(cut -d' ' -f1-3 /proc/loadavg)"
	done
done
echo
echo "medians over $ROUNDS rounds (µs of the backend's CPU per call of two messages):"
for dir in "$@"; do
	name=$(basename "$dir")
	printf '  %-12s %s   (%s)\n' "$name" "$(tr ' ' '\n' <<<"${RESULTS[$name]}" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')" "${RESULTS[$name]# }"
done
