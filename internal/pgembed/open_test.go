package pgembed_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// dataDir makes a data dir PostgreSQL (running unprivileged under root)
// can reach.
func dataDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dbopen")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "data")
}

// openFunc is pgembed.Open or pgembed.OpenOwner.
type openFunc func(ctx context.Context, databaseURL, dataDir string, maxConns int32, logger *slog.Logger, opts ...pgembed.PoolOption) (*pgxpool.Pool, func(context.Context) error, error)

// startCluster starts the embedded cluster in a fresh data dir with open,
// failing t if it does not start; in -short mode it skips t instead.
func startCluster(t *testing.T, open openFunc, maxConns int32) (dir string, pool *pgxpool.Pool, closeDB func(context.Context) error) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	dir = dataDir(t)
	pool, closeDB, err := open(context.Background(), "", dir, maxConns, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	return dir, pool, closeDB
}

// writeMarker commits the row wantMarker looks for, to tell whether a later
// pool reaches the same cluster, and whether its data outlived a restart.
func writeMarker(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(ctx, "CREATE TABLE marker (v int); INSERT INTO marker VALUES (7)"); err != nil {
		t.Fatal(err)
	}
}

// wantMarker fails t, saying what went wrong, unless pool reads the row
// writeMarker committed.
func wantMarker(t *testing.T, ctx context.Context, pool *pgxpool.Pool, what string) {
	t.Helper()
	var v int
	if err := pool.QueryRow(ctx, "SELECT v FROM marker").Scan(&v); err != nil || v != 7 {
		t.Fatalf("%s: v=%d err=%v", what, v, err)
	}
}

func TestParsePostmasterPID(t *testing.T) {
	raw := "4242\n/var/lib/chatd/pg\n1700000000\n5432\n/var/lib/chatd/pg\n\n  5432001    131072\nready   \n"
	p, err := pgembed.ParsePostmasterPID(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := pgembed.Postmaster{PID: 4242, DataDir: "/var/lib/chatd/pg", Port: 5432, SocketDir: "/var/lib/chatd/pg", Status: "ready"}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	if got := p.URL("chat"); got != "host=/var/lib/chatd/pg port=5432 user=postgres dbname=chat sslmode=disable" {
		t.Errorf("URL = %q", got)
	}
	for _, bad := range []string{"", "x\n/d\n1\n5432\n/s\n", "1\n/d\n1\nport\n/s\n", "1\n/d\n1\n5432"} {
		if _, err := pgembed.ParsePostmasterPID(bad); err == nil {
			t.Errorf("ParsePostmasterPID(%q) accepted", bad)
		}
	}
}

func writePID(t *testing.T, dir string, pid int) {
	t.Helper()
	os.MkdirAll(dir, 0o700)
	body := strconv.Itoa(pid) + "\n" + dir + "\n1700000000\n5432\n" + dir + "\n\n1 2\nready   \n"
	if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFindPostmasterStale(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := pgembed.FindPostmaster(dir); ok || err != nil {
		t.Fatalf("no pid file: ok=%v err=%v", ok, err)
	}
	// A dead process.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	writePID(t, dir, cmd.Process.Pid)
	if _, ok, err := pgembed.FindPostmaster(dir); ok || err != nil {
		t.Errorf("dead pid: ok=%v err=%v", ok, err)
	}
	// A live process that is not postgres (a reused pid).
	writePID(t, dir, os.Getpid())
	if _, ok, err := pgembed.FindPostmaster(dir); ok || err != nil {
		t.Errorf("non-postgres pid: ok=%v err=%v", ok, err)
	}
	// A damaged file whose pid is dead is stale too.
	os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	if _, ok, err := pgembed.FindPostmaster(dir); ok || err != nil {
		t.Errorf("damaged stale file: ok=%v err=%v", ok, err)
	}
	// A damaged file without a pid is an error telling what to do.
	os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte("garbage"), 0o600)
	if _, _, err := pgembed.FindPostmaster(dir); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Errorf("damaged file: %v", err)
	}
}

// TestFindPostmasterLive reads the pid file of the test cluster.
func TestFindPostmasterLive(t *testing.T) {
	c := pgtest.Cluster(t)
	p, ok, err := pgembed.FindPostmaster(c.DataDir())
	if err != nil || !ok {
		t.Fatalf("live cluster not found: ok=%v err=%v", ok, err)
	}
	if p.SocketPath() != c.SocketPath() {
		t.Errorf("socket %s, want %s", p.SocketPath(), c.SocketPath())
	}
	if err := p.WaitReady(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	pool, closeDB, err := pgembed.Open(ctx, pgtest.NewDB(t), "", 4, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n == 0 {
		t.Errorf("migrated database not reached: n=%d err=%v", n, err)
	}
	if err := closeDB(ctx); err != nil {
		t.Fatal(err)
	}
	if err := closeDB(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}

	_, _, err = pgembed.Open(ctx, "host=/nonexistent port=1 user=x dbname=y connect_timeout=1", "", 1, quietLogger())
	if err == nil || !strings.Contains(err.Error(), "CHAT_DATABASE_URL") {
		t.Errorf("bad URL: %v", err)
	}
}

// TestOpenEmbeddedShared starts the embedded cluster, then opens it a
// second time as chatctl would while chatd runs: the second Open must join
// the running server, and closing it must leave that server up.
func TestOpenEmbeddedShared(t *testing.T) {
	ctx := context.Background()
	dir, first, closeFirst := startCluster(t, pgembed.Open, 4)
	defer closeFirst(ctx)
	writeMarker(t, ctx, first)
	pm, ok, err := pgembed.FindPostmaster(pgembed.PGDir(dir))
	if err != nil || !ok {
		t.Fatalf("FindPostmaster after start: ok=%v err=%v", ok, err)
	}

	second, closeSecond, err := pgembed.Open(ctx, "", dir, 2, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	wantMarker(t, ctx, second, "second Open did not reach the running cluster")
	var dd string
	if err := second.QueryRow(ctx, "SHOW data_directory").Scan(&dd); err != nil || dd != pm.DataDir {
		t.Errorf("second Open talks to the server of %q, want %q (err %v)", dd, pm.DataDir, err)
	}
	if err := closeSecond(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Ping(ctx); err != nil {
		t.Fatalf("closing the second Open broke the first: %v", err)
	}

	if err := closeFirst(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := pgembed.FindPostmaster(pgembed.PGDir(dir)); ok {
		t.Error("cluster still running after the owner closed it")
	}
	// Reopening restarts it with the data intact.
	third, closeThird, err := pgembed.Open(ctx, "", dir, 2, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer closeThird(ctx)
	wantMarker(t, ctx, third, "data lost across restart")
}

// TestEmbeddedClusterCreatesWALSegmentsWithoutZeros: a commit that crosses
// into a new WAL segment creates it holding the WAL write lock, so every
// commit in flight waits while it is made; the embedded cluster must not
// spend that time writing 16 MB of zeros first.
func TestEmbeddedClusterCreatesWALSegmentsWithoutZeros(t *testing.T) {
	ctx := context.Background()
	_, pool, closeDB := startCluster(t, pgembed.OpenOwner, 2)
	defer closeDB(ctx)
	var v string
	if err := pool.QueryRow(ctx, "SHOW wal_init_zero").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "off" {
		t.Errorf("wal_init_zero = %s, want off", v)
	}
}

// ClosePool waits for the pool to close as long as its context allows: a
// connection a goroutine still holds when the context ends is left to it,
// and the error says how many and why ClosePool stopped waiting; a pool
// with nothing in use closes and answers nil.
func TestClosePoolLeavesAConnectionStillInUseWhenItsContextEnds(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)

	t.Run("a connection in use", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		held, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = pgembed.ClosePool(cctx, pool)
		if err == nil || !strings.Contains(err.Error(), "connections still in use (1)") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ClosePool with a connection held: %v", err)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Fatalf("ClosePool held its caller %v past its context", waited)
		}
	})

	t.Run("nothing in use", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if err := pool.Ping(ctx); err != nil { // an idle connection to close
			t.Fatal(err)
		}
		if err := pgembed.ClosePool(ctx, pool); err != nil {
			t.Fatalf("ClosePool of an idle pool: %v", err)
		}
		if n := pool.Stat().TotalConns(); n != 0 {
			t.Fatalf("%d connections open after ClosePool", n)
		}
	})
}
