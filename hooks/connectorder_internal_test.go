package hooks

import (
	"context"
	"net"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/chatd/chatd/internal/testkit"
)

// A listener that never calls ConnectionEnded (mochi's own; chatd's call
// it for every connection) frees the connect turn mochi's clean-up took
// after SendTimeout, and with it the hook's record of the turn's end:
// nothing of the connection is kept for the life of the process.
func TestAConnectTurnNoListenerEndsIsForgottenWithItsTimeout(t *testing.T) {
	h := New(Config{NodeID: "a", SendTimeout: 50 * time.Millisecond})
	h.Attach(mqtt.New(nil))
	conn, peer := net.Pipe()
	t.Cleanup(func() { _ = conn.Close(); _ = peer.Close() })
	cl := h.server.NewClient(conn, "t", "unended", false)
	h.cleanUpInTurn(cl)
	testkit.WaitFor(t, 5*time.Second, "the client id's next connect turn", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		leave, ok := h.gate.enter(ctx, "unended")
		if ok {
			leave()
		}
		return ok
	})
	testkit.WaitFor(t, time.Second, "the turn's end forgotten", func() bool {
		_, kept := h.ending.Load(conn)
		return !kept
	})
}
