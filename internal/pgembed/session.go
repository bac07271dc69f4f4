package pgembed

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

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

// Quiet is how long WaitForNotification waits before it asks its session
// to answer, and how long it gives it to.
const Quiet = 30 * time.Second

// Listening sets on cfg (a copy the caller owns) what a session that
// waits in WaitForNotification needs: a wait that ends quiet stops reading
// at a deadline, which keeps the session, rather than asking the server
// to cancel (a connection of its own each time) while no query runs.
func Listening(cfg *pgx.ConnConfig) {
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
}

// WaitForNotification waits on conn (configured by Listening) for a
// notification until ctx ends, and fails when conn does. A session to a
// database host that vanished (no reset ever comes) never fails by
// itself: the server's keepalives (EndIfClientVanishes) probe the other
// way, and this end's own take an hour. So a session quiet for check (0:
// Quiet) must answer a ping within as long, or the wait fails.
func WaitForNotification(ctx context.Context, conn *pgx.Conn, check time.Duration) (*pgconn.Notification, error) {
	check = cmp.Or(check, Quiet)
	for {
		waitCtx, cancel := context.WithTimeout(ctx, check)
		note, err := conn.WaitForNotification(waitCtx)
		cancel()
		if err == nil || ctx.Err() != nil || !pgconn.Timeout(err) {
			return note, err
		}
		pingCtx, cancel := context.WithTimeout(ctx, check)
		err = conn.Ping(pingCtx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("check the session after %v without a notification: %w", check, err)
		}
	}
}
