package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// The session claiming a node id is bounded as the relay's and the push
// decider's lease sessions are: a node whose host vanishes while
// PostgreSQL has an answer unacknowledged on its socket (the claim's own,
// at start or when the node claims again after losing its session) makes
// the server retransmit for as long as tcp_retries2 allows (about 15
// minutes on Linux) instead of probing, and the id stays claimed that
// long, refusing the node's replacement; tcp_user_timeout, on the server's
// socket, ends that within 25 s.
func TestTheNodeIDSessionBoundsDataTheServerCannotDeliver(t *testing.T) {
	t.Parallel()
	pool := pgtest.TCPPool(t)
	conn, got, err := server.ClaimNodeIDSession(context.Background(), pool.Config().ConnConfig, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if !got {
		t.Fatal("node-a's id was not claimed on a fresh database")
	}
	for setting, want := range map[string]string{"tcp_user_timeout": "25000", "tcp_keepalives_idle": "10"} {
		if got := pgtest.Show(t, conn, setting); got != want {
			t.Errorf("the node id session's %s on the server's socket: %s, want %s", setting, got, want)
		}
	}
}

// A node whose database host vanishes (no reset ever comes) learns that
// it lost the session holding its id's claim, whose server end
// PostgreSQL ends within 25 s (above), and claims the id again once it
// can: it does not go on unaware while a replacement may take the id.
func TestANodeWhoseDatabaseVanishedClaimsItsIDAgain(t *testing.T) {
	t.Parallel()
	db := pgtest.NewVanishing(t)
	var logs logtest.Buffer
	release, err := server.KeepNodeID(context.Background(), db.Config, "node-a", slog.New(slog.NewTextHandler(&logs, nil)), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	db.Vanish(t)
	testkit.WaitFor(t, 10*time.Second, "the node to give its silent session up", func() bool {
		return strings.Contains(logs.String(), "lost the database session holding the node id's lock")
	})
	db.Return(t)
	// What PostgreSQL's keepalives do to the server's end of a session
	// whose client vanished, if the proxy's end outlived it.
	pgtest.QueryOne[int64](t, db.Direct, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted`)
	testkit.WaitFor(t, 10*time.Second, "the node to claim its id again", func() bool {
		return strings.Contains(logs.String(), "claimed the node id again")
	})
}
