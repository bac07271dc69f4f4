package server_test

import (
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/testnode"
)

// A send at QoS 0 has no PUBACK to carry its outcome: committed, it
// reaches the members (the sender's own devices too); refused, on MQTT 5
// as on 3.1.1, the sending connection gets the error event, naming the
// clientMsgId when the payload had one.
func TestAQoS0SendIsStoredOrAnsweredWithAnErrorEventOnBothVersions(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	other := mustDirect(t, t.Context(), srv, 2, 3)
	for _, v := range []byte{5, 4} {
		c := rawClient(t, srv.MQTTAddr(), 1, fmt.Sprintf("qos0-v%d", v), v, true)
		body := fmt.Sprintf("qos0 v%d", v)
		if _, err := c.Publish(testnode.MsgTopic(conv.ID), 0, testnode.SendPayload(newID(), body)); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, c, chat.EventMessageNew, 5*time.Second); ev.Body != body {
			t.Fatalf("v%d: message.new %+v, want body %q", v, ev, body)
		}
		if _, err := c.Publish(testnode.MsgTopic(conv.ID), 0, []byte("not json")); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, c, chat.EventError, 5*time.Second); ev.Code != string(chat.CodeInvalid) || ev.ConversationID != conv.ID {
			t.Fatalf("v%d bad JSON at QoS 0: error event %+v, want invalid", v, ev)
		}
		id := newID()
		if _, err := c.Publish(testnode.MsgTopic(other.ID), 0, testnode.SendPayload(id, "not mine")); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, c, chat.EventError, 5*time.Second); ev.Code != string(chat.CodeNotMember) || ev.ClientMsgID != id {
			t.Fatalf("v%d send to another's conversation at QoS 0: error event %+v, want not_member for %s", v, ev, id)
		}
		c.Disconnect()
	}
	if n := countMessages(t, srv.Pool, other.ID); n != 0 {
		t.Fatalf("refused QoS 0 sends stored %d messages", n)
	}
}
