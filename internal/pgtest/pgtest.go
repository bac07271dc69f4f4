// Package pgtest gives tests a real PostgreSQL: one throwaway cluster per
// test binary (initdb into a temp dir, Unix socket only) and a fresh,
// migrated database per test, cloned from a template so it costs milliseconds.
//
// Use it from a TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and in a test: url := pgtest.NewDB(t), or st, pool := pgtest.NewStore(t, limits). Test clusters run with fsync off;
// crash-safety tests that need durability use Cluster() and their own settings.
package pgtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

var (
	mu       sync.Mutex
	cluster  *pgembed.Cluster
	dir      string
	startErr error
	tmplDone bool
	seq      atomic.Int64
	// running: the tests run through Run, which removes the cluster's
	// files afterwards. A cluster started without it would leave its data
	// directory (some 200 MB) in the temporary directory at every run.
	running bool
)

// Main runs the tests, stops the cluster afterwards and exits.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs the tests and stops the cluster afterwards, answering the exit
// code: a package's TestMain that has more to clean up calls it instead
// of Main. Cluster refuses to start a cluster unless the tests run so.
func Run(m *testing.M) int {
	mu.Lock()
	running = true
	mu.Unlock()
	code := m.Run()
	shutdown()
	return code
}

// shutdown stops the shared cluster and removes its files.
func shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = cluster.Stop(ctx, false)
		cancel()
		cluster = nil
	}
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
	}
}

// Cluster returns the shared test cluster, starting it on first use.
func Cluster(t testing.TB) *pgembed.Cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !running {
		t.Fatal("pgtest: the package's TestMain must run the tests through pgtest.Main or pgtest.Run, which remove the test cluster's files afterwards")
	}
	if cluster == nil && startErr == nil {
		startErr = start()
	}
	if startErr != nil {
		t.Fatalf("start test PostgreSQL: %v", startErr)
	}
	return cluster
}

func start() error {
	d, err := os.MkdirTemp("", "pgt")
	if err != nil {
		return err
	}
	dir = d
	os.Chmod(d, 0o755)
	c, err := pgembed.Start(context.Background(), pgembed.Options{
		DataDir: d + "/data",
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Settings: map[string]string{
			"fsync":              "off",
			"full_page_writes":   "off",
			"synchronous_commit": "off",
			"max_connections":    "400",
			"shared_buffers":     "128MB",
		},
	})
	if err != nil {
		return err
	}
	cluster = c
	return nil
}

// TCPPool starts a cluster of the test's own that listens on 127.0.0.1 and
// returns a pool on its postgres database over TCP: the shared cluster
// listens on a Unix socket only, where PostgreSQL applies none of its TCP
// settings (tcp_keepalives_*, tcp_user_timeout; SHOW answers 0). Both are
// closed at the end of the test.
func TCPPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	d, err := os.MkdirTemp("", "pgtcp")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755) // for the account initdb and postgres run as
	t.Cleanup(func() { os.RemoveAll(d) })
	port := testkit.FreePort(t)
	c, err := pgembed.Start(context.Background(), pgembed.Options{
		DataDir: d + "/data", Port: port,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Settings: map[string]string{"listen_addresses": "127.0.0.1", "fsync": "off"},
	})
	if err != nil {
		t.Fatalf("start PostgreSQL on TCP: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(ctx, true)
	})
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Show answers SHOW setting on conn, a session the test opened as the code
// under test does (what the server applies to it).
func Show(t testing.TB, conn *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), "SHOW "+pgx.Identifier{setting}.Sanitize()).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", setting, err)
	}
	return v
}

// NewDB creates a fresh migrated database for this test and returns its URL.
func NewDB(t testing.TB) string {
	t.Helper()
	c := Cluster(t)
	ctx := context.Background()
	mu.Lock()
	defer mu.Unlock()
	if !tmplDone {
		if err := makeTemplate(ctx, c); err != nil {
			t.Fatalf("make template database: %v", err)
		}
		tmplDone = true
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), seq.Add(1))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	// The template's last backend may still be exiting: retry briefly.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE chat_template")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create test database: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c.URL(name)
}

// NewPool is NewDB plus a pool closed at the end of the test.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgembed.OpenPool(context.Background(), NewDB(t), 64)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewStore is NewPool with a store on it (limits l and the options given),
// closed at the end of the test before the pool is.
func NewStore(t testing.TB, l chat.Limits, opts ...store.Option) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool := NewPool(t)
	st := store.New(pool, l, opts...)
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st, pool
}

func makeTemplate(ctx context.Context, c *pgembed.Cluster) error {
	if err := c.CreateDatabase(ctx, "chat_template"); err != nil {
		return err
	}
	pool, err := pgembed.OpenPool(ctx, c.URL("chat_template"), 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = store.Migrate(ctx, pool)
	return err
}

// QueryOne is the one value (of the one row) that sql, with args, answers
// on pool; an error fails the test.
func QueryOne[T any](t testing.TB, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	return queryOne[T](t, sql, pool, sql, args...)
}

// queryOne is QueryOne failing the test with "<what>: <error>".
func queryOne[T any](t testing.TB, what string, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// LockWaiters counts the sessions of pool's database that wait for a lock:
// a race test holds one side's lock and polls this until the other side
// queues behind it.
func LockWaiters(t testing.TB, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryOne[int64](t, "count lock waiters", pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`)
}

// LockTable takes lock ("message IN ACCESS EXCLUSIVE MODE") in a
// transaction of its own connection to the database at url, so that what
// needs the table waits: a test of what stays responsive while the
// database is stuck. release ends the transaction; the test's cleanup does
// it too (before the cleanups registered earlier, such as a node's, which
// may wait for what the lock holds up).
func LockTable(t testing.TB, url, lock string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("lock %s: %v", lock, err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE "+lock)
	}
	if err != nil {
		conn.Close(ctx)
		t.Fatalf("lock %s: %v", lock, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			conn.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}

// LockConversation locks conversation id's row (FOR UPDATE) in a
// transaction of its own on pool, so that every change of that
// conversation waits: a send or RPC held in flight. release ends the
// transaction; the test's cleanup does it too.
func LockConversation(t testing.TB, ctx context.Context, pool *pgxpool.Pool, id int64) (release func()) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, allowIdleSQL)
	}
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT 1 FROM conversation WHERE id = $1 FOR UPDATE`, id)
	}
	if err != nil {
		t.Fatalf("lock conversation %d: %v", id, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	return release
}

// allowIdleSQL turns the pool's idle_in_transaction_session_timeout off
// for a helper's transaction that holds a lock while the test runs: it is
// idle for as long as the test takes, and PostgreSQL ending its session
// would let go of the lock under the test.
const allowIdleSQL = `SET LOCAL idle_in_transaction_session_timeout = 0`

// HoldAfterInsert makes every INSERT into table wait, after its row is
// written and before its transaction goes on, until release is called (a
// test trigger waits for an advisory lock the test holds): a race test
// parks one side there, uncommitted, and runs the other.
func HoldAfterInsert(t testing.TB, ctx context.Context, pool *pgxpool.Pool, table string) (release func()) {
	t.Helper()
	return hold(t, ctx, pool, "AFTER INSERT ON "+table, "NEW")
}

// HoldAfterUpdate makes every UPDATE of table wait, after each row it
// changes is written and before its transaction goes on, until release is
// called, as HoldAfterInsert does.
func HoldAfterUpdate(t testing.TB, ctx context.Context, pool *pgxpool.Pool, table string) (release func()) {
	t.Helper()
	return hold(t, ctx, pool, "AFTER UPDATE ON "+table, "NEW")
}

// HoldBeforeDelete makes every DELETE from table wait before it deletes
// a row (the rows it locked before stay locked, not deleted) until
// release is called, as HoldAfterInsert does.
func HoldBeforeDelete(t testing.TB, ctx context.Context, pool *pgxpool.Pool, table string) (release func()) {
	t.Helper()
	return hold(t, ctx, pool, "BEFORE DELETE ON "+table, "OLD")
}

// hold installs a row trigger at when that waits for an advisory lock the
// test holds until release; row is what the trigger returns.
func hold(t testing.TB, ctx context.Context, pool *pgxpool.Pool, when, row string) (release func()) {
	t.Helper()
	for _, sql := range []string{
		`CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_xact_lock(424242); RETURN ` + row + `; END $$`,
		`CREATE TRIGGER test_hold ` + when + ` FOR EACH ROW EXECUTE FUNCTION test_hold()`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("hold %s: %v", when, err)
		}
	}
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, allowIdleSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock(424242)`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
