package presence_test

import (
	"context"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// hubOf delivers a tracker's events into p, as a node's hub would to its
// sessions.
type hubOf struct{ p *published }

func (h hubOf) Publish(evs ...chat.Event) {
	for _, ev := range evs {
		h.p.add(ev)
	}
}

// startTrackerWithTwo starts node a's tracker on pool, its events
// delivered into the published it returns, and connects users 1 and 2 to
// it (clients "one" and "two"); connect connects more.
func startTrackerWithTwo(t *testing.T, pool *pgxpool.Pool, grace time.Duration) (tr *presence.Tracker, pub *published, connect func(client, token string, user int64)) {
	t.Helper()
	pub = &published{}
	tr = startTracker(t, presence.Config{NodeID: "a", Store: store.NewPresence(pool, presence.TTL(5*time.Second)),
		Hub: hubOf{pub}, Grace: grace, Heartbeat: 5 * time.Second, LargeGroup: chat.DefaultLargeGroup})
	connect = connector(t, store.NewSessions(pool), tr)
	connect("one", "a/1/1", 1)
	connect("two", "a/2/1", 2)
	return tr, pub, connect
}

// TestAJoinsPresenceIsNotShownToAUserBlockedBeforeItArrives: user 2 is
// added to user 1's group (its member.added says each may now see the
// other's presence), then user 1 blocks user 2 before this node gets the
// member.added (late, as through Kafka). User 1, connected here, gets
// user 2's state; user 2 gets none of user 1's, who hid it from them.
func TestAJoinsPresenceIsNotShownToAUserBlockedBeforeItArrives(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rec := &membershipEvents{}
	st := store.New(pool, chat.DefaultLimits(), store.WithPublisher(rec))
	g, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddMember(ctx, g.ID, 1, 2, ""); err != nil {
		t.Fatal(err)
	}
	ev := rec.last(t, chat.EventMemberAdded, 2)
	if !slices.Contains(ev.PresenceShown[2], 1) || !slices.Contains(ev.PresenceShown[1], 2) {
		t.Fatalf("member.added shows %v, want 1 and 2 each other's presence", ev.PresenceShown)
	}
	if err := st.Block(ctx, 1, 2, chat.DefaultLargeGroup); err != nil {
		t.Fatal(err)
	}

	tr, pub, _ := startTrackerWithTwo(t, pool, 100*time.Millisecond)
	// User 2's online reaches user 1 (2 did not block 1).
	testkit.WaitFor(t, 5*time.Second, "user 2 announced online to user 1", func() bool { return len(pub.about(2)) >= 1 })
	before := len(pub.about(2))

	tr.SharingStarted(ev)
	testkit.WaitFor(t, 5*time.Second, "user 2's state given to user 1 for the join", func() bool { return len(pub.about(2)) > before })
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range pub.about(1) {
		if slices.Contains(e.To, 2) {
			t.Fatalf("user 2, blocked by user 1 before the join's event came, got user 1's state (online %v, to %v)", *e.Online, e.To)
		}
	}
}
