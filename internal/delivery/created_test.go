package delivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// cursorReads is a delivery store that counts the reads of a session's
// conversations (Cursors: when it starts, and at every resync).
type cursorReads struct {
	chat.DeliveryStore
	n atomic.Int64
}

func (s *cursorReads) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	s.n.Add(1)
	return s.DeliveryStore.Cursors(ctx, clientID, userID, stored)
}

// A group created while one of its members is online starts their
// session's stream at its conversation.created, whose seq is 0 (nothing
// committed yet, nor read by the session before): the session does not
// re-read every conversation of the user for it, and the group's first
// message reaches it as any other.
func TestAGroupCreatedWhileItsMemberIsOnlineStartsTheirStreamWithoutRereadingTheirConversations(t *testing.T) {
	st, f, rec, _, _ := nodeOfRecord(t)
	reads := &cursorReads{DeliveryStore: f.sessions}
	h := startHub(t, reads, delivery.Options{})
	u3 := attachUser(t, h, f, "u3", 3, false, true, true)
	before := reads.n.Load()
	g, _, err := st.CreateGroup(context.Background(), chat.GroupRequest{CreatorID: 1, Title: "new", Members: []int64{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range append(rec.take(), sendSeqsAs(t, st, rec, g.ID, 1, 1)...) {
		h.Deliver(ev)
	}
	waitSeqs(t, u3, g.ID, 1)
	testkit.WaitFor(t, 5*time.Second, "conversation.created", func() bool {
		return events(u3, chat.EventConversationCreated, g.ID) == 1
	})
	if n := reads.n.Load() - before; n != 0 {
		t.Fatalf("the group's creation made the session read its conversations %d times", n)
	}
}
