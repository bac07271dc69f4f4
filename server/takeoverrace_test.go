package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
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

// slowConnack is a mochi hook that holds the encoding of the first
// CONNACK to clientID, after mochi listed the connection and before it
// writes the CONNACK, until release or ten seconds: the connection's
// goroutine descheduled between the two.
type slowConnack struct {
	mqtt.HookBase
	clientID string
	held     atomic.Bool
	holding  chan struct{}
	release  chan struct{}
}

func (h *slowConnack) ID() string           { return "slow-connack" }
func (h *slowConnack) Provides(b byte) bool { return b == mqtt.OnPacketEncode }
func (h *slowConnack) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Connack || cl.ID != h.clientID || !h.held.CompareAndSwap(false, true) {
		return pk
	}
	close(h.holding)
	select {
	case <-h.release:
	case <-time.After(10 * time.Second):
	}
	return pk
}

// A takeover notice from node B naming node A's connection once A has
// listed it but not yet written its CONNACK closes it only after the
// CONNACK: the first packet a server sends is CONNACK [MQTT-3.2.0-1], and
// a client told DISCONNECT instead never learns it was connected.
func TestATakeoverNoticeForAConnectionListedBeforeItsConnackClosesItAfterTheConnack(t *testing.T) {
	url := pgtest.NewDB(t)
	a := startNode(t, url, withNodeID(nil, "a"))
	b := startNode(t, url, withNodeID(nil, "b"))
	slow := &slowConnack{clientID: "phone", holding: make(chan struct{}), release: make(chan struct{})}
	if err := a.Broker.Server.AddHook(slow, nil); err != nil {
		t.Fatal(err)
	}
	onA := testkit.Start(t, "the phone's connect on node A", func() (*mqtttest.Client, error) {
		c, _, err := mqtttest.Dial(a.MQTTAddr(), phoneOptions(t))
		return c, err
	}, func() bool {
		select {
		case <-slow.holding:
			return true
		default:
			return false
		}
	})
	listed, ok := a.Broker.Server.Clients.Get("phone")
	if !ok {
		t.Fatal("node A does not list the connection whose CONNACK it is writing")
	}
	onB, _, err := mqtttest.Dial(b.MQTTAddr(), phoneOptions(t))
	if err != nil {
		t.Fatalf("reconnect on node B: %v", err)
	}
	t.Cleanup(onB.Drop)
	testkit.Never(t, 2*time.Second, "node A closed the connection before writing its CONNACK", listed.Closed)
	close(slow.release)

	cA, err := onA.Wait()
	if err != nil {
		t.Fatalf("the phone's connect on node A: %v", err)
	}
	t.Cleanup(cA.Drop)
	testkit.WaitFor(t, 5*time.Second, "node A to close the connection whose session node B took", cA.Closed)
	if pk, ok := cA.ServerDisconnect(); !ok || pk.ReasonCode != packets.ErrSessionTakenOver.Code {
		t.Errorf("node A's connection ended with DISCONNECT %v (sent %v), want 0x8E", pk.ReasonCode, ok)
	}
	testkit.Never(t, time.Second, "node B's connection closed", onB.Closed)
}
