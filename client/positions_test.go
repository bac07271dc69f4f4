package client_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestPositionsCoverAnEventByTheTimeEventsCarriesIt: an application that
// persists Positions after processing each event must find that event
// in it, or its next run gets the event again. Checked for the first
// event of a conversation, the next one in order, and one filled
// through history before a live one after a gap.
func TestPositionsCoverAnEventByTheTimeEventsCarriesIt(t *testing.T) {
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
