package delivery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
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

// readAfterACleanSessionStarted routes an entry of conv to user 1's
// session, then starts user 2's clean session and has user 3 read the
// entry: the receipt is recorded, not routed yet, and the entry is not
// routed again.
func readAfterACleanSessionStarted(t *testing.T, st *store.Store, f fixture, rec *recorder, conv chat.Conversation, h *delivery.Hub) *fakeConn {
	t.Helper()
	u1 := attachUser(t, h, f, "u1", 1, false, true, true)
	sent := sendSeqsAs(t, st, rec, conv.ID, 1, 1)
	for _, ev := range sent { // routed before the session
		h.Deliver(ev)
	}
	waitSeqs(t, u1, conv.ID, 1)
	u2 := attachUser(t, h, f, "u2", 2, false, true, true)
	if _, err := st.MarkRead(context.Background(), conv.ID, 3, sent[0].Seq); err != nil {
		t.Fatal(err)
	}
	return u2
}

// The entry such a receipt reports may have reached the fan-out before
// the session started, and never come again: the receipt waits GapWait
// for it, then goes out all the same.
func TestAReadReceiptOfAnEntryCommittedBeforeACleanSessionStartedGoesOutAfterTheGapWait(t *testing.T) {
	st, f, rec, conv, h := nodeOfRecord(t)
	u2 := readAfterACleanSessionStarted(t, st, f, rec, conv, h)
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

// A resync (here: an entry of a group the session had not heard it
// joined) re-reads the stream's position, which says nothing of an entry
// still to be relayed: a receipt waiting at a clean session's start still
// goes out after the gap wait.
func TestAReceiptWaitingAtACleanSessionsStartGoesOutThoughAResyncCameMeanwhile(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	const gapWait = 200 * time.Millisecond
	h := startHub(t, f.sessions, delivery.Options{GapWait: gapWait})
	u2 := readAfterACleanSessionStarted(t, st, f, rec, conv, h)
	online := true
	for _, ev := range append(rec.take(), chat.Event{Type: chat.EventPresence, UserID: 1, Online: &online, To: []int64{2}}) {
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the presence routed after the receipt", func() bool {
		return events(u2, chat.EventPresence, 0) == 1
	})
	other, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "other", Members: []int64{2}})
	if err != nil {
		t.Fatal(err)
	}
	rec.take() // its creation is relayed late: the session meets its entry first
	for _, ev := range sendSeqsAs(t, st, rec, other.ID, 1, 1) {
		h.Deliver(ev)
	}
	waitSeqs(t, u2, other.ID, 1) // read back by the resync
	testkit.WaitFor(t, 10*gapWait+2*time.Second, "the receipt to reach the client", func() bool {
		return events(u2, chat.EventReadUpdated, conv.ID) == 1
	})
}
