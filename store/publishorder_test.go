package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// Two writes of one user's profile.updated (a profile change, a block, an
// unblock) wait for each other's commit (the profile's lock), and each is
// published after its commit by its caller's goroutine. Held between its
// commit and its publishing, the first write's events reached the
// publisher after the second's, with an equal updatedAt: a client, which
// applies a profile.updated unless it is older than the one it holds,
// kept the first write's view. Here the first write's publishing is held
// until the second committed (and, if it does not wait, published):
// each user's client ends with the view of the write that committed
// last.
func TestAUsersProfileEventsArePublishedInTheOrderTheirWritesCommitted(t *testing.T) {
	t.Parallel()
	const blocker, blocked, other = 1, 2, 3
	setAbout := func(about string) func(context.Context, *store.Store) error {
		return func(ctx context.Context, st *store.Store) error {
			_, err := st.SetProfile(ctx, blocker, chat.ProfileUpdate{DisplayName: "Ann", About: &about}, 100)
			return err
		}
	}
	block := func(ctx context.Context, st *store.Store) error { return st.Block(ctx, blocker, blocked, 100) }
	unblock := func(ctx context.Context, st *store.Store) error { return st.Unblock(ctx, blocker, blocked, 100) }
	for _, c := range []struct {
		name          string
		blockedBefore bool
		first, second func(context.Context, *store.Store) error
		// the about each user's client shows at the end
		blockedSees, otherSees string
	}{
		{name: "a profile change, then a block", first: setAbout("runner"), second: block, blockedSees: "", otherSees: "runner"},
		{name: "a block, then an unblock", first: block, second: unblock, blockedSees: "climber", otherSees: "climber"},
		{name: "a profile change while blocked, then an unblock", blockedBefore: true, first: setAbout("runner"), second: unblock,
			blockedSees: "runner", otherSees: "runner"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			pub := newHeldPublisher(chat.EventProfileUpdated)
			st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(pub))
			mustGroup(t, st, blocker, blocked, other)
			if err := setAbout("climber")(ctx, st); err != nil {
				t.Fatal(err)
			}
			if c.blockedBefore {
				if err := block(ctx, st); err != nil {
					t.Fatal(err)
				}
			}
			evs := publishedWhileHeld(t, pub, pool, `SELECT count(*) FROM outbox WHERE type = 'profile.updated'`,
				func() error { return c.first(ctx, st) }, func() error { return c.second(ctx, st) })
			views := clientViews(evs)
			for _, want := range []struct {
				user  int64
				about string
			}{{blocked, c.blockedSees}, {other, c.otherSees}} {
				got := "(no profile.updated)"
				if v, ok := views[want.user]; ok {
					got = *v.About
				}
				if got != want.about {
					t.Errorf("user %d's client shows the about %q, want %q; profile.updated in the order published: %s",
						want.user, got, want.about, describe(evs))
				}
			}
		})
	}
}

// clientViews is what each user's client holds after evs, applied as
// docs/events.md says: a profile.updated unless its updatedAt is older
// than the one held.
func clientViews(evs []chat.Event) map[int64]chat.Event {
	held := map[int64]chat.Event{}
	for _, ev := range evs {
		for _, u := range ev.To {
			if h, ok := held[u]; !ok || !ev.UpdatedAt.Before(*h.UpdatedAt) {
				held[u] = ev
			}
		}
	}
	return held
}

// Two changes of one group wait for each other's commit (the
// conversation's lock), and each was published after its commit by its
// caller's goroutine. Held between its commit and its publishing, the
// first change's conversation.updated reached the fan-out after the
// second's; a session sends a conversation's event once its stream has
// the entries up to its seq, which both had by then, so the members'
// clients got the first change's settings last, and conversation.updated
// carries every setting, applied as it comes (the web client's
// updateConversation): they showed the first title.
func TestAGroupsConversationUpdatedArePublishedInTheOrderTheirChangesCommitted(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pub := newHeldPublisher(chat.EventConversationUpdated)
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(pub))
	conv := mustGroup(t, st, 1, 2)
	retitle := func(title string) func() error {
		return func() error {
			_, err := st.UpdateGroup(ctx, conv.ID, 1, chat.GroupUpdate{Title: &title})
			return err
		}
	}
	evs := publishedWhileHeld(t, pub, pool, `SELECT count(*) FROM outbox WHERE type = 'conversation.updated'`, retitle("first"), retitle("second"))
	if len(evs) != 2 || *evs[1].Title != "second" {
		t.Fatalf("conversation.updated in the order published: %s, want the title first, then second", describe(evs))
	}
}

// publishedWhileHeld runs first with its publishing held, then second
// until it committed (rowsSQL counts one more outbox row for each) and,
// unless it waits for the first, published; then lets the first publish.
// It answers the events published from first's on, in order.
func publishedWhileHeld(t *testing.T, pub *heldPublisher, pool *pgxpool.Pool, rowsSQL string, first, second func() error) []chat.Event {
	t.Helper()
	seen := len(pub.rec.events())
	rows := queryInt(t, pool, rowsSQL)
	pub.armed.Store(true)
	firstDone, secondDone := make(chan error, 1), make(chan error, 1)
	go func() { firstDone <- first() }()
	select {
	case <-pub.held:
	case err := <-firstDone:
		t.Fatalf("the first write returned (%v) without publishing", err)
	}
	go func() { secondDone <- second() }()
	waitFor(t, "the second write's commit", func() bool { return queryInt(t, pool, rowsSQL) == rows+2 })
	// Published now, unless it waits for the first write's turn.
	for deadline := time.Now().Add(time.Second); len(pub.rec.events()) == seen && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(pub.release)
	for _, done := range []chan error{firstDone, secondDone} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	return pub.rec.events()[seen:]
}

// heldPublisher holds the first Publish after armed is set until release
// is closed (held is closed when it holds it), and passes every call on
// to rec.
type heldPublisher struct {
	rec     *publishRecorder
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

// newHeldPublisher records the events of types.
func newHeldPublisher(types ...string) *heldPublisher {
	return &heldPublisher{rec: &publishRecorder{types: types}, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldPublisher) Publish(evs ...chat.Event) {
	if h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.release
	}
	h.rec.Publish(evs...)
}
