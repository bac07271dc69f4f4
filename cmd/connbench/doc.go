// Command connbench measures what many mostly idle persistent sessions
// cost a server, the way phones and IoT devices use chatd: N MQTT v5
// persistent sessions connect at a fixed rate from several loopback source
// addresses, all subscribe, each gets one message, all disconnect (their
// sessions stay), each is owed one more message while offline, and all
// resume. After each step it forces a garbage collection in the server
// (pprof heap?gc=1) and reads its live heap, stacks, goroutines and RSS
// from /metrics and /proc, and PostgreSQL's PSS with -pg-pid, so the
// report gives the memory per online connection and per offline session
// as differences to the step before any connection. It checks that every
// message arrived (nothing lost) and that each step finished within its
// time.
//
// Against chatd (its HTTP API creates one direct conversation per pair of
// users; CHAT_PPROF_ADDR serves pprof):
//
//	connbench -clients 20000 -sources 127.0.0.2-127.0.0.9 -broker 127.0.0.1:1883 \
//	    -http http://127.0.0.1:8080 -data-dir ./data -pprof http://127.0.0.1:6060 \
//	    -server-pid $(pgrep chatd) -pg-pid $(head -1 data/pg/postmaster.pid)
//
// Against plain mochi (cmd/plainbroker -metrics): pairs share a topic
// bench/pair/{n}; the offline message comes from an extra publisher.
//
//	connbench -plain -clients 20000 -broker 127.0.0.1:1884 \
//	    -metrics http://127.0.0.1:9884/metrics -pprof http://127.0.0.1:9884 -server-pid $(pgrep plainbroker)
//
// bench/efficiency.sh runs both in one go. Each process here may hold at
// most its open-files limit of connections.
package main
