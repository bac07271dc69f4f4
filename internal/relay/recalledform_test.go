package relay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/relay"
)

// TestAMessageRecalledBeforeItIsRelayedReachesKafkaWithoutWhereItCameFrom:
// a reply, a forward from another conversation and an edited message are
// recalled before the relay runs. Their message.new on Kafka says recalled
// and carries none of replyTo, forwardedFrom, editedAt or a body.
func TestAMessageRecalledBeforeItIsRelayedReachesKafkaWithoutWhereItCameFrom(t *testing.T) {
	pool, st, conv := storeGroup(t)
	ctx := context.Background()
	src, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "elsewhere", Members: []int64{3}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(req chat.SendRequest) int64 {
		t.Helper()
		req.ClientMsgID = uuid.NewString()
		res, err := st.Send(ctx, req)
		if err != nil {
			t.Fatalf("send %+v: %v", req, err)
		}
		return res.Message.Seq
	}
	change := func(c chat.Change) {
		t.Helper()
		c.ClientMsgID, c.ConversationID, c.UserID = uuid.NewString(), conv.ID, 1
		if _, err := st.Change(ctx, c); err != nil {
			t.Fatalf("%s of %d: %v", c.Kind, c.TargetSeq, err)
		}
	}
	first := send(chat.SendRequest{ConversationID: conv.ID, SenderID: 1, Body: "lunch?"})
	secret := send(chat.SendRequest{ConversationID: src.ID, SenderID: 3, Body: "only for us"})
	reply := send(chat.SendRequest{ConversationID: conv.ID, SenderID: 1, Body: "at noon", ReplyTo: first})
	fwd := send(chat.SendRequest{ConversationID: conv.ID, SenderID: 1, Forward: &chat.MessageRef{ConversationID: src.ID, Seq: secret}})
	edited := send(chat.SendRequest{ConversationID: conv.ID, SenderID: 1, Body: "helo"})
	recalled := map[int64]string{reply: "reply", fwd: "forward", edited: "edited message"}
	change(chat.Change{Kind: chat.KindEdit, TargetSeq: edited, Body: "hello"})
	for seq := range recalled {
		change(chat.Change{Kind: chat.KindRecall, TargetSeq: seq})
	}

	// conversation.created twice, 5 message.new, an edit, 3 recalls.
	msgs := readUntil(t, addr(relayEntries(t, pool)), 11, 10*time.Second)
	seen := 0
	for _, m := range msgs {
		ev, err := relay.DecodeEvent(m)
		if err != nil {
			t.Fatal(err)
		}
		what, ok := recalled[ev.Seq]
		if ev.Type != chat.EventMessageNew || ev.ConversationID != conv.ID || !ok {
			continue
		}
		seen++
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(m.Value, &fields); err != nil {
			t.Fatal(err)
		}
		if _, ok := fields["recalled"]; !ok {
			t.Errorf("the %s on Kafka does not say recalled: %s", what, m.Value)
		}
		for _, k := range []string{"replyTo", "forwardedFrom", "editedAt", "body", "msgType", "attachments"} {
			if _, ok := fields[k]; ok {
				t.Errorf("the recalled %s on Kafka carries %s: %s", what, k, m.Value)
			}
		}
	}
	if seen != len(recalled) {
		t.Fatalf("%d of the %d recalled messages on Kafka", seen, len(recalled))
	}
}
