package ratelimit

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redistest"
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
