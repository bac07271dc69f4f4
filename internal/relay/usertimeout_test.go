package relay_test

import (
	"context"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

// A leader's host that vanishes while PostgreSQL has data queued for its
// session (other nodes' NOTIFYs) gets no keepalive probes: the server
// retransmits instead, for as long as tcp_retries2 allows (about 15
// minutes on Linux), and holds the lease that long. The session bounds
// that too: tcp_user_timeout, on the server's socket.
func TestTheRelaySessionBoundsDataTheServerCannotDeliver(t *testing.T) {
	conn, err := relay.Connect(context.Background(), newRelay(t, pgtest.TCPPool(t), testConfig(t, testkit.FreePort(t), nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if got := pgtest.Show(t, conn, "tcp_user_timeout"); got != "25000" { // milliseconds
		t.Fatalf("the relay session's tcp_user_timeout on the server's socket: %s ms, want 25000", got)
	}
}
