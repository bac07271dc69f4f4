//go:build unix

package pgembed

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// startEmbedded starts dataDir's cluster as its owner; the returned close
// function stops it, then releases lock. On error the lock is released.
func startEmbedded(ctx context.Context, dataDir string, maxConns int32, logger *slog.Logger, lock *dirLock, opts []PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	pgDir := PGDir(dataDir)
	cluster, err := Start(ctx, Options{DataDir: pgDir, Logger: logger})
	if err != nil {
		lock.release()
		return nil, nil, fmt.Errorf("start embedded PostgreSQL in %s: %w", pgDir, err)
	}
	stop := func(ctx context.Context) error { return cluster.Stop(ctx, false) }
	if err := cluster.CreateDatabase(ctx, Database); err != nil {
		_ = stop(context.WithoutCancel(ctx))
		lock.release()
		return nil, nil, fmt.Errorf("create database %s: %w", Database, err)
	}
	pool, err := openAndPing(ctx, cluster.URL(Database), maxConns, opts...)
	if err != nil {
		_ = stop(context.WithoutCancel(ctx))
		lock.release()
		return nil, nil, fmt.Errorf("open embedded database: %w", err)
	}
	exits.Store(pool, cluster.Exited())
	return pool, closer(pool, func(ctx context.Context) error {
		exits.Delete(pool)
		return stop(ctx)
	}, lock), nil
}
