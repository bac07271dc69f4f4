package delivery_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// recorder keeps what a store publishes, for the test to hand on when it
// likes: as another node's relay would, late.
type recorder struct {
	mu  sync.Mutex
	evs []chat.Event
}

func (r *recorder) Publish(evs ...chat.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, evs...)
}

func (r *recorder) take() []chat.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

// typings counts the typing events c was sent for conv; one that carries
// its seq to the client is an error.
func typings(t *testing.T, c *fakeConn, conv int64) int {
	t.Helper()
	n := 0
	for _, p := range c.packets() {
		var ev map[string]any
		if json.Unmarshal(p.Payload, &ev) == nil && ev["type"] == chat.EventTyping && ev["conversationId"] == float64(conv) {
			if _, ok := ev["seq"]; ok {
				t.Errorf("a typing event sent to a client carries its seq: %s", p.Payload)
			}
			n++
		}
	}
	return n
}

// A member removed on another node stays in this node's member index until
// the relay brings the removal; a typing indicator, which skips the
// outbox, can get here first. It must not reach the removed member: a
// session shows a typing indicator only once its stream of the
// conversation has every entry committed before the typist was checked,
// and the removed member's stream cannot, since it never gets the entries
// after the removal. The members who stay see the indicators once the
// removal is relayed.
func TestATypingIndicatorThatOvertakesAMembersRemovalDoesNotReachThem(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	st, pool := pgtest.NewStore(t, chat.DefaultLimits(), store.WithPublisher(rec))
	sessions := store.NewSessions(pool)
	conv, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "typing", Members: []int64{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, sessions, delivery.Options{})
	f := fixture{pool: pool, st: st, sessions: sessions}
	stays := attachUser(t, h, f, "stays", 2, false, true, true)
	removed := attachUser(t, h, f, "removed", 3, false, true, true)
	rec.take() // conversation.created: the sessions read it from PostgreSQL

	typing := func() chat.Event {
		t.Helper()
		if err := st.Typing(ctx, conv.ID, 1); err != nil {
			t.Fatal(err)
		}
		evs := rec.take()
		if len(evs) != 1 || evs[0].Type != chat.EventTyping {
			t.Fatalf("typing published %+v", evs)
		}
		return evs[0]
	}
	h.Deliver(typing())
	testkit.WaitFor(t, 5*time.Second, "both members shown the first indicator", func() bool {
		return typings(t, stays, conv.ID) == 1 && typings(t, removed, conv.ID) == 1
	})

	// Removed elsewhere: the removal is in PostgreSQL, not yet here.
	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	removal := rec.take()
	h.Deliver(typing())
	for _, ev := range removal { // relayed after the indicator
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the removal delivered", func() bool {
		for _, p := range removed.packets() {
			var ev chat.Event
			if json.Unmarshal(p.Payload, &ev) == nil && ev.Type == chat.EventMemberRemoved {
				return true
			}
		}
		return false
	})
	h.Deliver(typing())
	testkit.WaitFor(t, 5*time.Second, "the member who stays shown the indicator after the removal", func() bool {
		return typings(t, stays, conv.ID) >= 2
	})
	if n := typings(t, removed, conv.ID); n != 1 {
		t.Fatalf("the removed member was shown %d typing indicators, want only the one from before the removal", n)
	}
}
