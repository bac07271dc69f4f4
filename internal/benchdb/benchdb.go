//go:build unix

// Package benchdb is the PostgreSQL the benchmarks (cmd/pushbench,
// cmd/searchbench, cmd/sendbench) run on when they are given no database
// URL: a private embedded cluster in a temporary directory, fsync on as on
// a production server, removed afterwards.
package benchdb

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
)

// Start starts a private cluster with settings (over fsync and
// synchronous_commit on) and creates the database name in it; the
// temporary directory is named after it too. stop stops the cluster and
// removes its directory.
func Start(ctx context.Context, name string, settings map[string]string) (c *pgembed.Cluster, stop func(), err error) {
	dir, err := os.MkdirTemp("", name)
	if err != nil {
		return nil, nil, fmt.Errorf("make temp dir: %w", err)
	}
	// When run as root, PostgreSQL runs as an unprivileged account that must
	// be able to enter the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("chmod temp dir: %w", err)
	}
	all := map[string]string{"fsync": "on", "synchronous_commit": "on"}
	maps.Copy(all, settings)
	c, err = pgembed.Start(ctx, pgembed.Options{
		DataDir:  filepath.Join(dir, "data"),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Settings: all,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start embedded PostgreSQL: %w", err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(ctx, false)
		os.RemoveAll(dir)
	}
	if err := c.CreateDatabase(ctx, name); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}
