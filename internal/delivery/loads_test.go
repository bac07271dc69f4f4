package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// readThenHold reads the members of conv the first time they are asked
// for, then holds the answer until released: the load has read what
// PostgreSQL held then, and what commits meanwhile is not in it.
type readThenHold struct {
	chat.DeliveryStore
	conv    int64
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newReadThenHold(st chat.DeliveryStore, conv int64) *readThenHold {
	return &readThenHold{DeliveryStore: st, conv: conv, entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *readThenHold) Members(ctx context.Context, conv int64) (chat.Routing, error) {
	r, err := s.DeliveryStore.Members(ctx, conv)
	if conv != s.conv {
		return r, err
	}
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return chat.Routing{}, ctx.Err()
		}
	}
	return r, err
}

func (s *readThenHold) waitEntered(t *testing.T) {
	t.Helper()
	testkit.Receive(t, s.entered, 10*time.Second, "the members were never loaded")
}

// A member.added dropped while the fan-out was loading the members of its
// conversation (an overflow, which Resync stands for) must not leave a
// member index without the new member once that load, which read the
// members before the join, comes back: the index is emptied at an
// overflow so that no dropped membership change leaves it wrong.
func TestAMemberAddedWhileTheHubDroppedEventsDuringAMembersLoadGetsTheConversationsMessages(t *testing.T) {
	f := setup(t)
	conv, err := f.svc.CreateGroup(context.Background(), 1, "other", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	otherConv := conv.ID
	st := newReadThenHold(f.sessions, f.conv.ID)
	h := startHub(t, st, delivery.Options{})
	u2 := attach(t, h, f, "u2", false, true)
	h.Publish(sendAs(t, f, f.conv.ID, 1)) // its members load: users 1 and 2
	st.waitEntered(t)

	joinEvents(t, f, 3) // committed; its events are lost to an overflow
	h.Resync()
	// An event of another conversation goes past the load: once user 2
	// has it (routed, or caught up at the resync), the fan-out has
	// handled the overflow.
	other := sendAs(t, f, otherConv, 1)
	h.Publish(other)
	waitEntry(t, u2, otherConv, other.Seq)
	u3 := attachUser(t, h, f, "u3", 3, false, true, true) // a member already

	close(st.release)
	m := sendAs(t, f, f.conv.ID, 1)
	h.Publish(m)
	waitEntry(t, u2, f.conv.ID, m.Seq)
	waitEntry(t, u3, f.conv.ID, m.Seq)
}

// A conversation.updated that waited behind a load of its conversation's
// members, which read the floors before the settings changed, must not
// leave those floors in the index: closing the history ("joined") raises
// a late member's floor to their join, and a later edit of a message from
// before it reaches them without its body.
func TestASettingsChangeThatWaitedForAMembersLoadStillHidesALateMembersEditBody(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	setHistory(t, f, chat.HistoryAll)
	secret := sendAs(t, f, f.conv.ID, 1)
	joinEvents(t, f, 3) // user 3 joins after the secret
	st := newReadThenHold(f.sessions, f.conv.ID)
	h := startHub(t, st, delivery.Options{})
	u3 := attachUser(t, h, f, "u3", 3, false, true, true)

	first := sendAs(t, f, f.conv.ID, 1)
	h.Publish(first) // its members load, with floors read while the history is open
	st.waitEntered(t)

	updated := setHistory(t, f, chat.HistoryJoined)
	got, err := f.sessions.SinceMany(ctx, 1, []chat.Range{{ConversationID: f.conv.ID, After: updated.Seq - 1}}, 1)
	if err != nil || len(got[f.conv.ID]) != 1 {
		t.Fatalf("read the settings change's entry: %v, %v", got, err)
	}
	h.Publish(chat.EntryEvent(got[f.conv.ID][0]), updated)
	ed := editAs(t, f, 1, secret.Seq, "closed")
	h.Publish(ed)
	close(st.release)
	waitEntry(t, u3, f.conv.ID, first.Seq)
	if got := body(waitEntry(t, u3, f.conv.ID, ed.Seq)); got != "" {
		t.Fatalf("user 3, added after seq %d, got its edit with body %q after the history closed, want it empty", secret.Seq, got)
	}
}
