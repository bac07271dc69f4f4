package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/shutdown"
)

// Database is the name of chatd's database in the embedded cluster.
const Database = "chat"

// LockFile is the name, inside the data dir, of the file whose lock marks
// the process that owns the data dir's embedded PostgreSQL.
const LockFile = "chatd.lock"

// ErrDataDirInUse is returned (wrapped) when another live process holds the
// data dir's lock.
var ErrDataDirInUse = errors.New("data dir in use by another process")

// PGDir returns the embedded cluster's directory inside dataDir.
func PGDir(dataDir string) string { return filepath.Join(dataDir, "pg") }

// readyTimeout bounds the wait for a running postmaster that is still
// starting up, and for a data dir whose owner is starting its cluster.
const readyTimeout = 30 * time.Second

// Open returns a pool on databaseURL or, when it is empty, on the embedded
// cluster in dataDir, joining the server already running there (chatctl's
// way; see the package documentation). maxConns <= 0 takes OpenPool's
// default. logger may be nil.
func Open(ctx context.Context, databaseURL, dataDir string, maxConns int32, logger *slog.Logger, opts ...PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	return open(ctx, databaseURL, dataDir, maxConns, logger, false, opts)
}

// OpenOwner is Open for the process that serves the data dir (chatd): it
// takes the data dir's lock for as long as the pool is open and starts the
// embedded cluster itself, never joining one. Another live process holding
// the lock is an error wrapping ErrDataDirInUse; a server left by a
// previous owner that died is waited for (it is shutting down, or a zombie
// waiting to be reaped) and its data recovered by PostgreSQL as it
// starts. With a database URL there is no lock: any number of nodes may
// share one external database.
func OpenOwner(ctx context.Context, databaseURL, dataDir string, maxConns int32, logger *slog.Logger, opts ...PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	return open(ctx, databaseURL, dataDir, maxConns, logger, true, opts)
}

func open(ctx context.Context, databaseURL, dataDir string, maxConns int32, logger *slog.Logger, owner bool, opts []PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if databaseURL != "" {
		pool, err := openAndPing(ctx, databaseURL, maxConns, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("open database from the database URL: %w; check CHAT_DATABASE_URL / --database-url", err)
		}
		return pool, closer(pool, nil, nil), nil
	}
	if dataDir == "" {
		return nil, nil, errors.New("open embedded database: no data dir given; set CHAT_DATA_DIR or CHAT_DATABASE_URL")
	}
	if err := prepareDataDir(dataDir, logger); err != nil {
		return nil, nil, err
	}
	if owner {
		lock, err := lockDataDir(dataDir)
		if errors.Is(err, ErrDataDirInUse) {
			return nil, nil, fmt.Errorf("open embedded database in %s: %w; another chatd serves this data dir and its PostgreSQL, and a second one would lose the database when the first stops: stop it, give this chatd a CHAT_DATA_DIR of its own, or point every node at one PostgreSQL with CHAT_DATABASE_URL", dataDir, err)
		}
		if err != nil {
			return nil, nil, err
		}
		return startEmbedded(ctx, dataDir, maxConns, logger, lock, opts)
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		pool, closeDB, err := joinRunning(ctx, dataDir, maxConns, logger, opts)
		if err == nil || !errors.Is(err, errNotRunning) {
			return pool, closeDB, err
		}
		lock, err := lockDataDir(dataDir)
		if err == nil {
			return startEmbedded(ctx, dataDir, maxConns, logger, lock, opts)
		}
		if !errors.Is(err, ErrDataDirInUse) {
			return nil, nil, err
		}
		// The owner is starting its cluster (or stopping it): wait to join.
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("open embedded database in %s: %w, but no PostgreSQL answers there after %v", dataDir, err, readyTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exits holds, for each pool on an embedded cluster this process started,
// the channel closed when its postmaster exits (Exited).
var exits sync.Map // *pgxpool.Pool -> <-chan struct{}

// Exited is closed when the embedded PostgreSQL that Open or OpenOwner
// started for pool exits, whatever the reason: after a crash of its
// postmaster nothing starts it again, so its owner must stop. It is nil
// (never ready) for a pool on a database URL or on a server this process
// joined, and once pool's close function ran.
func Exited(pool *pgxpool.Pool) <-chan struct{} {
	if ch, ok := exits.Load(pool); ok {
		return ch.(<-chan struct{})
	}
	return nil
}

// errNotRunning: no live postmaster owns the embedded cluster's directory.
var errNotRunning = errors.New("embedded PostgreSQL is not running")

// joinRunning connects to the live postmaster of dataDir's cluster, or
// returns errNotRunning.
func joinRunning(ctx context.Context, dataDir string, maxConns int32, logger *slog.Logger, opts []PoolOption) (*pgxpool.Pool, func(context.Context) error, error) {
	pm, ok, err := FindPostmaster(PGDir(dataDir))
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, errNotRunning
	}
	logger.Info("connecting to the running embedded PostgreSQL", "pid", pm.PID, "socket", pm.SocketPath())
	if err := pm.WaitReady(ctx, readyTimeout); err != nil {
		return nil, nil, err
	}
	if err := EnsureDatabase(ctx, pm.URL("postgres"), Database); err != nil {
		return nil, nil, err
	}
	pool, err := openAndPing(ctx, pm.URL(Database), maxConns, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("open database on the running PostgreSQL (pid %d): %w", pm.PID, err)
	}
	return pool, closer(pool, nil, nil), nil
}

func openAndPing(ctx context.Context, url string, maxConns int32, opts ...PoolOption) (*pgxpool.Pool, error) {
	pool, err := OpenPool(ctx, url, maxConns, opts...)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// ClosePool closes pool within ctx. pgxpool's Close waits until every
// connection in use is given back, and a goroutine that does not stop
// while it holds one would hold its caller for ever: when ctx ends first,
// the connections in use are left to the goroutines holding them. Idle
// connections are always closed.
func ClosePool(ctx context.Context, pool *pgxpool.Pool) error {
	var closing sync.WaitGroup
	closing.Go(pool.Close)
	err := shutdown.Wait(ctx, &closing)
	if err == nil {
		return nil
	}
	if n := pool.Stat().AcquiredConns(); n > 0 {
		return fmt.Errorf("close database pool: connections still in use (%d): %w", n, err)
	}
	closing.Wait() // no connection in use: only idle ones to close, a bounded wait
	return nil
}

// closer closes the pool, then stops the cluster (if any), then releases
// the data dir's lock (if held), once.
func closer(pool *pgxpool.Pool, stop func(context.Context) error, lock *dirLock) func(context.Context) error {
	var once sync.Once
	var err error
	return func(ctx context.Context) error {
		once.Do(func() {
			err = ClosePool(ctx, pool)
			if stop != nil {
				if e := stop(ctx); e != nil {
					err = errors.Join(err, fmt.Errorf("stop embedded PostgreSQL: %w", e))
				}
			}
			lock.release()
		})
		return err
	}
}

// EnsureDatabase creates database db through adminURL (a connection to an
// existing database, e.g. "postgres") unless it exists.
func EnsureDatabase(ctx context.Context, adminURL, db string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil {
		return fmt.Errorf("check database %s: %w", db, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P04" { // duplicate_database: created concurrently
			return nil
		}
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}

// prepareDataDir makes dataDir traversable by the unprivileged account the
// embedded PostgreSQL runs as when we are root: pgembed creates missing
// parents of <dataDir>/pg with mode 0700, which that account cannot enter.
// Only the search (x) bit is added, so nobody else can list the directory,
// and files in it (jwt.secret is 0600) keep their own modes.
func prepareDataDir(dataDir string, logger *slog.Logger) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.MkdirAll(dataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("stat data dir: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o001 == 0 {
		logger.Info("making the data dir traversable for the embedded PostgreSQL account", "dir", dataDir, "mode", fmt.Sprintf("%#o", perm|0o001))
		if err := os.Chmod(dataDir, perm|0o001); err != nil {
			return fmt.Errorf("chmod data dir: %w", err)
		}
	}
	return nil
}
