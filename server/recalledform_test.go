package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// recalledKeys are what a recalled message must not carry: what it said
// and where it came from.
var recalledKeys = []string{"replyTo", "forwardedFrom", "editedAt", "body", "msgType", "attachments", "reactions"}

// leftover is the first of recalledKeys the JSON object b has, or "".
func leftover(t *testing.T, b []byte) string {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	for _, k := range recalledKeys {
		if _, ok := fields[k]; ok {
			return k
		}
	}
	return ""
}

// TestARecalledReplyForwardOrEditedMessageReachesMembersWithoutWhereItCameFrom:
// a reply, a forward from a conversation the members are not in, and an
// edited message are recalled while bob is online and carol's persistent
// session is away. Bob's live message.recalled events, carol's catch-up of
// the three messages and history carry none of replyTo, forwardedFrom or
// editedAt (nor a body): a recalled message reads as recalled and nothing
// more.
func TestARecalledReplyForwardOrEditedMessageReachesMembersWithoutWhereItCameFrom(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 1, "recalled", []int64{2, 3})
	src := mustGroup(t, ctx, srv, 1, "elsewhere", []int64{4})
	mustSendAs(t, srv, src.ID, 4, "only for us")
	parkSession(t, srv, 3, "carol", 5, g.ID)
	alice := rawClient(t, srv.MQTTAddr(), 1, "alice", 5, true)
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)

	publish := func(topic, payload string) {
		t.Helper()
		if ack, err := alice.Publish(topic, 1, []byte(payload)); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("publish %s %s: %v %#x", topic, payload, err, ack.ReasonCode)
		}
	}
	publish(testnode.MsgTopic(g.ID), fmt.Sprintf(`{"clientMsgId":%q,"body":"lunch?"}`, newID()))
	publish(testnode.MsgTopic(g.ID), fmt.Sprintf(`{"clientMsgId":%q,"body":"at noon","replyTo":1}`, newID()))
	publish(testnode.MsgTopic(g.ID), fmt.Sprintf(`{"clientMsgId":%q,"body":"","forward":{"conversationId":%d,"seq":1}}`, newID(), src.ID))
	publish(testnode.MsgTopic(g.ID), fmt.Sprintf(`{"clientMsgId":%q,"body":"helo"}`, newID()))
	publish(changeTopic(g.ID, "edit"), fmt.Sprintf(`{"clientMsgId":%q,"seq":4,"body":"hello"}`, newID()))
	recalled := map[int64]string{2: "reply", 3: "forward", 4: "edited message"}
	for seq := int64(2); seq <= 4; seq++ {
		publish(changeTopic(g.ID, "recall"), fmt.Sprintf(`{"clientMsgId":%q,"seq":%d}`, newID(), seq))
	}

	for range recalled {
		pk := nextPublish(t, bob, "message.recalled", 5*time.Second, isEntryOf(t, g.ID, chat.EventMessageRecalled))
		if k := leftover(t, pk.Payload); k != "" {
			t.Errorf("live message.recalled carries %s: %s", k, pk.Payload)
		}
	}
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol", 5, false)
	for range 4 {
		pk := nextPublish(t, carol, "caught-up message.new", 10*time.Second, isEntryOf(t, g.ID, chat.EventMessageNew))
		var ev event
		_ = json.Unmarshal(pk.Payload, &ev)
		if what, ok := recalled[ev.Seq]; ok {
			if k := leftover(t, pk.Payload); k != "" {
				t.Errorf("catch-up: the recalled %s carries %s: %s", what, k, pk.Payload)
			}
		}
	}

	r := httpDo(t, srv, 2, http.MethodGet, fmt.Sprintf("/v1/conversations/%d/messages", g.ID), nil)
	var page struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != http.StatusOK {
		t.Fatalf("history: %d %s: %v", r.status, r.body, err)
	}
	for _, m := range page.Messages {
		var e struct {
			Seq  int64  `json:"seq"`
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(m, &e)
		if what, ok := recalled[e.Seq]; ok && e.Kind == string(chat.KindMessage) {
			if k := leftover(t, m); k != "" {
				t.Errorf("history: the recalled %s carries %s: %s", what, k, m)
			}
		}
	}
}

// isEntryOf matches an event of type typ of conversation conv.
func isEntryOf(t *testing.T, conv int64, typ string) func(packets.Packet) bool {
	return func(pk packets.Packet) bool {
		var ev event
		if err := json.Unmarshal(pk.Payload, &ev); err != nil {
			t.Fatalf("bad event payload %q: %v", pk.Payload, err)
		}
		return ev.Type == typ && ev.ConversationID == conv
	}
}
