package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/relay"
)

// TestRelayedMessageTimesAreWhatGoWrites commits messages through the store
// (their outbox rows reference the message, with no JSON of their own) at
// pinned times whose fractions Go writes differently, and checks that each
// Kafka value is exactly chatd's encoding of the stored message, createdAt
// to the microsecond in UTC.
func TestRelayedMessageTimesAreWhatGoWrites(t *testing.T) {
	pool, st, conv := storeGroup(t)
	ctx := context.Background()
	var sent []chat.Message
	for i, frac := range []string{"", ".000001", ".1", ".12", ".1234", ".123456", ".999999", ".5"} {
		at := fmt.Sprintf("2031-05-06T07:08:%02d%s+00:00", 10+i, frac)
		if _, err := pool.Exec(ctx, `UPDATE conversation SET last_message_at = $2::timestamptz WHERE id = $1`, conv.ID, at); err != nil {
			t.Fatal(err)
		}
		res, err := st.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "pinned " + frac})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, res.Message)
	}
	port := relayEntries(t, pool)
	msgs := readUntil(t, addr(port), 1+len(sent), 10*time.Second) // conversation.created first
	byType := map[string][]json.RawMessage{}
	for _, m := range msgs {
		e, err := relay.DecodeEvent(m)
		if err != nil {
			t.Fatal(err)
		}
		byType[e.Type] = append(byType[e.Type], m.Value)
	}
	got := byType[chat.EventMessageNew]
	if len(got) != len(sent) {
		t.Fatalf("%d message.new on Kafka, want %d", len(got), len(sent))
	}
	for i, m := range sent {
		var ev chat.Event
		if err := json.Unmarshal(got[i], &ev); err != nil {
			t.Fatal(err)
		}
		want := chat.MessageEvent(chat.Message{ConversationID: m.ConversationID, Seq: m.Seq, SenderID: m.SenderID,
			ClientMsgID: m.ClientMsgID, Body: m.Body, CreatedAt: m.CreatedAt.UTC()})
		want.EventID = ev.EventID
		b, err := chat.EncodeEvent(want)
		if err != nil {
			t.Fatal(err)
		}
		if string(got[i]) != string(b) {
			t.Fatalf("message %d on Kafka\n  %s\nchatd encodes\n  %s", m.Seq, got[i], b)
		}
		goTime, _ := m.CreatedAt.UTC().MarshalJSON()
		var raw struct {
			CreatedAt json.RawMessage `json:"createdAt"`
		}
		_ = json.Unmarshal(got[i], &raw)
		if string(raw.CreatedAt) != string(goTime) {
			t.Fatalf("createdAt %s, Go writes %s", raw.CreatedAt, goTime)
		}
	}
}
