package server_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A v5 CONNECT with clean start 0 and session expiry 0 (paho's autopaho
// default) resumes nothing: CONNACK session present 0, "subscribe to your
// events topic". When it took over a connection of its client id still
// open on the same node, mochi handed it that connection's subscriptions
// all the same: the client, told it had none, got events it never asked
// for on this connection, and kept getting them after unsubscribing what
// it did subscribe. A connection whose session is not present starts with
// no subscriptions.
func TestATakeoverWithoutSessionPresentStartsWithoutTheOldConnectionsSubscriptions(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	opts := mqtttest.Options{Version: 5, ClientID: "phone", Password: testnode.Token(t, 1), Clean: false, Expiry: 0}
	old, _, err := mqtttest.Dial(srv.MQTTAddr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Drop)
	if codes, err := old.Subscribe(testnode.EventsTopic(1)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	testkit.WaitFor(t, 5*time.Second, "the old connection to get events", func() bool { return srv.Hub.Ready("phone") })
	oldSession := srv.Hub.Session("phone")

	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Drop)
	if ack.SessionPresent {
		t.Fatal("CONNACK session present 1 for a session with expiry 0")
	}
	testkit.WaitFor(t, 5*time.Second, "the new connection's delivery session", func() bool {
		s := srv.Hub.Session("phone")
		return s != nil && s != oldSession && old.Closed()
	})
	cl, ok := srv.Broker.Server.Clients.Get("phone")
	if !ok {
		t.Fatal("no client phone")
	}
	if n := cl.State.Subscriptions.Len(); n != 0 || srv.Hub.Ready("phone") {
		t.Fatalf("told session present 0, the new connection holds %d subscriptions (events delivered: %v)", n, srv.Hub.Ready("phone"))
	}
}
