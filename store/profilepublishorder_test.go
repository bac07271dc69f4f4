package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
			pub := &heldPublisher{rec: &publishRecorder{types: []string{chat.EventProfileUpdated}}, held: make(chan struct{}), release: make(chan struct{})}
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
			seen := len(pub.rec.events())
			const rowsSQL = `SELECT count(*) FROM outbox WHERE type = 'profile.updated'`
			rows := queryInt(t, pool, rowsSQL)

			pub.armed.Store(true)
			firstDone, secondDone := make(chan error, 1), make(chan error, 1)
			go func() { firstDone <- c.first(ctx, st) }()
			select {
			case <-pub.held:
			case err := <-firstDone:
				t.Fatalf("the first write returned (%v) without publishing", err)
			}
			go func() { secondDone <- c.second(ctx, st) }()
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

			evs := pub.rec.events()[seen:]
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

// heldPublisher holds the first Publish after armed is set until release
// is closed (held is closed when it holds it), and passes every call on
// to rec.
type heldPublisher struct {
	rec     *publishRecorder
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (h *heldPublisher) Publish(evs ...chat.Event) {
	if h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.release
	}
	h.rec.Publish(evs...)
}
