package presence_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// refusing is the presence store of a node whose online claims of user 1
// fail while down is set: the claim a revived node makes of all its
// users fails, a claim of another user alone does not.
type refusing struct {
	beating
	down    atomic.Bool
	refused atomic.Int64
}

func (r *refusing) ClaimOnline(ctx context.Context, users []int64) ([]int64, error) {
	if r.down.Load() && slices.Contains(users, 1) {
		r.refused.Add(1)
		return nil, errors.New("database out of reach")
	}
	return r.stored.ClaimOnline(ctx, users)
}

// TestAUserConnectingWhileARevivalIsOwedIsAnnouncedOnlineOnce: node a was
// taken for dead (reaped, its users announced offline), and its claim
// that they are online again failed. Meanwhile user 2 connects to it for
// the first time and user 3 leaves and comes back, each announced online
// by its own claim (user 3's departure is not announced: the reaper
// announced it offline already). The revival, announced once its claim
// goes through, is of the users it owed it to, not of them: they were
// told twice.
func TestAUserConnectingWhileARevivalIsOwedIsAnnouncedOnlineOnce(t *testing.T) {
	pool, pr, a, onA, tr := severableNodeA(t, 100*time.Millisecond)
	connect := connector(t, store.NewSessions(pool), tr)
	events := func(user int64, n int, what string) {
		t.Helper()
		testkit.WaitFor(t, 5*time.Second, what, func() bool { return len(onA.about(user)) >= n })
	}
	connect("one", "a/1/1", 1)
	connect("three", "a/3/1", 3)
	events(1, 1, "user 1 announced online")
	events(3, 1, "user 3 announced online")

	a.down.Store(true)
	// Another node takes a for dead, as its reaper does, and announces
	// its users offline.
	reap(t, pool, pr, 1, 3)
	testkit.WaitFor(t, 5*time.Second, "node a's revival claim to fail", func() bool { return a.refused.Load() > 0 })

	tr.Disconnected("three", 3)
	testkit.WaitFor(t, 5*time.Second, "node a's offline claim of user 3 after its grace", func() bool { return a.done.Load() >= 1 })
	connect("three", "a/3/2", 3)
	connect("two", "a/2/1", 2)
	events(3, 2, "user 3 announced online again")
	events(2, 1, "user 2 announced online")

	a.down.Store(false)
	events(1, 2, "user 1 announced online again (the revival)")
	beats := a.beats.Load()
	testkit.WaitFor(t, 5*time.Second, "two more heartbeats", func() bool { return a.beats.Load() >= beats+2 })
	if got := states(onA.about(2)); got != "online" {
		t.Errorf("user 2, connected after the revival claim failed, announced %s; want online once", got)
	}
	if got := states(onA.about(3)); got != "online online" {
		t.Errorf("user 3, back after the revival claim failed, announced %s; want online online (its offline was the reaper's)", got)
	}
}

// connector opens a session of client for user, with token, and tells tr
// it connected.
func connector(t *testing.T, ss *store.Sessions, tr *presence.Tracker) func(client, token string, user int64) {
	return func(client, token string, user int64) {
		t.Helper()
		if _, err := ss.Open(context.Background(), client, token, user, true, false, time.Hour); err != nil {
			t.Fatal(err)
		}
		tr.Connected(client, token, user)
	}
}

// reap does to node a what a node taking it for dead does: its flags
// cleared (ReapNodes, every one of users' among them) and users claimed
// offline, for its reaper to announce.
func reap(t *testing.T, pool *pgxpool.Pool, pr *store.Presence, users ...int64) {
	t.Helper()
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "node a reaped and its users claimed offline", func() bool {
		if _, err := pool.Exec(ctx, `UPDATE chat_node SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'a'`); err != nil {
			t.Fatal(err)
		}
		gone, err := pr.ReapNodes(ctx, "r")
		if err != nil || slices.ContainsFunc(users, func(u int64) bool { return gone[u].IsZero() }) {
			return false
		}
		claimed, err := pr.ClaimOffline(ctx, "r", users)
		return err == nil && len(claimed) == len(users)
	})
}

// states lists presence events as online or offline, in order.
func states(evs []chat.Event) string {
	var out []string
	for _, ev := range evs {
		if *ev.Online {
			out = append(out, "online")
		} else {
			out = append(out, "offline")
		}
	}
	return strings.Join(out, " ")
}

// severed is refusing whose connection writes fail too while cut is set.
type severed struct {
	refusing
	cut atomic.Bool
}

func (s *severed) SetConnections(ctx context.Context, node string, connected, tokens, disconnected []string, seen []int64) error {
	if s.cut.Load() {
		return errors.New("database out of reach")
	}
	return s.refusing.SetConnections(ctx, node, connected, tokens, disconnected, seen)
}

// TestAUserBackWithinTheGraceAfterARevivalIsAnnouncedOnlineAgain: node
// a, out of its database's reach, could not record that user 3 left; it
// was taken for dead, and its reaper announced user 3 offline with the
// others. User 3 comes back to a within a's grace, after a found itself
// revived (its claim of the others failing). Its watchers, told it went
// offline, must be told it is online again.
func TestAUserBackWithinTheGraceAfterARevivalIsAnnouncedOnlineAgain(t *testing.T) {
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	pr := store.NewPresence(pool, presence.TTL(200*time.Millisecond))
	a := &severed{refusing: refusing{beating: beating{stored: pr}}}
	var onA published
	tr := startTracker(t, presence.Config{NodeID: "a", Store: a, Hub: nopHub{}, Heartbeat: 200 * time.Millisecond,
		Grace: 3 * time.Second, Publish: onA.add})
	connect := connector(t, ss, tr)
	connect("one", "a/1/1", 1)
	connect("three", "a/3/1", 3)
	testkit.WaitFor(t, 5*time.Second, "users 1 and 3 announced online", func() bool {
		return len(onA.about(1)) == 1 && len(onA.about(3)) == 1
	})

	a.cut.Store(true)
	a.down.Store(true)
	tr.Disconnected("three", 3)
	reap(t, pool, pr, 1, 3)
	testkit.WaitFor(t, 5*time.Second, "node a's revival claim to fail", func() bool { return a.refused.Load() > 0 })
	connect("three", "a/3/2", 3)
	a.cut.Store(false)
	a.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "user 1 announced online again (the revival)", func() bool { return len(onA.about(1)) >= 2 })
	beats := a.beats.Load()
	testkit.WaitFor(t, 5*time.Second, "two more heartbeats", func() bool { return a.beats.Load() >= beats+2 })
	if got := states(onA.about(3)); got != "online online" {
		t.Errorf("user 3, announced offline by the reaper and back within node a's grace, announced %s; want online online", got)
	}
}

// stalled is severed whose heartbeats fail too while stalled is set,
// counting them.
type stalled struct {
	severed
	stalled atomic.Bool
	missed  atomic.Int64
}

func (s *stalled) Heartbeat(ctx context.Context, node string) (bool, error) {
	if s.stalled.Load() {
		s.missed.Add(1)
		return false, errors.New("database out of reach")
	}
	return s.severed.Heartbeat(ctx, node)
}

// TestAUserConnectingBeforeARevivalIsReportedIsAnnouncedOnlineOnce: node
// a lost its database; another node took it for dead and announced its
// users offline. User 2 connects to a meanwhile, and a, its database
// back, announces them online before its next heartbeat finds a
// revived. The revival is owed to the users the reaper announced
// offline, not to user 2, whose own claim came after the reaper's.
func TestAUserConnectingBeforeARevivalIsReportedIsAnnouncedOnlineOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	pr := store.NewPresence(pool, presence.TTL(200*time.Millisecond))
	a := &stalled{severed: severed{refusing: refusing{beating: beating{stored: pr}}}}
	var onA published
	tr := startTracker(t, presence.Config{NodeID: "a", Store: a, Hub: nopHub{}, Heartbeat: 200 * time.Millisecond,
		Grace: 100 * time.Millisecond, Publish: onA.add})
	connect := connector(t, ss, tr)
	connect("one", "a/1/1", 1)
	testkit.WaitFor(t, 5*time.Second, "user 1 announced online", func() bool { return len(onA.about(1)) == 1 })

	a.stalled.Store(true)
	a.cut.Store(true)
	testkit.WaitFor(t, 5*time.Second, "node a's heartbeats to fail for its TTL", func() bool { return a.missed.Load() >= 3 })
	reap(t, pool, pr, 1)
	connect("two", "a/2/1", 2)
	a.cut.Store(false)
	testkit.WaitFor(t, 5*time.Second, "user 2 announced online", func() bool { return len(onA.about(2)) >= 1 })
	a.stalled.Store(false)
	testkit.WaitFor(t, 5*time.Second, "user 1 announced online again (the revival)", func() bool { return len(onA.about(1)) >= 2 })
	beats := a.beats.Load()
	testkit.WaitFor(t, 5*time.Second, "two more heartbeats", func() bool { return a.beats.Load() >= beats+2 })
	if got := states(onA.about(2)); got != "online" {
		t.Errorf("user 2, connected while node a was taken for dead, announced %s; want online once", got)
	}
	if got := states(onA.about(1)); got != "online online" {
		t.Errorf("user 1, announced offline by the reaper, announced %s by node a; want online online", got)
	}
}
