package delivery_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// In a busy group whose messages another node writes, every read receipt
// committed here is a little ahead of the entries the relay has brought:
// its lastSeq is the newest entry, still on its way. Each entry comes
// well within GapWait of the receipt that waits for it, so no receipt
// costs a catch-up query: the session waits for the entries as they come,
// and reads PostgreSQL only once they stop coming.
func TestReadReceiptsRunningAheadOfABusyGroupsRelayedEntriesCostNoCatchUpQuery(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	counted := &countedSince{DeliveryStore: f.sessions}
	const gapWait = 300 * time.Millisecond
	h := startHub(t, counted, delivery.Options{GapWait: gapWait})
	u2 := attachUser(t, h, f, "u2", 2, false, true, true)
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) { // warms the member index
		h.Deliver(ev)
	}
	waitSeqs(t, u2, conv.ID, 1)

	const n = 40 // an entry every 20ms: longer than GapWait, twice over
	before := counted.n.Load()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last chat.Event
	for i := range n {
		e := sendSeqsAs(t, st, rec, conv.ID, 1, 1)[0] // elsewhere
		if _, err := st.MarkRead(ctx, conv.ID, 3, e.Seq); err != nil {
			t.Fatal(err)
		}
		for _, r := range rec.take() { // here, at once
			h.Deliver(r)
		}
		if i > 0 {
			h.Deliver(last) // the entry the receipt before waits for, relayed
		}
		last = e
		<-tick.C
	}
	h.Deliver(last)
	testkit.WaitFor(t, 5*time.Second, "every entry and receipt to reach the client", func() bool {
		return len(u2.seqs(conv.ID)) == n+1 && events(u2, chat.EventReadUpdated, conv.ID) == n
	})
	if q := counted.n.Load() - before; q != 0 {
		t.Errorf("%d catch-up queries for entries that all came live within GapWait of their receipt", q)
	}
	var got []int64
	for _, p := range u2.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.Type == chat.EventReadUpdated {
			got = append(got, ev.Seq)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("read.updated seqs in the order sent: %v, want ascending", got)
	}
}

// A read receipt that finds the session's waiting events at QueueSize is
// dropped: nothing waits for its entries then, and the session must not
// keep its stream waiting for them and then read PostgreSQL for them.
func TestAReceiptDroppedForAFullQueueOfWaitingEventsCostsNoCatchUpQuery(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	counted := &countedSince{DeliveryStore: f.sessions}
	const gapWait, qs = 200 * time.Millisecond, 4
	m := delivery.NewMetrics(nil)
	h := startHub(t, counted, delivery.Options{GapWait: gapWait, QueueSize: qs, Metrics: m})
	u2 := attachUser(t, h, f, "u2", 2, false, true, true)
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) { // warms the member index
		h.Deliver(ev)
	}
	waitSeqs(t, u2, conv.ID, 1)

	var entries, receipts []chat.Event
	for range qs + 1 { // each entry elsewhere, then a receipt here that waits for it
		entries = append(entries, sendSeqsAs(t, st, rec, conv.ID, 1, 1)...)
		if _, err := st.MarkRead(ctx, conv.ID, 3, entries[len(entries)-1].Seq); err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, rec.take()...)
	}
	before := counted.n.Load()
	// One at a time, each taken before the next (the mailbox never holds
	// QueueSize): the last receipt finds QueueSize waiting.
	online := true
	for i, r := range receipts {
		h.Deliver(r)
		h.Deliver(chat.Event{Type: chat.EventPresence, UserID: 1, Online: &online, To: []int64{2}})
		testkit.WaitFor(t, 5*time.Second, "the presence after the receipt", func() bool {
			return events(u2, chat.EventPresence, 0) == i+1
		})
	}
	for i, e := range entries[:qs] {
		h.Deliver(e)
		waitSeqs(t, u2, conv.ID, 2+i)
	}
	testkit.WaitFor(t, 5*time.Second, "the receipts that waited to go out", func() bool {
		return events(u2, chat.EventReadUpdated, conv.ID) == qs
	})
	testkit.Never(t, 2*gapWait, "a catch-up query for the dropped receipt's entry", func() bool {
		return counted.n.Load() > before
	})
	// Operators see what was lost: a live notification is not caught up.
	if n := testutil.ToFloat64(m.EventsDropped); n != 1 {
		t.Errorf("chat_delivery_events_dropped_total = %v, want 1 (the receipt past QueueSize)", n)
	}
}
