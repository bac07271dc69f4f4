package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// TestTwoClientsSharingAClientIDDoNotTakeEachOtherOverForEver: a second
// client started with the first one's ClientID (no SessionDir to lock)
// takes the session over; the first, reconnecting, takes it back, and so
// on. The one taken over first must stop after a few takeovers and say
// why (Err, an error event, its sends), leaving the other connected.
func TestTwoClientsSharingAClientIDDoNotTakeEachOtherOverForEver(t *testing.T) {
	t.Parallel()
	_, broker, _, conv := sender(t)
	cfg := testConfig(t, broker, 2)
	cfg.ClientID = "shared-by-two"
	first := connect(t, cfg)
	second := connect(t, cfg)
	testkit.WaitFor(t, 15*time.Second, "one of the clients to stop", func() bool {
		return first.Err() != nil || second.Err() != nil
	})
	if !errors.Is(first.Err(), client.ErrTakenOver) || second.Err() != nil {
		t.Fatalf("Err of the first client %v, of the second %v; want the first taken over and the second running (connects %d and %d)",
			first.Err(), second.Err(), first.Stats().Connects, second.Stats().Connects)
	}
	if ev := nextEvent(t, first, client.EventError, 5*time.Second); ev.Code != "taken_over" {
		t.Fatalf("error event %+v, want code taken_over", ev)
	}
	if _, err := first.Send(ctxFor(t, 5*time.Second), conv, "from the stopped one"); !errors.Is(err, client.ErrTakenOver) {
		t.Fatalf("Send on the stopped client: %v, want ErrTakenOver", err)
	}

	// The second one keeps the session: a round trip later, neither has
	// connected again. Counted once the second's connection that took the
	// session over for the last time is up: the first stops as chatd
	// tells it of that takeover, which may be before the second has its
	// CONNACK.
	testkit.WaitFor(t, 5*time.Second, "the second client connected", second.Connected)
	connects := [2]int64{first.Stats().Connects, second.Stats().Connects}
	sendN(t, second, conv, 1, "from the one left")
	if _, err := second.Inbox(ctxFor(t, 5*time.Second), client.InboxOptions{}); err != nil {
		t.Fatal(err)
	}
	if now := [2]int64{first.Stats().Connects, second.Stats().Connects}; now != connects || !second.Connected() {
		t.Fatalf("connects went from %v to %v (second connected: %v); want the second left alone", connects, now, second.Connected())
	}
}
