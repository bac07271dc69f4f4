package presence_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// membershipEvents keeps the member.added and member.removed events a
// store commits, in commit order.
type membershipEvents struct {
	mu  sync.Mutex
	evs []chat.Event
}

func (m *membershipEvents) Publish(evs ...chat.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		if ev.Type == chat.EventMemberAdded || ev.Type == chat.EventMemberRemoved {
			m.evs = append(m.evs, ev)
		}
	}
}

func (m *membershipEvents) last(t *testing.T, typ string, user int64) chat.Event {
	t.Helper()
	var ev chat.Event
	testkit.WaitFor(t, 5*time.Second, typ+" of the user", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, e := range m.evs {
			if e.Type == typ && e.UserID == user {
				ev = e
			}
		}
		return ev.Type != ""
	})
	return ev
}

// hiddenTo reports whether pub holds a hidden presence of subject
// addressed to watcher.
func hiddenTo(pub *published, subject, watcher int64) bool {
	for _, e := range pub.about(subject) {
		if e.Hidden && slices.Contains(e.To, watcher) {
			return true
		}
	}
	return false
}

// TestARemovalsHiddenThatComesAfterALaterJoinsStateIsNotPushed: users 1
// and 2 share group d alone; 2 is removed from it (its member.removed
// says each may no longer see the other's presence), then added to
// group c, which 1 is in (its member.added says they may again). This
// node gets the two events the other way round (through two Kafka
// partitions): the join's first, whose state it pushes, then the
// removal's. Each must go on seeing the other: a hidden pushed now would
// leave them showing hidden while they share c, and nothing after it
// would say otherwise. A removal whose pair shares nothing still pushes
// hidden.
func TestARemovalsHiddenThatComesAfterALaterJoinsStateIsNotPushed(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rec := &membershipEvents{}
	st := store.New(pool, chat.DefaultLimits(), store.WithPublisher(rec))
	d, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "d", Members: []int64{2}})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveMember(ctx, d.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	removed := rec.last(t, chat.EventMemberRemoved, 2)
	if !slices.Contains(removed.PresenceHiddenFrom, 1) {
		t.Fatalf("member.removed hides user 2 from %v, want user 1", removed.PresenceHiddenFrom)
	}
	if _, _, err := st.AddMember(ctx, c.ID, 1, 2, ""); err != nil {
		t.Fatal(err)
	}
	added := rec.last(t, chat.EventMemberAdded, 2)
	if !slices.Contains(added.PresenceShown[2], 1) {
		t.Fatalf("member.added shows %v, want user 2's presence to user 1", added.PresenceShown)
	}

	tr, pub, _ := startTrackerWithTwo(t, pool, 100*time.Millisecond)
	testkit.WaitFor(t, 5*time.Second, "user 2 announced online to user 1", func() bool { return len(pub.about(2)) >= 1 })
	before := len(pub.about(2))
	tr.SharingStarted(added)
	testkit.WaitFor(t, 5*time.Second, "user 2's state given to user 1 for the join", func() bool { return len(pub.about(2)) > before })

	tr.SharingEnded(removed)
	testkit.Never(t, time.Second, "user 2 told hidden to user 1, who sees them in group c", func() bool {
		return hiddenTo(pub, 2, 1) || hiddenTo(pub, 1, 2)
	})

	// Removed from c too, they share nothing: that removal hides.
	if err := st.RemoveMember(ctx, c.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	tr.SharingEnded(rec.last(t, chat.EventMemberRemoved, 2))
	testkit.WaitFor(t, 5*time.Second, "user 2 told hidden to user 1 once they share nothing", func() bool {
		return hiddenTo(pub, 2, 1) && hiddenTo(pub, 1, 2)
	})
}
