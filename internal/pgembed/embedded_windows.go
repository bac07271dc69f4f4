//go:build windows

package pgembed

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// errNoEmbedded: the embedded cluster runs PostgreSQL as an unprivileged
// user, in a process group of its own, signalled to stop (cluster.go), all
// of which is unix.
var errNoEmbedded = errors.New("embedded PostgreSQL needs a unix system: on Windows set CHAT_DATABASE_URL to an existing database")

// dirLock exists so that open compiles; lockDataDir never returns one.
type dirLock struct{}

func lockDataDir(string) (*dirLock, error) { return nil, errNoEmbedded }

func (l *dirLock) release() {}

func startEmbedded(context.Context, string, int32, *slog.Logger, *dirLock, []PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	return nil, nil, errNoEmbedded
}
