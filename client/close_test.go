package client_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestPositionsAfterCloseCoverOnlyTheEventsHandedOn: the application reads
// slowly (a full Events channel) when it closes the client. Positions then
// must not cover events that were never put on the channel: persisted and
// passed back as Config.Positions, they would be skipped for good.
func TestPositionsAfterCloseCoverOnlyTheEventsHandedOn(t *testing.T) {
	t.Parallel()
	_, broker, _, conv := sender(t)
	cfg := testConfig(t, broker, 2)
	cfg.EventBuffer = 1
	cfg.Positions = map[int64]int64{conv: 0}
	b := connect(t, cfg)
	for seq := int64(1); seq <= 5; seq++ {
		p, _ := json.Marshal(client.Event{Type: client.EventMessageNew, ConversationID: conv, Seq: seq, SenderID: 1,
			Body: fmt.Sprintf("m%d", seq), CreatedAt: time.Now().UTC()})
		b.InjectEvent(p)
	}
	// The channel is full once the first one is on it; nothing reads it.
	deadline := time.Now().Add(10 * time.Second)
	for b.Stats().Delivered < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no event handed on within 10s: %+v", b.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	closeClient(t, b)
	var last int64
	for ev := range b.Events() {
		if ev.Type == client.EventMessageNew && ev.ConversationID == conv {
			last = ev.Seq
		}
	}
	if got := b.Positions()[conv]; got != last {
		t.Fatalf("after Close, Positions()[%d] = %d but the last message Events handed on is seq %d: "+
			"a restart from these positions never delivers seqs %d..%d", conv, got, last, last+1, got)
	}
}
