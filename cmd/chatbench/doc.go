// Command chatbench is a load generator for chatd that proves what it
// measures: it creates its own users and conversations through the HTTP
// API, connects one MQTT client per user, publishes QoS 1 messages and
// checks that every acknowledged message reached every member exactly in
// seq order, and (with -verify-db) that each is stored once with gapless
// seqs. It reports throughput (acked messages/s, deliveries/s), latency
// percentiles (publish->PUBACK, publish->delivery), chatd's CPU and RSS
// (-chatd-pid), and prints a table or JSON (-json). -ack-log writes every
// acknowledged publish's send time and PUBACK latency to a file, to line
// the slow ones up with the server's logs (bench/tail.sh does).
//
// Modes: steady (a target -rate, or as fast as -inflight allows), ramp
// (raise the rate until p99 PUBACK latency or errors degrade; reports the
// maximum sustainable rate), storm (every client drops and reconnects at
// once mid-run; reports the time until all are back and caught up) and
// receipts (every delivery answered by a read receipt). -plain runs the same
// workload against a plain MQTT broker (cmd/plainbroker) without chat
// semantics, which measures the MQTT broker's own ceiling. -edits and
// -reactions make those fractions of the publishes edits and reactions
// (entries of the stream like messages, tracked and verified the same way;
// the report's ackedByKind counts each kind).
//
//	export CHAT_LIMIT_SEND_RATE=0 CHAT_LIMIT_CONV_RATE=0 CHAT_LIMIT_READ_RATE=0 \
//	       CHAT_LIMIT_API_RATE=0 CHAT_LIMIT_CONNECT_RATE=0 \
//	       CHAT_LIMIT_CONNECT_USER_RATE=0 CHAT_MAX_CONNECTIONS_PER_USER=0 \
//	       CHAT_CONNECT_BUDGET_RATE=0 CHAT_MAX_PENDING_CONNECTS_PER_IP=0 \
//	       CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP=0 \
//	       # chatd's per-user/IP/node limits off
//	go run ./cmd/chatd &
//	go run ./cmd/chatbench -clients 200 -conversations 1000 -duration 20s
//	go run ./cmd/plainbroker -addr 127.0.0.1:1884 &
//	go run ./cmd/chatbench -plain -broker 127.0.0.1:1884
//
// The MQTT clients are a lean implementation on mochi's packet codec (so
// both MQTT 5 and 3.1.1 can be driven); tokens are minted from -jwt-secret
// or the data dir's jwt.secret. Exit status: 0 when every check passed, 1
// when one failed (or the run could not start), 2 for bad flags.
package main
