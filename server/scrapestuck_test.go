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
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), `LOCK TABLE blob_deletion IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

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
