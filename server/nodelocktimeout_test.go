package server_test

import (
	"context"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
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
