package presence_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// offlineClaims is severed counting the offline claims that returned.
type offlineClaims struct {
	severed
	done atomic.Int64
}

func (o *offlineClaims) ClaimOffline(ctx context.Context, node string, users []int64) (map[int64]time.Time, error) {
	defer o.done.Add(1)
	return o.severed.ClaimOffline(ctx, node, users)
}

// severableNodeA starts node a's tracker on a fresh database whose
// presence writes the test can cut (a.cut, a.down) and whose offline claims
// it counts (a.done); onA is what a announces.
func severableNodeA(t *testing.T, grace time.Duration) (*pgxpool.Pool, *store.Presence, *offlineClaims, *published, *presence.Tracker) {
	t.Helper()
	pool := pgtest.NewPool(t)
	pr := store.NewPresence(pool, presence.TTL(200*time.Millisecond))
	a := &offlineClaims{severed: severed{refusing: refusing{beating: beating{stored: pr}}}}
	onA := &published{}
	tr := startTracker(t, presence.Config{NodeID: "a", Store: a, Hub: nopHub{}, Heartbeat: 200 * time.Millisecond,
		Grace: grace, Publish: onA.add})
	return pool, pr, a, onA, tr
}

// TestAUserTheReaperAnnouncedOfflineIsNotAnnouncedOfflineAgainAfterTheGrace:
// node a could not record that user 3 left (its connection write failed)
// and was taken for dead; the node that reaped it announced user 3
// offline. When a's grace of user 3 ends, its watchers were told already:
// a announces nothing more.
func TestAUserTheReaperAnnouncedOfflineIsNotAnnouncedOfflineAgainAfterTheGrace(t *testing.T) {
	pool, pr, a, onA, tr := severableNodeA(t, 2*time.Second)
	connector(t, store.NewSessions(pool), tr)("three", "a/3/1", 3)
	testkit.WaitFor(t, 5*time.Second, "user 3 announced online", func() bool { return len(onA.about(3)) == 1 })

	a.cut.Store(true)
	t.Cleanup(func() { a.cut.Store(false) }) // else Close retries the write for ever
	tr.Disconnected("three", 3)
	reap(t, pool, pr, 3)
	testkit.WaitFor(t, 5*time.Second, "node a's offline claim of user 3 after its grace", func() bool { return a.done.Load() >= 1 })
	beats := a.beats.Load()
	testkit.WaitFor(t, 5*time.Second, "two more heartbeats", func() bool { return a.beats.Load() >= beats+2 })
	if got := states(onA.about(3)); got != "online" {
		t.Errorf("user 3, announced offline by the node that reaped a, announced %s by a; want online alone", got)
	}
}
