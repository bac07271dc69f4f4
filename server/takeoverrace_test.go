package server_test

import (
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// A reconnect on node A opened the session, then took over the phone's
// older connection there (a second: its socket is full), and a reconnect
// on node B took the session from it meanwhile. B's notice names A's new
// connection, which A had not listed yet: A must still close it, once it
// has its CONNACK, and leave B's alone; the client id has one connection.
func TestATakeoverNoticeForAConnectionNotYetListedClosesItAfterItsConnack(t *testing.T) {
	t.Parallel()
	a, b := twoNodesAndAFullPhone(t)
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

func holdConnack(t *testing.T, srv *server.Server, clientID string) *slowConnack {
	t.Helper()
	h := &slowConnack{clientID: clientID, holding: make(chan struct{}), release: make(chan struct{})}
	if err := srv.Broker.Server.AddHook(h, nil); err != nil {
		t.Fatal(err)
	}
	return h
}

// dialHeld starts a connect with o on srv and returns once slow holds
// its CONNACK, with the connection mochi listed for it.
func (h *slowConnack) dialHeld(t *testing.T, srv *server.Server, o mqtttest.Options) (*testkit.Pending[*mqtttest.Client], *mqtt.Client) {
	t.Helper()
	p := testkit.Start(t, "the connect of "+o.ClientID, func() (*mqtttest.Client, error) {
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), o)
		return c, err
	}, func() bool {
		select {
		case <-h.holding:
			return true
		default:
			return false
		}
	})
	listed, ok := srv.Broker.Server.Clients.Get(o.ClientID)
	if p.Returned() || !ok {
		t.Fatal("the connect's CONNACK was not held with its connection listed")
	}
	return p, listed
}

// A takeover notice from node B naming node A's connection once A has
// listed it but not yet written its CONNACK closes it only after the
// CONNACK: the first packet a server sends is CONNACK [MQTT-3.2.0-1], and
// a client told DISCONNECT instead never learns it was connected.
func TestATakeoverNoticeForAConnectionListedBeforeItsConnackClosesItAfterTheConnack(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	a := startNode(t, url, withNodeID(nil, "a"))
	b := startNode(t, url, withNodeID(nil, "b"))
	slow := holdConnack(t, a, "phone")
	onA, listed := slow.dialHeld(t, a, phoneOptions(t))
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
