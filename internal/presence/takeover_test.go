package presence_test

import (
	"context"
	"errors"
	"sync"
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

// stored is store.Presence under a name that does not hide its Presence
// method once embedded.
type stored = store.Presence

// unreachable is the presence store of a node whose connection writes
// fail while down is set (its database out of its reach), counting them.
type unreachable struct {
	*stored
	down          atomic.Bool
	failed, wrote atomic.Int64
}

func (u *unreachable) SetConnections(ctx context.Context, node string, connected, tokens, disconnected []string, seen []int64) error {
	if u.down.Load() {
		u.failed.Add(1)
		return errors.New("database out of reach")
	}
	err := u.stored.SetConnections(ctx, node, connected, tokens, disconnected, seen)
	if err == nil {
		u.wrote.Add(1)
	}
	return err
}

type nopHub struct{}

func (nopHub) Publish(...chat.Event) {}

// TestARetriedConnectedWriteLeavesASessionTakenOverElsewhereThere: node
// a cannot record a device's connection (its write fails, and is retried
// a second later); meanwhile the device reconnects to node b, which
// takes the session over and records it. Node a's retried write must
// leave the session b's: it took it back, and the old connection's end
// on a would then clear it, the user counting offline while connected
// to b (until b's next heartbeat repaired it).
func TestARetriedConnectedWriteLeavesASessionTakenOverElsewhereThere(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	pr := store.NewPresence(pool, presence.TTL(5*time.Second))
	a := &unreachable{stored: pr}
	a.down.Store(true)
	tr, err := presence.New(presence.Config{NodeID: "a", Store: a, Hub: nopHub{}, Heartbeat: time.Hour, NoPush: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close(context.Background()) })

	if _, err := ss.Open(ctx, "phone", "a/p/1", 1, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	tr.Connected("phone", "a/p/1", 1)
	testkit.WaitFor(t, 5*time.Second, "node a's connection write to fail", func() bool { return a.failed.Load() > 0 })
	// The device reconnects to node b, which records its connection.
	if _, err := ss.Open(ctx, "phone", "b/p/1", 1, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Heartbeat(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := pr.SetConnections(ctx, "b", []string{"phone"}, []string{"b/p/1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	a.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "node a's connection write to be retried", func() bool { return a.wrote.Load() > 0 })
	var node string
	if err := pool.QueryRow(ctx, `SELECT node_id FROM chat_session WHERE client_id = 'phone'`).Scan(&node); err != nil {
		t.Fatal(err)
	}
	if node != "b" {
		t.Fatalf("the session is held by node %q after node a's retried write, want b (its newer connection's)", node)
	}
}

// published records the presence events a tracker publishes to the
// other nodes.
type published struct {
	mu     sync.Mutex
	events []chat.Event
}

func (p *published) add(ev chat.Event) {
	p.mu.Lock()
	p.events = append(p.events, ev)
	p.mu.Unlock()
}

func (p *published) about(user int64) []chat.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []chat.Event
	for _, ev := range p.events {
		if ev.UserID == user {
			out = append(out, ev)
		}
	}
	return out
}

// startNode starts node's tracker on pool, publishing into pub.
func startNode(t *testing.T, pool *pgxpool.Pool, node string, grace time.Duration, pub *published) *presence.Tracker {
	t.Helper()
	return startTracker(t, presence.Config{NodeID: node, Store: store.NewPresence(pool, presence.TTL(5*time.Second)),
		Hub: nopHub{}, Grace: grace, Heartbeat: 5 * time.Second, Publish: pub.add})
}

// startTracker starts a tracker of cfg until the test ends.
func startTracker(t *testing.T, cfg presence.Config) *presence.Tracker {
	t.Helper()
	tr, err := presence.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	return tr
}

// TestAQuickReconnectToAnotherNodeIsNotAnnouncedOnlineAgain: a device
// announced online on node a loses its connection and reconnects to node
// b within the grace (a phone switching networks behind a load
// balancer). Nobody was told it went offline, so nobody is told it came
// online either: node b announced it online a second time.
func TestAQuickReconnectToAnotherNodeIsNotAnnouncedOnlineAgain(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	var onA, onB published
	a := startNode(t, pool, "a", 3*time.Second, &onA)
	b := startNode(t, pool, "b", 3*time.Second, &onB)

	if _, err := ss.Open(ctx, "phone", "a/p/1", 1, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	a.Connected("phone", "a/p/1", 1)
	testkit.WaitFor(t, 5*time.Second, "node a to announce the phone's user online", func() bool { return len(onA.about(1)) == 1 })
	a.Disconnected("phone", 1)
	testkit.WaitFor(t, 5*time.Second, "node a to record the phone gone", func() bool {
		var held bool
		err := pool.QueryRow(ctx, `SELECT node_id IS NOT NULL FROM chat_session WHERE client_id = 'phone'`).Scan(&held)
		return err == nil && !held
	})
	if _, err := ss.Open(ctx, "phone", "b/p/1", 1, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	b.Connected("phone", "b/p/1", 1)
	testkit.WaitFor(t, 5*time.Second, "node b to record the phone", func() bool {
		var node string
		err := pool.QueryRow(ctx, `SELECT COALESCE(node_id, '') FROM chat_session WHERE client_id = 'phone'`).Scan(&node)
		return err == nil && node == "b"
	})
	// Past node a's grace, and node b's processing of the connect.
	time.Sleep(4 * time.Second)
	if evs := onA.about(1); len(evs) != 1 {
		t.Errorf("node a published %d events about the user, want only the first online: %+v", len(evs), evs)
	}
	if evs := onB.about(1); len(evs) != 0 {
		t.Errorf("node b published %+v about a user who never went offline, want nothing", evs)
	}
	if p, err := b.Presence(ctx, 1); err != nil || !p.Online {
		t.Fatalf("presence after the reconnect: %+v, %v; want online", p, err)
	}
}

// beating is the presence store of a node, counting its heartbeats.
type beating struct {
	*stored
	beats atomic.Int64
}

func (b *beating) Heartbeat(ctx context.Context, node string) (bool, error) {
	revived, err := b.stored.Heartbeat(ctx, node)
	if err == nil {
		b.beats.Add(1)
	}
	return revived, err
}

// TestAHeartbeatLeavesASessionANewerConnectionOpenedElsewhere: node a
// learns of a device's connection after the device reconnected to node
// b, whose flag write is still pending: the session is the newer
// connection's. Node a's heartbeat repair must leave it alone, as a's
// own connection write does: taken, the old connection's end would clear
// it, and until then the session would count as a's.
func TestAHeartbeatLeavesASessionANewerConnectionOpenedElsewhere(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	a := &beating{stored: store.NewPresence(pool, presence.TTL(time.Second))}
	tr := startTracker(t, presence.Config{NodeID: "a", Store: a, Hub: nopHub{}, Heartbeat: 50 * time.Millisecond, NoPush: true})
	for _, token := range []string{"a/p/1", "b/p/1"} {
		if _, err := ss.Open(ctx, "phone", token, 1, true, false, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	tr.Connected("phone", "a/p/1", 1)
	after := a.beats.Load()
	testkit.WaitFor(t, 5*time.Second, "node a's heartbeats after the connect", func() bool { return a.beats.Load() >= after+3 })
	var node string
	if err := pool.QueryRow(ctx, `SELECT COALESCE(node_id, '') FROM chat_session WHERE client_id = 'phone'`).Scan(&node); err != nil {
		t.Fatal(err)
	}
	if node != "" {
		t.Fatalf("the session is held by node %q after node a's heartbeats, want none (node b's newer connection's write pending)", node)
	}
}
