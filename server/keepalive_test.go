package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testnode"
)

// A device that goes silent (no packet, not even PINGREQ) is disconnected
// after 1.5 × its keepalive, not before, and its persistent session stays:
// it resumes with session present and gets what was sent meanwhile.
func TestASilentDeviceIsDisconnectedAfterOneAndAHalfKeepalivesAndKeepsItsSession(t *testing.T) {
	srv, conv := startDirect(t, nil)
	for _, v := range []byte{4, 5} {
		id := fmt.Sprintf("silent-v%d", v)
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: id, Password: testnode.Token(t, 2),
			Expiry: expiryFor(v, false), Keepalive: 2})
		if err != nil {
			t.Fatal(err)
		}
		if codes, err := c.Subscribe(testnode.EventsTopic(2)); err != nil || codes[0] >= 0x80 {
			t.Fatalf("v%d subscribe: %v %v", v, codes, err)
		}
		start := time.Now()
		select {
		case <-c.Done:
		case <-time.After(10 * time.Second):
			t.Fatalf("v%d: a device silent for 10 s with keepalive 2 s is still connected", v)
		}
		if d := time.Since(start); d < 2900*time.Millisecond {
			t.Fatalf("v%d: disconnected after %v of silence, before 1.5 × keepalive (3 s)", v, d)
		}
		body := fmt.Sprintf("while v%d was away", v)
		if _, err := srv.Service.Send(context.Background(), chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: body}); err != nil {
			t.Fatal(err)
		}
		back, ack := resume(t, srv.MQTTAddr(), 2, id, v)
		if !ack.SessionPresent {
			t.Fatalf("v%d: the session did not survive the keepalive timeout", v)
		}
		if ev := nextEvent(t, back, chat.EventMessageNew, 5*time.Second); ev.Body != body {
			t.Fatalf("v%d: resumed with %+v, want %q", v, ev, body)
		}
		disconnect(t, srv, back, id)
	}
}
