# bench/lib.sh — what the bench/ scripts share. Source it, then call
# bench_init NAME.

# bench_init checks the tools, makes the work dir WORK (/tmp/chatd-NAME.*,
# removed on exit unless KEEP=1; chatd and plainbroker are stopped) and
# finds PostgreSQL's binaries (PGBIN, PGBENCH, PSQL).
bench_init() {
	local tool
	for tool in go jq curl; do
		command -v "$tool" >/dev/null || { echo "$1: $tool is required" >&2; exit 1; }
	done
	BENCH_APP=$1
	WORK=$(mktemp -d "/tmp/chatd-$1.XXXXXX")
	chmod 755 "$WORK" # PostgreSQL runs as an unprivileged account when we are root
	CHATD_PID=""
	PLAIN_PID=""
	trap bench_cleanup EXIT
	find_pgbin
}

bench_cleanup() {
	plain_stop
	stop_chatd
	if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}

# efficiency_workload sets issue 24's workload, which bench/efficiency.sh,
# bench/pgfloor.sh and bench/tail.sh (at one RATE) all measure: RATES,
# DURATION, CLIENTS, CONVERSATIONS, BODY and INFLIGHT from the
# environment or their defaults, and BENCH, chatbench's flags for it
# (direct conversations, every delivery checked).
efficiency_workload() {
	RATES=${RATES:-1000 2000}
	DURATION=${DURATION:-20s}
	CLIENTS=${CLIENTS:-200}
	CONVERSATIONS=${CONVERSATIONS:-1000}
	BODY=${BODY:-100}
	INFLIGHT=${INFLIGHT:-4}
	BENCH=(-clients "$CLIENTS" -conversations "$CONVERSATIONS" -direct 1 -body-bytes "$BODY" -inflight "$INFLIGHT" -drain 120s -progress off)
}

# BENCH_LIMITS are chatd's rate and connection limits that would cap a
# bench's load: limits_off sets them to 0 (unlimited) in the environment
# the next start_chatd passes on, limits_on gives them back their defaults.
BENCH_LIMITS=(CHAT_LIMIT_SEND_RATE CHAT_LIMIT_CONV_RATE CHAT_LIMIT_READ_RATE CHAT_LIMIT_API_RATE CHAT_LIMIT_CONNECT_RATE
	CHAT_LIMIT_CONNECT_USER_RATE CHAT_MAX_CONNECTIONS_PER_USER CHAT_CONNECT_BUDGET_RATE)
limits_off() {
	local v
	for v in "${BENCH_LIMITS[@]}"; do export "$v=0"; done
}
limits_on() { unset "${BENCH_LIMITS[@]}"; }

# step prints a heading with the load average: other work on the machine
# skews every figure, so the report shows it.
step() { printf '\n== %s   [load average %s]\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

# find_pgbin sets PGBIN to the newest PostgreSQL installation's bin dir.
find_pgbin() {
	PGBIN=$(dirname "$(command -v pg_config || echo /usr/lib/postgresql/bin/x)")
	for d in /usr/lib/postgresql/*/bin; do [ -x "$d/postgres" ] && PGBIN=$d; done
	PGBENCH=$(command -v pgbench || echo "$PGBIN/pgbench")
	PSQL=$(command -v psql || echo "$PGBIN/psql")
}

print_machine() {
	{
		echo "nproc: $(nproc)"
		echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
		echo "memory: $(free -h | awk '/^Mem:/ {print $2}')"
		echo "kernel: $(uname -r)"
		echo "open files: $(ulimit -n)"
		echo "go: $(go version | awk '{print $3}')"
		echo "postgresql: $("$PGBIN/postgres" --version 2>/dev/null || echo unknown)"
	} | tee "$WORK/machine.txt"
}

# refuse_taken exits when something already listens on one of the
# addresses: it would answer the readiness probe in chatd's place.
refuse_taken() {
	for addr in "$@"; do
		if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
			echo "bench: something already listens on $addr (set MQTT_PORT, HTTP_PORT, PLAIN_PORT)" >&2
			exit 1
		fi
	done
}

# start_chatd NAME starts $WORK/bin/chatd on a fresh embedded PostgreSQL in
# $WORK/NAME (or on CHAT_DATABASE_URL), with the CHAT_* settings of the
# caller's environment, and sets CHATD_PID, DBURL and PG_PID (the
# postmaster, when embedded).
start_chatd() {
	local dir=$WORK/$1
	mkdir -p "$dir"
	CHAT_DATA_DIR="$dir/data" CHAT_MQTT_ADDR="$MQTT_ADDR" CHAT_HTTP_ADDR="$HTTP_ADDR" CHAT_LOG_LEVEL=warn \
		"$WORK/bin/chatd" >"$dir/chatd.log" 2>&1 &
	CHATD_PID=$!
	for _ in $(seq 1 120); do
		curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null 2>&1 && break
		kill -0 "$CHATD_PID" 2>/dev/null || { cat "$dir/chatd.log" >&2; echo "bench: chatd exited" >&2; exit 1; }
		sleep 0.5
	done
	curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null || { cat "$dir/chatd.log" >&2; exit 1; }
	CHATD_DIR=$dir
	PG_PID=""
	if [ -n "${CHAT_DATABASE_URL:-}" ]; then
		DBURL=$CHAT_DATABASE_URL
		echo "PostgreSQL: CHAT_DATABASE_URL"
	else
		local pm="$dir/data/pg/postmaster.pid"
		DBURL="host=$(sed -n 5p "$pm") port=$(sed -n 4p "$pm") user=postgres dbname=chat sslmode=disable"
		PG_PID=$(head -1 "$pm")
		echo "PostgreSQL: chatd's embedded cluster, $DBURL, postmaster $PG_PID (fsync on)"
	fi
	echo "chatd pid $CHATD_PID on mqtt://$MQTT_ADDR, http://$HTTP_ADDR"
}

stop_chatd() {
	[ -n "${CHATD_PID:-}" ] || return 0
	kill "$CHATD_PID" 2>/dev/null || true
	wait "$CHATD_PID" 2>/dev/null || true
	CHATD_PID=""
}

# plain_restart starts a fresh plainbroker (extra flags: "$@") and sets
# PLAIN_PID. Each run gets a fresh one: a saturated run leaves mochi's
# inflight queues and retries behind for the next.
plain_restart() {
	plain_stop
	"$WORK/bin/plainbroker" -addr "$PLAIN_ADDR" "$@" >>"$WORK/plainbroker.log" 2>&1 &
	PLAIN_PID=$!
	for _ in $(seq 1 50); do
		(exec 3<>"/dev/tcp/${PLAIN_ADDR%:*}/${PLAIN_ADDR##*:}") 2>/dev/null && return
		sleep 0.1
	done
	echo "bench: plainbroker did not listen on $PLAIN_ADDR" >&2
	exit 1
}

plain_stop() {
	[ -n "${PLAIN_PID:-}" ] || return 0
	kill "$PLAIN_PID" 2>/dev/null || true
	wait "$PLAIN_PID" 2>/dev/null || true
	PLAIN_PID=""
}

# exec_p50 prints the median execution time, in ms, of the transactions in
# pgbench's per-transaction logs (-l) with that prefix. With -R, pgbench's
# own latency counts from the scheduled start, so a timer that fires late
# (on this VM by up to hundreds of ms, now and then) inflates it and its
# average; chatbench's PUBACK p50 counts from the publish. Fields: client,
# transaction, latency us, script, epoch s, us, schedule lag us.
exec_p50() { exec_pct "$1" 0.5; }

# exec_pct PREFIX Q prints the Q quantile (0 < Q <= 1) of the same.
exec_pct() {
	cat "$1".* | awk '{print ($3 - $7) / 1000}' | sort -n |
		awk -v q="$2" '{v[NR] = $1} END {i = int(NR * q + 0.999999); if (i < 1) i = 1; if (NR) printf "%.3f\n", v[i]; else print "nan"}'
}

# sendtx_alone runs, through pgbench at 50/s for 10 s, the transaction
# chatd makes for a lone sender (chat_send_batch with one message) in the
# newest conversation, and sets SENDTX_MS to its median execution time in
# ms and LONE_CONV, LONE_USER to the conversation and sender it used.
sendtx_alone() {
	read -r LONE_CONV LONE_USER < <("$PSQL" "$DBURL" -Atc "SELECT conversation_id, user_id FROM conversation_member ORDER BY conversation_id DESC, user_id LIMIT 1" | tr '|' ' ')
	printf "SELECT * FROM chat_send_batch(ARRAY['message'], ARRAY[%s]::bigint[], ARRAY[%s]::bigint[], ARRAY[gen_random_uuid()], ARRAY[repeat('x', %s)], ARRAY[0]::bigint[], ARRAY[NULL]::bigint[], ARRAY[NULL]::bigint[], ARRAY[NULL]::text[], ARRAY[false], NULL, NULL);\n" \
		"$LONE_CONV" "$LONE_USER" "$BODY" >"$WORK/sendtx.sql"
	# chatd wakes the relay apart from the send, hence the setting.
	PGOPTIONS="-c chat.defer_notify=on" "$PGBENCH" -n -M prepared -f "$WORK/sendtx.sql" -c 1 -R 50 -T 10 -l --log-prefix="$WORK/sendtx-log" "$DBURL" >"$WORK/sendtx.txt" 2>&1
	SENDTX_MS=$(exec_p50 "$WORK/sendtx-log")
}

# backend_cpu_per_call SQLFILE: runs SQLFILE through pgbench CALLS times
# on one connection (application name: bench_init's NAME; synchronous_commit off,
# the commit's flush is not the statement's cost) and prints the backend's
# own CPU (utime + stime) per call in µs. PERF_OUT=FILE also records the
# backend with perf.
backend_cpu_per_call() {
	local out=$WORK/pgbench.out pid="" p v best=0 perfpid=""
	local -A ticks=()
	PGOPTIONS="-c chat.defer_notify=on -c synchronous_commit=off" PGAPPNAME=$BENCH_APP \
		"$PGBENCH" -n -M prepared -f "$1" -c 1 -t "$CALLS" "$DBURL" >"$out" 2>&1 &
	local bp=$!
	# Every backend pgbench opens is sampled until pgbench ends (it may
	# open a short-lived one first, and the pass before's may still be
	# listed while it exits); the one that ran the calls has the most CPU.
	while kill -0 "$bp" 2>/dev/null; do
		for p in $("$PSQL" "$DBURL" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = '$BENCH_APP'"); do
			v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true)
			[ -n "$v" ] && ticks[$p]=$v
			if [ -n "${PERF_OUT:-}" ] && [ -z "$perfpid" ] && [ "${v:-0}" -gt 10 ]; then
				perf record -F 2000 -g -p "$p" -o "$PERF_OUT" >/dev/null 2>&1 &
				perfpid=$!
			fi
		done
		sleep 0.05
	done
	wait "$bp" || { cat "$out" >&2; return 1; }
	if [ -n "$perfpid" ]; then
		kill -INT "$perfpid" 2>/dev/null || true
		wait "$perfpid" 2>/dev/null || true
	fi
	grep -q "number of failed transactions: 0" "$out" || { cat "$out" >&2; return 1; }
	for p in "${!ticks[@]}"; do [ "${ticks[$p]}" -gt "$best" ] && best=${ticks[$p]}; done
	[ "$best" -gt 0 ] || { echo "$BENCH_APP: no CPU time read for pgbench's backend" >&2; return 1; }
	awk -v t="$best" -v hz="$(getconf CLK_TCK)" -v n="$CALLS" 'BEGIN {printf "%.0f", t / hz * 1e6 / n}'
}
