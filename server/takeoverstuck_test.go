package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// A phone that lost its network while deliveries filled its socket reads
// nothing, and the node's write to it (a delivery, then the takeover's
// DISCONNECT) blocks. Its reconnect with the same client id must not wait
// for that write: it took over inside the CONNECT, under the client id's
// connect turn, so the new connection got no CONNACK, and every later
// CONNECT of the id was refused as unavailable after the send timeout,
// until the write watchdog (30 s) or the keepalive freed the old socket.
// The old connection is closed within the takeover's second instead.
func TestAReconnectTakesOverAnOldConnectionWhoseSocketIsFull(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, map[string]string{"CHAT_MAX_BODY_BYTES": "1048576"})
	old := fullPhone(t, srv, conv.ID)

	start := time.Now()
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), phoneOptions(t))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("reconnect over the stuck connection after %v: %v", took.Round(time.Millisecond), err)
	}
	t.Cleanup(c.Drop)
	t.Logf("CONNACK 0x%02x after %v", ack.ReasonCode, took.Round(time.Millisecond))
	if ack.ReasonCode != 0 || took > 3*time.Second {
		t.Fatalf("reconnect over the stuck connection: CONNACK 0x%02x after %v, want 0x00 within 3s", ack.ReasonCode, took.Round(time.Millisecond))
	}

	// The old connection is closed: once it reads again (its Publishes
	// taken), what was buffered comes, then its end.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case <-old.Done:
			return
		case _, ok := <-old.Publishes:
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("the old connection was not closed")
		}
	}
}

// The same phone reconnecting through another node: the old node closes
// its connection within the takeover's second of the notice, as a
// takeover on one node does, not when its write watchdog (30 s) or its
// keepalive frees the socket.
func TestAReconnectOnAnotherNodeClosesAnOldConnectionWhoseSocketIsFull(t *testing.T) {
	t.Parallel()
	a, b := twoNodesAndAFullPhone(t)

	if _, ack := dialAs(t, b.MQTTAddr(), 1, "phone", 5, false); ack.ReasonCode != 0 {
		t.Fatalf("reconnect on node B: CONNACK 0x%02x", ack.ReasonCode)
	}
	// Node A's client ends (its delivery session with it) without the
	// old client reading: reading would free the stuck write.
	testkit.WaitFor(t, 4*time.Second, "node A closed the old connection", func() bool { return a.Hub.Session("phone") == nil })
}

// twoNodesAndAFullPhone starts nodes a and b on one database, whose
// bodies may be 1 MiB, and connects the phone (user 1) to a with its
// socket full (fullPhone) of a direct conversation with user 2.
func twoNodesAndAFullPhone(t *testing.T) (a, b *server.Server) {
	t.Helper()
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_MAX_BODY_BYTES": "1048576"}
	a = startNode(t, url, withNodeID(env, "a"))
	b = startNode(t, url, withNodeID(env, "b"))
	fullPhone(t, a, mustDirect(t, context.Background(), a, 1, 2).ID)
	return a, b
}

// fullPhone is stuckPhone on srv with its socket full: 24 MiB of
// messages from user 2 in conv (the node must allow bodies of 1 MiB),
// far beyond what the two sockets' buffers hold, of which it took the
// first.
func fullPhone(t *testing.T, srv *server.Server, conv int64) *mqtttest.Client {
	t.Helper()
	c := stuckPhone(t, srv.MQTTAddr())
	body := strings.Repeat("x", 1<<20-64)
	for i := range 24 {
		mustSendAs(t, srv, conv, 2, fmt.Sprint(i, body))
	}
	nextPublish(t, c, "the first delivery", 10*time.Second, func(packets.Packet) bool { return true })
	return c
}

// phoneOptions connect user 1's persistent client "phone".
func phoneOptions(t *testing.T) mqtttest.Options {
	return mqtttest.Options{Version: 5, ClientID: "phone", Username: "1", Password: testnode.Token(t, 1), Expiry: expiryFor(5, false)}
}

// phoneTakeover is a reconnect of the phone under way.
type phoneTakeover struct {
	p *testkit.Pending[*mqtttest.Client]
}

// takeOverFullPhone starts a reconnect of the phone on srv, where
// fullPhone holds it: it returns once the reconnect has opened the
// session, while its takeover of the full connection (TakeoverGrace)
// holds the client id's connect turn and its CONNACK.
func takeOverFullPhone(t *testing.T, srv *server.Server) phoneTakeover {
	t.Helper()
	token := func() string {
		return pgtest.QueryOne[string](t, srv.Pool, `SELECT conn_token FROM chat_session WHERE client_id = 'phone'`)
	}
	first := token()
	p := testkit.Start(t, "the phone's reconnect", func() (*mqtttest.Client, error) {
		c, ack, err := mqtttest.Dial(srv.MQTTAddr(), phoneOptions(t))
		if err == nil && ack.ReasonCode != 0 {
			err = fmt.Errorf("CONNACK 0x%02x", ack.ReasonCode)
		}
		return c, err
	}, func() bool { return token() != first })
	if p.Returned() {
		t.Fatal("the phone's reconnect took over the full connection at once")
	}
	return phoneTakeover{p}
}

// Wait is the reconnected client, once it has its CONNACK.
func (r phoneTakeover) Wait(t *testing.T) *mqtttest.Client {
	t.Helper()
	c, err := r.p.Wait()
	if err != nil {
		t.Fatalf("the phone's reconnect: %v", err)
	}
	t.Cleanup(c.Drop)
	return c
}

// stuckPhone connects user 1's persistent client "phone" subscribed to its
// events, reading no further than one delivery the test has not taken: a
// phone whose network went away, so what the node writes to it fills the
// socket. (HoldReading would race the client's read of its SUBACK: a
// hold taken before the read loop waits again stops it short of the
// first delivery the tests wait for.)
func stuckPhone(t *testing.T, addr string) *mqtttest.Client {
	t.Helper()
	o := phoneOptions(t)
	o.ReadBuffer = 1
	c, _, err := mqtttest.Dial(addr, o)
	if err != nil {
		t.Fatalf("connect phone: %v", err)
	}
	t.Cleanup(c.Drop)
	if codes, err := c.Subscribe(testnode.EventsTopic(1)); err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		t.Fatalf("subscribe events: %v %v", codes, err)
	}
	return c
}
