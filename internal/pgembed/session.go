package pgembed

import "github.com/jackc/pgx/v5"

// EndIfClientVanishes sets on cfg (a copy the caller owns) what has the
// server end the session within about 25 s of its client's host
// vanishing without closing the socket (a crash of the host, a network
// cut), so that what the session holds, a lease or a claim, is free again
// for another node: keepalive probes (10 s idle, then 3 every 5 s) while
// the server has nothing to send, and tcp_user_timeout (25 s, the same
// bound) while it has (an answer or a NOTIFY in flight), which stops the
// probes and would have the server retransmit for as long as the kernel's
// tcp_retries2 allows (about 15 minutes on Linux). PostgreSQL applies them
// to TCP sessions only.
func EndIfClientVanishes(cfg *pgx.ConnConfig) {
	cfg.RuntimeParams["tcp_keepalives_idle"] = "10"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "5"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	cfg.RuntimeParams["tcp_user_timeout"] = "25000"
}
