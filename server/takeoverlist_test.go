package server_test

import (
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// slowCleanup is a mochi hook that holds mochi's clean-up of the first
// connection that ends by itself, between its check that the connection
// was not taken over and its removal of the client id from its list
// (UnsubscribeClient runs there, calling OnUnsubscribed with packet id
// 0), until release or a second: the clean-up's goroutine descheduled
// at the wrong moment.
type slowCleanup struct {
	mqtt.HookBase
	held    atomic.Bool
	holding chan struct{}
	release chan struct{}
}

func (h *slowCleanup) ID() string           { return "slow-cleanup" }
func (h *slowCleanup) Provides(b byte) bool { return b == mqtt.OnUnsubscribed }
func (h *slowCleanup) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	if pk.PacketID != 0 || cl.IsTakenOver() || !h.held.CompareAndSwap(false, true) {
		return
	}
	close(h.holding)
	select {
	case <-h.release:
	case <-time.After(time.Second):
	}
}

func holdCleanup(t *testing.T, srv *server.Server) *slowCleanup {
	t.Helper()
	h := &slowCleanup{holding: make(chan struct{}), release: make(chan struct{})}
	if err := srv.Broker.Server.AddHook(h, nil); err != nil {
		t.Fatal(err)
	}
	return h
}

// mochi removes a connection that ended from its list by client id, after
// checking it was not taken over: a reconnect that took it over between
// the two was removed instead. It stayed connected, but unlisted: the
// next reconnect took nothing over and both stayed open, the older one
// without deliveries (and no other node's takeover could close it).
func TestAReconnectDuringTheOldConnectionsCleanUpIsTakenOverByTheNext(t *testing.T) {
	t.Parallel()
	srv, _ := startDirect(t, nil)
	slow := holdCleanup(t, srv)
	old := rawClient(t, srv.MQTTAddr(), 1, "phone", 5, false)
	old.Drop()
	testkit.Receive(t, slow.holding, 10*time.Second, "mochi did not clean the dropped connection up")
	c := rawClient(t, srv.MQTTAddr(), 1, "phone", 5, false)
	close(slow.release)
	testkit.WaitFor(t, 5*time.Second, "the old connection's end", func() bool {
		return atomic.LoadInt64(&srv.Broker.Server.Info.ClientsConnected) == 1
	})
	if _, ok := srv.Broker.Server.Clients.Get("phone"); !ok {
		t.Error("mochi no longer lists the reconnected client")
	}

	next := rawClient(t, srv.MQTTAddr(), 1, "phone", 5, false)
	testkit.WaitFor(t, 5*time.Second, "the next reconnect to take the connection over", c.Closed)
	if pk, ok := c.ServerDisconnect(); !ok || pk.ReasonCode != packets.ErrSessionTakenOver.Code {
		t.Errorf("the connection taken over ended with DISCONNECT %v (sent %v), want 0x8E", pk.ReasonCode, ok)
	}
	mustSendAs(t, srv, mustDirect(t, t.Context(), srv, 1, 2).ID, 2, "to the newest")
	nextPublish(t, next, "the delivery to the newest connection", 10*time.Second, func(packets.Packet) bool { return true })
}

// Quick reconnects of one client id, each dropping the connection before
// the next: mochi must list the live connection after each (see above).
func TestQuickReconnectsOfOneClientIDLeaveTheLiveConnectionListed(t *testing.T) {
	t.Parallel()
	srv, _ := startDirect(t, nil)
	var c *mqtttest.Client
	for r := range 1500 {
		if c != nil {
			c.Drop()
		}
		c = rawClient(t, srv.MQTTAddr(), 1, "phone", 5, r%2 == 0)
		testkit.WaitFor(t, 5*time.Second, "the old connection's end", func() bool {
			return atomic.LoadInt64(&srv.Broker.Server.Info.ClientsConnected) == 1
		})
		if _, ok := srv.Broker.Server.Clients.Get("phone"); !ok {
			t.Fatalf("round %d: mochi no longer lists the reconnected client", r)
		}
	}
}
