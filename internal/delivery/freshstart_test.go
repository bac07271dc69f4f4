package delivery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// A clean session starts at its conversations' last_seq, read after its
// client connected, and still gets an entry at or before that start that
// the fan-out routes only later (another node's, relayed late). A read
// receipt of that entry, committed here and routed at once, is not shown
// before the entry it reports: it waits for it as for a gap.
func TestAReadReceiptOfAnEntryRelayedLateToACleanSessionGoesOutAfterTheEntry(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	const gapWait = time.Second // the receipt and the entry both arrive within it
	h := startHub(t, f.sessions, delivery.Options{GapWait: gapWait})
	late := sendSeqsAs(t, st, rec, conv.ID, 1, 1) // another node's, relayed late
	u2 := attachUser(t, h, f, "u2", 2, false, true, true)
	if _, err := st.MarkRead(ctx, conv.ID, 3, late[0].Seq); err != nil {
		t.Fatal(err)
	}
	for _, ev := range append(rec.take(), late[0]) { // the receipt here, then the entry
		h.Deliver(ev)
	}
	testkit.WaitFor(t, gapWait+5*time.Second, "the entry and the receipt to reach the client", func() bool {
		return events(u2, chat.EventMessageNew, conv.ID) == 1 && events(u2, chat.EventReadUpdated, conv.ID) == 1
	})
	var got []string
	for _, p := range u2.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.ConversationID == conv.ID {
			got = append(got, ev.Type)
		}
	}
	if len(got) != 2 || got[0] != chat.EventMessageNew {
		t.Fatalf("events in the order sent: %v, want the entry before its receipt", got)
	}
}

// The entry such a receipt reports may have reached the fan-out before
// the session started, and never come again: the receipt waits GapWait
// for it, then goes out all the same.
func TestAReadReceiptOfAnEntryCommittedBeforeACleanSessionStartedGoesOutAfterTheGapWait(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, h := nodeOfRecord(t)
	u1 := attachUser(t, h, f, "u1", 1, false, true, true)
	sent := sendSeqsAs(t, st, rec, conv.ID, 1, 1)
	for _, ev := range sent { // routed before the session
		h.Deliver(ev)
	}
	waitSeqs(t, u1, conv.ID, 1)
	u2 := attachUser(t, h, f, "u2", 2, false, true, true)
	if _, err := st.MarkRead(ctx, conv.ID, 3, sent[0].Seq); err != nil {
		t.Fatal(err)
	}
	for _, ev := range rec.take() {
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the receipt to reach the client", func() bool {
		return events(u2, chat.EventReadUpdated, conv.ID) == 1
	})
	if n := events(u2, chat.EventMessageNew, conv.ID); n != 0 {
		t.Fatalf("the clean session got %d messages from before it started", n)
	}
}
