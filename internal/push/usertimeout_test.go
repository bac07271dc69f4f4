package push_test

import (
	"context"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
)

// The decider's session, which holds its lease, is bounded as the relay's
// is: a leader's host that vanishes while PostgreSQL has an answer
// unacknowledged on its socket makes the server retransmit for as long as
// tcp_retries2 allows (about 15 minutes on Linux) instead of probing;
// tcp_user_timeout, on the server's socket, ends that within 25 s.
func TestTheDeciderSessionBoundsDataTheServerCannotDeliver(t *testing.T) {
	t.Parallel()
	p, err := push.New(push.Config{Pool: pgtest.TCPPool(t)})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := push.Connect(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if got := pgtest.Show(t, conn, "tcp_user_timeout"); got != "25000" { // milliseconds
		t.Fatalf("the decider session's tcp_user_timeout on the server's socket: %s ms, want 25000", got)
	}
}
