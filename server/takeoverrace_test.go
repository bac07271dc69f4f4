package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A reconnect on node A opened the session, then took over the phone's
// older connection there (a second: its socket is full), and a reconnect
// on node B took the session from it meanwhile. B's notice names A's new
// connection, which A had not listed yet: A must still close it, once it
// has its CONNACK, and leave B's alone; the client id has one connection.
func TestATakeoverNoticeForAConnectionNotYetListedClosesItAfterItsConnack(t *testing.T) {
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_MAX_BODY_BYTES": "1048576"}
	a := startNode(t, url, withNodeID(env, "a"))
	b := startNode(t, url, withNodeID(env, "b"))
	conv := mustDirect(t, context.Background(), a, 1, 2)
	fullPhone(t, a, conv.ID)
	token := func() string {
		return pgtest.QueryOne[string](t, a.Pool, `SELECT conn_token FROM chat_session WHERE client_id = 'phone'`)
	}
	first := token()

	dial := func(addr string) (*mqtttest.Client, error) {
		c, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "phone", Username: "1",
			Password: testnode.Token(t, 1), Expiry: expiryFor(5, false)})
		if err == nil {
			t.Cleanup(c.Drop)
			if ack.ReasonCode != 0 {
				t.Errorf("CONNACK 0x%02x from %s", ack.ReasonCode, addr)
			}
		}
		return c, err
	}
	onA := testkit.Start(t, "the reconnect on node A", func() (*mqtttest.Client, error) { return dial(a.MQTTAddr()) },
		func() bool { return token() != first })
	if onA.Returned() {
		t.Fatal("the reconnect on node A took over the full connection at once: nothing to race")
	}
	onB, err := dial(b.MQTTAddr())
	if err != nil {
		t.Fatalf("reconnect on node B: %v", err)
	}
	cA, err := onA.Wait()
	if err != nil {
		t.Fatalf("reconnect on node A: %v", err)
	}

	testkit.WaitFor(t, 5*time.Second, "node A to close the connection whose session node B took", cA.Closed)
	if pk, ok := cA.ServerDisconnect(); !ok || pk.ReasonCode != packets.ErrSessionTakenOver.Code {
		t.Errorf("node A's connection ended with DISCONNECT %v (sent %v), want 0x8E", pk.ReasonCode, ok)
	}
	testkit.Never(t, 2*time.Second, "node B's connection closed", onB.Closed)
	if s := a.Hub.Session("phone"); s != nil {
		t.Error("node A still delivers to the phone")
	}
}
