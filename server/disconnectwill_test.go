package server_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// DISCONNECT 0x04 (disconnect with Will message) is a normal end of a
// connection that has no Will, as every chat connection has none (a
// CONNECT with a Will is refused): no warning in the operator's log, and
// the persistent session lives on as after any DISCONNECT.
func TestADisconnectWithWillMessageIsAnOrdinaryDisconnect(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	srv := testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), nil), slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, _ := dialAs(t, srv.MQTTAddr(), 1, "disconnect-0x04", 5, false)
	if _, err := c.Subscribe(testnode.EventsTopic(1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ReasonCode: packets.CodeDisconnectWillMessage.Code}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the server to close the connection after DISCONNECT 0x04", c.Closed)
	testkit.WaitFor(t, 5*time.Second, "the session to be detached", func() bool { return !srv.Hub.Ready("disconnect-0x04") })
	if _, ack := dialAs(t, srv.MQTTAddr(), 1, "disconnect-0x04", 5, false); !ack.SessionPresent {
		t.Error("the persistent session did not survive DISCONNECT 0x04")
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("logged: %s", l)
		}
	}
}
