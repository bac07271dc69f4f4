package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAConnectionThatMovedNodesStaysCountedWhenItsOldNodeRefreshesAndLetsGo:
// a phone whose connection dropped reconnects, with its client id, through
// the load balancer to node B before node A noticed; A still holds the dead
// connection when its periodic refresh runs, then lets it go. The client
// id is B's since it connected there: A's refresh must not make it A's
// again, or A's removal uncounts the live connection on B and the user
// gets one connection over the cap (and one more at each such move).
func TestAConnectionThatMovedNodesStaysCountedWhenItsOldNodeRefreshesAndLetsGo(t *testing.T) {
	url, _ := redistest.Start(t)
	l := newTestLimiter(t, Config{RedisURL: url})
	ctx := context.Background()
	const user, max = 7, 2
	if !l.AddConn(ctx, user, "phone", "A", max) {
		t.Fatal("the phone's first connection (node A) refused")
	}
	// The phone is back, on node B; A has not noticed its end yet.
	if !l.AddConn(ctx, user, "phone", "B", max) {
		t.Fatal("the phone's reconnection (node B) refused")
	}
	// A's periodic refresh still lists the dead connection, then A lets it go.
	if err := l.RefreshConns(ctx, "A", map[int64][]string{user: {"phone"}}); err != nil {
		t.Fatal(err)
	}
	l.RemoveConn(ctx, user, "phone", "A")

	if !l.AddConn(ctx, user, "laptop", "A", max) {
		t.Fatal("the user's second device refused: the phone on B counted twice")
	}
	if l.AddConn(ctx, user, "tablet", "B", max) {
		t.Fatalf("a third device admitted over a cap of %d: the phone's live connection on B was uncounted by node A", max)
	}
}

// TestRefreshCountsWhatNoNodeHoldsAndWhatExpired: a node's refresh still
// records the connections made while Redis was unreachable (no node
// recorded them) and takes over a client id whose node stopped refreshing
// it (it died), so that they keep counting.
func TestRefreshCountsWhatNoNodeHoldsAndWhatExpired(t *testing.T) {
	url, _ := redistest.Start(t)
	l := newTestLimiter(t, Config{RedisURL: url})
	ctx := context.Background()
	const user, max = 8, 2
	if err := l.RefreshConns(ctx, "A", map[int64][]string{user: {"made-while-down"}}); err != nil {
		t.Fatal(err)
	}
	if !l.AddConn(ctx, user, "second", "B", max) {
		t.Fatal("the user's second device refused")
	}
	if l.AddConn(ctx, user, "third", "B", max) {
		t.Fatal("a connection recorded by a refresh alone does not count")
	}
	// "second" stops counting on B (its node died: its score ran out).
	keys := l.connKeys(user)
	if err := l.rdb.ZAdd(ctx, keys[0], redis.Z{Score: 0, Member: "second"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.RefreshConns(ctx, "A", map[int64][]string{user: {"made-while-down", "second"}}); err != nil {
		t.Fatal(err)
	}
	l.RemoveConn(ctx, user, "second", "B") // the dead node's leftover: not its any more
	if l.AddConn(ctx, user, "third", "B", max) {
		t.Fatal("a client id taken over from a dead node by a refresh does not count")
	}
}

// TestAConnectionThatEndedWhileRedisFailedStopsCountingOnceItAnswers: a
// device disconnects while Redis does not answer (a failover, a pause), so
// its node cannot remove it from the shared count then. Once Redis
// answers again the removal must be made, not left until the entry
// expires (ConnTTL, 90 s): meanwhile the user, at the cap, is refused a
// connection from the device that replaced it.
func TestAConnectionThatEndedWhileRedisFailedStopsCountingOnceItAnswers(t *testing.T) {
	url, _ := redistest.Start(t)
	l := newTestLimiter(t, Config{RedisURL: url, Timeout: 100 * time.Millisecond, RetryInterval: 20 * time.Millisecond})
	ctl := redis.NewClient(mustParseURL(t, url))
	t.Cleanup(func() { _ = ctl.Close() })
	ctx := context.Background()
	const user, max = 9, 1
	if !l.AddConn(ctx, user, "phone", "A", max) {
		t.Fatal("the phone refused")
	}
	// Redis stops answering writes for a moment; the phone disconnects.
	if err := ctl.Do(ctx, "CLIENT", "PAUSE", "500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	l.RemoveConn(ctx, user, "phone", "A")
	if l.Shared() {
		t.Fatal("the removal reached Redis during the pause")
	}
	testkit.WaitFor(t, 5*time.Second, "Redis to answer again", func() bool {
		l.Take(ctx, chat.RateAPI, "probe", chat.RateLimit{Rate: 1000, Burst: 1000})
		return l.Shared()
	})
	if !l.AddConn(ctx, user, "laptop", "A", max) {
		t.Fatal("the device replacing the phone refused: the phone that disconnected during the pause still counts")
	}
	if l.AddConn(ctx, user, "tablet", "B", max) {
		t.Fatal("a second device admitted over a cap of 1")
	}
}

func mustParseURL(t *testing.T, url string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestARefreshMakesTheRemovalsRedisDidNotTake: the node's next refresh
// makes a removal Redis did not take, also when the node holds no
// connection any more; one whose client id connected again is not made.
func TestARefreshMakesTheRemovalsRedisDidNotTake(t *testing.T) {
	url, _ := redistest.Start(t)
	l := newTestLimiter(t, Config{RedisURL: url, Timeout: 100 * time.Millisecond, RetryInterval: 20 * time.Millisecond})
	ctl := redis.NewClient(mustParseURL(t, url))
	t.Cleanup(func() { _ = ctl.Close() })
	ctx := context.Background()
	const user, max = 10, 5
	for _, id := range []string{"phone", "watch"} {
		if !l.AddConn(ctx, user, id, "A", max) {
			t.Fatalf("%s refused", id)
		}
	}
	if err := ctl.Do(ctx, "CLIENT", "PAUSE", "300", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	l.RemoveConn(ctx, user, "phone", "A")
	l.RemoveConn(ctx, user, "watch", "A")
	l.AddConn(ctx, user, "watch", "A", max) // back while Redis fails: not recorded, and no removal any more
	testkit.WaitFor(t, 5*time.Second, "the refresh to reach Redis again", func() bool {
		return l.RefreshConns(ctx, "A", map[int64][]string{user: {"watch"}}) == nil && l.Shared()
	})
	ids, err := ctl.ZRange(ctx, l.connKeys(user)[0], 0, -1).Result()
	if err != nil || len(ids) != 1 || ids[0] != "watch" {
		t.Fatalf("counted after the refresh: %v %v, want [watch]", ids, err)
	}
	l.RemoveConn(ctx, user, "watch", "A")
	if n, err := ctl.ZCard(ctx, l.connKeys(user)[0]).Result(); err != nil || n != 0 {
		t.Fatalf("%d counted after the last removal: %v", n, err)
	}
}
