package client_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// TestPositionsCoverAnEventByTheTimeEventsCarriesIt: an application that
// persists Positions after processing each event must find that event
// in it, or its next run gets the event again. Checked for the first
// event of a conversation, the next one in order, and one filled
// through history before a live one after a gap.
func TestPositionsCoverAnEventByTheTimeEventsCarriesIt(t *testing.T) {
	t.Parallel()
	a, b, conv := pair(t)
	checked, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done) })
	// The dispatcher waits after handing each message on until the
	// test has looked at Positions.
	b.OnHandedOn(func(ev client.Event) {
		if ev.Type == client.EventMessageNew {
			select {
			case <-checked:
			case <-done:
			}
		}
	})
	var seen []int64
	check := func(want int) {
		t.Helper()
		if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
			if ev.Type != client.EventMessageNew || ev.ConversationID != conv {
				return false
			}
			if h := b.Positions()[conv]; h < ev.Seq {
				t.Fatalf("Events carries seq %d (fromHistory %v) while Positions says %d", ev.Seq, ev.FromHistory, h)
			}
			seen = append(seen, ev.Seq)
			checked <- struct{}{}
			return len(seen) == want
		}) {
			t.Fatalf("got seqs %v within 10s, want %d", seen, want)
		}
	}
	sendN(t, a, conv, 2, "m") // seq 1: first sight; seq 2: in order
	check(2)
	dropMessages(b, 3, 3)
	sendN(t, a, conv, 1, "lost") // seq 3
	b.DropEvents(nil)
	sendN(t, a, conv, 1, "after the gap") // seq 4, after seq 3 from history
	check(4)
}

// TestPositionsAfterCloseLeaveOutAConversationWhoseFirstEventWasNotHandedOn:
// the first event of a conversation waits for room on a full Events
// channel when the client closes. Positions moved to it before it was
// put on the channel, and must go back to not listing the conversation:
// persisted, its position would make the next run skip that event.
func TestPositionsAfterCloseLeaveOutAConversationWhoseFirstEventWasNotHandedOn(t *testing.T) {
	t.Parallel()
	_, broker, _, conv := sender(t)
	cfg := testConfig(t, broker, 2)
	cfg.EventBuffer = 1
	b := connect(t, cfg)
	other := conv + 1000
	for _, c := range []int64{conv, other} {
		p, _ := json.Marshal(client.Event{Type: client.EventMessageNew, ConversationID: c, Seq: 1, SenderID: 1,
			Body: "first", CreatedAt: time.Now().UTC()})
		b.InjectEvent(p)
	}
	// The first fills the channel, which nothing reads; the second waits.
	testkit.WaitFor(t, 10*time.Second, "the first event on Events and the second waiting", func() bool {
		_, waiting := b.Positions()[other]
		return b.Stats().Delivered == 1 && waiting
	})
	closeClient(t, b)
	var carried []int64
	for ev := range b.Events() {
		if ev.Type == client.EventMessageNew {
			carried = append(carried, ev.ConversationID)
		}
	}
	if h, ok := b.Positions()[other]; ok && !slices.Contains(carried, other) {
		t.Fatalf("after Close, Positions()[%d] = %d though Events never carried its event (carried %v)", other, h, carried)
	}
}
