package hooks

import (
	"io"
	"net"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// closedHub is delivery once the server began shutting down.
type closedHub struct {
	chat.Delivery
}

func (closedHub) Attach(chat.Conn, string, int64, bool, bool, int) error {
	return chat.Errorf(chat.CodeUnavailable, "delivery is closed: the server is shutting down")
}

// A client whose connection completes while the server shuts down gets
// no delivery session (the hub refuses it): it is disconnected, to
// connect again elsewhere, not left connected with nothing delivered.
func TestAClientThatDeliveryRefusesIsDisconnectedAsTheServerShutsDown(t *testing.T) {
	h := New(Config{Sessions: &savedSubs{}, Hub: closedHub{}})
	srv := mqtt.New(nil)
	h.Attach(srv)
	ours, theirs := net.Pipe()
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	go func() { _, _ = io.Copy(io.Discard, theirs) }()
	cl := srv.NewClient(ours, "tcp", "device-1", false)
	cl.Properties.ProtocolVersion = 5
	h.clients.Store(cl, &clientInfo{userID: 42, persistent: true, conn: &mqttConn{cl: cl, events: EventsTopic(42)}})
	h.OnSessionEstablished(cl, packets.Packet{})
	if !cl.Closed() {
		t.Fatal("the client delivery refused is still connected")
	}
	if got := cl.StopCause(); got == nil || got.Error() != packets.ErrServerShuttingDown.Error() {
		t.Fatalf("the client was stopped for %v, want %v", got, packets.ErrServerShuttingDown)
	}
}
