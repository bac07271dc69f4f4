package delivery_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// A direct publish (an RPC reply, an error event) is for the connection
// that asked: once it ended, the session now holding its client id, here
// another user's, gets nothing of it.
func TestADirectPublishForAnEndedConnectionDoesNotReachTheNextSessionOfItsClientID(t *testing.T) {
	f := setup(t)
	h := startHub(t, f.sessions, delivery.Options{})
	first := attachUser(t, h, f, "shared", 2, false, true, true)
	h.Detach("shared", first.self)
	if err := f.sessions.Drop(context.Background(), "shared", ""); err != nil {
		t.Fatal(err)
	}
	next := attachUser(t, h, f, "shared", 3, false, true, true)

	if h.SendDirect("shared", first.self, chat.Packet{Topic: "chat/v1/user/2/rpc", Payload: []byte(`{"for":2}`), QoS: 1}) {
		t.Fatal("SendDirect for the ended connection reported it queued")
	}
	if !h.SendDirect("shared", next.self, chat.Packet{Topic: "chat/v1/user/3/rpc", Payload: []byte(`{"for":3}`), QoS: 1}) {
		t.Fatal("SendDirect for the connection holding the session reported it did not queue")
	}
	testkit.WaitFor(t, 10*time.Second, "user 3 to get their own reply", func() bool { return len(next.packets()) > 0 })
	for _, p := range next.packets() {
		if p.Topic != "chat/v1/user/3/rpc" {
			t.Fatalf("user 3's connection got %s on %s: a reply for the connection before it", p.Payload, p.Topic)
		}
	}
}
