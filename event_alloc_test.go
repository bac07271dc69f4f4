package chat_test

import (
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// TestEncodingAMessageEventAllocatesItsPayloadAndTimestampOnly: every
// committed message is encoded for the outbox and the fan-out; the event
// itself (half a kilobyte) is not copied to the heap to be encoded.
func TestEncodingAMessageEventAllocatesItsPayloadAndTimestampOnly(t *testing.T) {
	ev := chat.MessageEvent(chat.Message{ConversationID: 1, Seq: 2, SenderID: 3, ClientMsgID: "3f1b8a52-6c1e-4d7a-9a0e-2b6f4c1d9e01",
		Body: strings.Repeat("x", 100), CreatedAt: time.Now()})
	want, err := chat.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector")
	}
	var got []byte
	// The payload, and time.Time's MarshalJSON's own slice.
	if n := testing.AllocsPerRun(100, func() { got, _ = chat.EncodeEvent(ev) }); n > 2 {
		t.Errorf("%v allocations per encoded event, want at most 2", n)
	}
	if string(got) != string(want) {
		t.Fatalf("encoded %s, then %s", want, got)
	}
}

// TestAMessageEventIsOneAllocation: every committed message becomes an
// event; its timestamp and body share one heap object.
func TestAMessageEventIsOneAllocation(t *testing.T) {
	m := chat.Message{ConversationID: 1, Seq: 2, SenderID: 3, Body: "x", CreatedAt: time.Now()}
	var ev chat.Event
	if n := testing.AllocsPerRun(100, func() { ev = chat.MessageEvent(m) }); n > 1 {
		t.Errorf("%v allocations per message event, want 1", n)
	}
	if *ev.Body != "x" || !ev.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("event of %+v: body %q, at %v", m, *ev.Body, ev.CreatedAt)
	}
}
