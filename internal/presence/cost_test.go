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
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
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
