//go:build unix

package pgembed

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// embeddedSettings are what chatd's embedded cluster runs with beyond
// initdb's defaults (postgres -c, over postgresql.conf).
//
// wal_init_zero off: PostgreSQL creates a WAL segment without first
// writing its 16 MB of zeros. It creates one every 16 MB of WAL until
// checkpoints have old ones to recycle (a new cluster's first minutes, a
// burst beyond what the last checkpoints kept), inside the WAL write of
// whichever commit crosses into it, holding the WAL write lock: every
// commit in flight waits for it. Measured on a 2-core VM (docs/benchmarks.md,
// efficiency, 2026-12-05): a commit that opens a new segment took 11-12 ms
// with the zeros and 1.5-1.7 ms without, and at 1,000 direct msgs/s (a
// segment every 5.5 s) the commits in flight at a segment's creation
// waited 12-94 ms. Without the zeros a segment's blocks are allocated as
// WAL reaches them; no cost of that showed in commits into a fresh segment.
//
// max_locks_per_transaction 256, not 64: PostgreSQL's table of locks holds
// that many per connection, shared by all, and a group created or joined
// takes about two per member it pairs up (store: lockPairs and
// lockSharing; some 400 for a group of 200 created at once). With 64, a
// burst of 40 such creates on a pool of 32 filled it and PostgreSQL
// refused the creates that found it full ("out of shared memory"). The
// table's shared memory grows with it: 145 MB to 157 MB in all at 140
// connections (postgres -C shared_memory_size, PostgreSQL 15).
var embeddedSettings = map[string]string{"wal_init_zero": "off", "max_locks_per_transaction": "256"}

// SessionsBesidePool is how many sessions the embedded cluster keeps room
// for beyond its owner's pool: the node's own (group commit, the notice
// and push listeners, the node id's lock, the relay's lease: 9) and
// chatctl commands joining it (a pool of 4 each) and an operator's psql.
const SessionsBesidePool = 40

// initdbMaxConnections is the max_connections initdb writes into
// postgresql.conf.
const initdbMaxConnections = 100

// settingsFor are embeddedSettings for an owner whose pool opens up to
// maxConns: a pool that with SessionsBesidePool does not fit initdb's
// max_connections raises it, or the server would refuse the pool's
// connections beyond it under load ("sorry, too many clients already")
// after a start that looked fine.
func settingsFor(maxConns int32) map[string]string {
	s := maps.Clone(embeddedSettings)
	if n := int(maxConns) + SessionsBesidePool; n > initdbMaxConnections {
		s["max_connections"] = strconv.Itoa(n)
	}
	return s
}

// abandonStopWait bounds the fast shutdown of a cluster whose start was
// given up: it has done nothing yet that a checkpoint must keep.
const abandonStopWait = 5 * time.Second

// startEmbedded starts dataDir's cluster as its owner; the returned close
// function stops it, then releases lock. On error the lock is released.
func startEmbedded(ctx context.Context, dataDir string, maxConns int32, logger *slog.Logger, lock *dirLock, opts []PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	pgDir := PGDir(dataDir)
	cluster, err := Start(ctx, Options{DataDir: pgDir, Logger: logger, Settings: settingsFor(maxConns)})
	if err != nil {
		lock.release()
		return nil, nil, fmt.Errorf("start embedded PostgreSQL in %s: %w", pgDir, err)
	}
	stop := func(ctx context.Context) error { return cluster.Stop(ctx, false) }
	// abandon stops the cluster of a start given up, within a bound of its
	// own (the start's context may have ended: that is often why): a
	// postmaster that does not act on the fast shutdown gets an immediate
	// one, then SIGKILL (Cluster.Stop), rather than holding the process.
	abandon := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonStopWait)
		defer cancel()
		_ = stop(sctx)
	}
	if err := cluster.CreateDatabase(ctx, Database); err != nil {
		abandon()
		lock.release()
		return nil, nil, fmt.Errorf("create database %s: %w", Database, err)
	}
	pool, err := openAndPing(ctx, cluster.URL(Database), maxConns, opts...)
	if err != nil {
		abandon()
		lock.release()
		return nil, nil, fmt.Errorf("open embedded database: %w", err)
	}
	exits.Store(pool, cluster.Exited())
	return pool, closer(pool, func(ctx context.Context) error {
		exits.Delete(pool)
		return stop(ctx)
	}, lock), nil
}
