package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/pgtest"
)

// A scrape must answer while the database is stuck: that is when its
// metrics matter. chat_blob_deletions_pending counted the deletion queue
// without a deadline, so a table lock held by another session (a
// VACUUM FULL, a migration, an ad-hoc transaction), or a database that
// stopped answering, held every /metrics response until the scrape timed
// out: Prometheus saw the target down and had no chat_pg_up to alert on.
// The count now gives up within the scrape budget, as chat_pg_up does.
func TestMetricsAnswerWhileATableTheyCountIsLocked(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	pgtest.LockTable(t, url, "blob_deletion IN ACCESS EXCLUSIVE MODE")

	c := &http.Client{Timeout: 10 * time.Second} // Prometheus's default scrape timeout
	start := time.Now()
	resp, err := c.Get("http://" + srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatalf("scrape while blob_deletion is locked: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); resp.StatusCode != http.StatusOK || took > 5*time.Second {
		t.Fatalf("scrape answered %d after %v", resp.StatusCode, took)
	}
	if !strings.Contains(string(body), "\nchat_pg_up 1\n") {
		t.Fatalf("no chat_pg_up 1 in the scrape:\n%s", body)
	}
}

// /metrics answers whoever reaches its listener, the public HTTP one
// unless metrics_addr is set. Every scrape used to ask the database on its
// own, so concurrent requests while the database was slow held as many
// pool connections as they were, all of them at once, and the sends had
// none left. Scrapes now share one query at a time.
func TestConcurrentScrapesShareOneDatabaseQuery(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, map[string]string{"CHAT_DB_MAX_CONNS": "4"})
	release := pgtest.LockTable(t, url, "blob_deletion IN ACCESS EXCLUSIVE MODE")
	watch, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())

	c := &http.Client{Timeout: 10 * time.Second}
	done := make(chan struct{})
	for range 12 {
		go func() {
			defer func() { done <- struct{}{} }()
			if resp, err := c.Get("http://" + srv.HTTPAddr() + "/metrics"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	// The scrapes' query only: the background deletion round reads the
	// locked table too and would count as a second waiter.
	most := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var n int
		if err := watch.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%count(*) FROM blob_deletion%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
	}
	release()
	for range 12 {
		<-done
	}
	if most > 1 {
		t.Fatalf("%d pool connections of 4 waited at once for the scrapes' count of blob_deletion", most)
	}
}

// /readyz is on the public HTTP listener, unauthenticated, as probes need.
// Each request pinged PostgreSQL through the pool on its own, so a burst of
// them took as many connections as it had requests (all of them while the
// database was slow). Probes now share one ping, with chat_pg_up: one at a
// time, its answer reused for 0.5 s.
func TestABurstOfReadinessProbesSharesOnePing(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) {
		resp, err := c.Get("http://" + srv.HTTPAddr() + path)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s answered %d", path, resp.StatusCode)
		}
	}
	get("/readyz") // the first ping, and connections to spare
	before := srv.Pool.Stat().AcquireCount()
	done := make(chan struct{})
	const probes = 60
	for range probes {
		go func() {
			defer func() { done <- struct{}{} }()
			get("/readyz")
		}()
	}
	for range probes {
		<-done
	}
	// The node's own work acquires a few meanwhile; one per probe is what
	// must not happen.
	if n := srv.Pool.Stat().AcquireCount() - before; n > probes/3 {
		t.Fatalf("%d probes acquired %d pool connections", probes, n)
	}
}
