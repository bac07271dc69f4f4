package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
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
	onA := takeOverFullPhone(t, a)
	onB, ack, err := mqtttest.Dial(b.MQTTAddr(), phoneOptions(t))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("reconnect on node B: CONNACK 0x%02x, %v", ack.ReasonCode, err)
	}
	t.Cleanup(onB.Drop)
	cA := onA.Wait(t)

	testkit.WaitFor(t, 5*time.Second, "node A to close the connection whose session node B took", cA.Closed)
	if pk, ok := cA.ServerDisconnect(); !ok || pk.ReasonCode != packets.ErrSessionTakenOver.Code {
		t.Errorf("node A's connection ended with DISCONNECT %v (sent %v), want 0x8E", pk.ReasonCode, ok)
	}
	testkit.Never(t, 2*time.Second, "node B's connection closed", onB.Closed)
	if s := a.Hub.Session("phone"); s != nil {
		t.Error("node A still delivers to the phone")
	}
}
