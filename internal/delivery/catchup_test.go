package delivery_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// countedSince counts the catch-up reads from PostgreSQL.
type countedSince struct {
	chat.DeliveryStore
	n       atomic.Int64
	cursors atomic.Int64 // positions re-read (Cursors), at start and on each resync
}

func (s *countedSince) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	s.cursors.Add(1)
	return s.DeliveryStore.Cursors(ctx, clientID, userID, stored)
}

func (s *countedSince) SinceMany(ctx context.Context, user int64, ranges []chat.Range, perConv int) (map[int64][]chat.Message, error) {
	s.n.Add(1)
	return s.DeliveryStore.SinceMany(ctx, user, ranges, perConv)
}

// Seqs are gapless, but should PostgreSQL's answer to a catch-up skip
// one (a row gone), what it holds after the hole is still delivered, and
// the session does not ask again and again for the missing seq: each
// wake-up of its pump would otherwise cost a query, for ever.
func TestACatchUpAnswerWithAHoleDeliversWhatFollowsItAndDoesNotAskAgain(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	st := &countedSince{DeliveryStore: f.sessions}
	h := startHub(t, st, delivery.Options{RecentPerConv: -1, CursorFlush: 10 * time.Millisecond}) // catch-up reads PostgreSQL
	c := attach(t, h, f, "phone", true, true)
	h.Detach("phone", c)
	var seqs []int64
	for _, ev := range f.send(t, 6) { // while offline
		seqs = append(seqs, ev.Seq)
	}
	hole := seqs[2]
	if _, err := f.pool.Exec(ctx, "DELETE FROM message WHERE conversation_id = $1 AND seq = $2", f.conv.ID, hole); err != nil {
		t.Fatal(err)
	}
	want := slices.Delete(slices.Clone(seqs), 2, 3)
	c2 := attach(t, h, f, "phone", true, true)
	for deadline := time.Now().Add(5 * time.Second); len(c2.seqs(f.conv.ID)) < len(want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("got %v after 5s and %d catch-up reads, want %v (all but the missing seq %d)", c2.seqs(f.conv.ID), st.n.Load(), want, hole)
		}
	}
	if got := c2.seqs(f.conv.ID); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	before := st.n.Load()
	for range 20 { // each wakes the pump
		h.SendDirect("phone", c2, chat.Packet{Topic: "x", Payload: []byte("{}"), QoS: 1})
	}
	testkit.WaitFor(t, 5*time.Second, "the direct publishes written", func() bool { return len(c2.packets()) >= len(want)+20 })
	if n := st.n.Load() - before; n > 1 {
		t.Fatalf("the session read PostgreSQL %d more times after it caught up", n)
	}
}
