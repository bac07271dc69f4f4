package presence_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/store"
)

// roundTrips counts the round trips a pool makes: each query, and each
// batch as one.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestAnOfflineClaimIsOneRoundTrip: every departure announced offline
// claims it (store.Presence.ClaimOffline) on top of its connection
// write; the claim's transaction (lock the users, then claim in a
// statement of its own) is sent as one pipeline, not four round trips.
func TestAnOfflineClaimIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	trips := &roundTrips{}
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = trips })
	pr := store.NewPresence(pool, presence.TTL(5*time.Second))
	if _, err := pr.ClaimOnline(ctx, []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.ClaimOffline(ctx, "a", []int64{1, 2}); err != nil { // statements prepared
		t.Fatal(err)
	}
	if _, err := pr.ClaimOnline(ctx, []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	before := trips.n.Load()
	claimed, err := pr.ClaimOffline(ctx, "a", []int64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := trips.n.Load() - before; n != 1 {
		t.Errorf("an offline claim took %d round trips, want 1", n)
	}
	if len(claimed) != 2 {
		t.Errorf("claimed %v, want users 1 and 2", claimed)
	}
}

// newPool is a pool on a fresh database, configured by configure, closed
// when the test ends.
func newPool(t *testing.T, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestAHeartbeatIsOneRoundTrip: every node beats one per interval; telling
// a revival (the row's incarnation, store.Presence.Heartbeat) costs no
// round trip of its own.
func TestAHeartbeatIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	trips := &roundTrips{}
	pr := store.NewPresence(newPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = trips }), presence.TTL(5*time.Second))
	for i, want := range []bool{true, false} { // the first prepares the statement
		before := trips.n.Load()
		revived, err := pr.Heartbeat(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if revived != want {
			t.Errorf("heartbeat %d: revived %v, want %v", i+1, revived, want)
		}
		if n := trips.n.Load() - before; i > 0 && n != 1 {
			t.Errorf("a heartbeat took %d round trips, want 1", n)
		}
	}
}
