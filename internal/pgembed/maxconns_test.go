//go:build unix

package pgembed_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgembed"
)

// A pool larger than initdb's max_connections (100) used to start, then
// fail under load: once the pool opened its hundredth connection,
// PostgreSQL refused the next ("sorry, too many clients already") and
// sends failed. The embedded cluster takes every connection the pool may
// open, and the sessions a node and chatctl open beside it.
func TestAnEmbeddedClusterTakesEveryConnectionOfALargePoolAndTheSessionsBesideIt(t *testing.T) {
	ctx := context.Background()
	const size = 150
	_, pool, closeDB := startCluster(t, pgembed.OpenOwner, size)
	defer closeDB(ctx)
	conns := make([]*pgxpool.Conn, 0, size)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for len(conns) < size {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("connection %d of a pool of %d: %v", len(conns)+1, size, err)
		}
		conns = append(conns, c)
	}
	// What a node opens beside its pool, and a chatctl command (a pool of 4).
	var extra [pgembed.SessionsBesidePool]*pgxpool.Conn
	cfg := pool.Config()
	cfg.MaxConns = int32(len(extra))
	side, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	for i := range extra {
		if extra[i], err = side.Acquire(ctx); err != nil {
			t.Fatalf("session %d beside the full pool: %v", i+1, err)
		}
		defer extra[i].Release()
	}
}
